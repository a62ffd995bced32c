"""The dev-only static-expansion script: its BM25, its query terms and the model's word neighbours."""

import pytest

from benchmarks.retrieval.static_expansion import Bm25, WordNeighbours, query_terms, stem, words


def test_words_drop_stop_words_and_stems_fold_inflections():
    assert words("How long do we keep the Nightly backups?") == ["keep", "nightly", "backups"]
    assert stem("backups") == stem("backup") == "backup"
    assert stem("rehearsals") == stem("rehearsal")
    assert stem("is") == "is"  # too short to strip


def test_bm25_ranks_the_text_holding_the_rarer_term_first_and_weights_count():
    index = Bm25(["the vendor quoted a price", "the price went up", "lunch is at noon"])
    plain = index.scores({"vendor": 1.0, "price": 1.0})
    assert plain.argmax() == 0 and plain[2] == 0.0
    assert plain[1] > 0  # OR semantics: one shared term is enough
    half = index.scores({"vendor": 0.5, "price": 1.0})
    assert half[0] < plain[0] and half[1] == pytest.approx(plain[1])


def test_query_terms_keep_the_questions_words_at_full_weight():
    def fake(word, n, floor):
        return {"vendor": [("supplier", 0.6), ("price", 0.9)]}.get(word, [])[:n]

    assert query_terms("Which vendor?") == {"vendor": 1.0}
    terms = query_terms("Which vendor quoted the price?", fake, (2, 0.5, 0.3))
    assert terms[stem("supplier")] == pytest.approx(0.3)
    assert terms["price"] == 1.0  # the question's own word is never lowered by a neighbour's weight


@pytest.fixture(scope="module")
def neighbours():
    return WordNeighbours()


def test_the_models_word_vectors_give_synonyms_of_another_stem(neighbours):
    found = dict(neighbours("vendor", 5, 0.3))
    assert "supplier" in found and "vendors" not in found  # an inflection is the stemmer's business
    assert all(0.3 <= cosine < 1.0 for cosine in found.values())
    assert neighbours("notawordinthevocabularyatall", 5, 0.3) == []
    assert len(neighbours("customer", 2, 0.0)) == 2
