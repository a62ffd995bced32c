"""The dev-only dense variants script: how it turns a question into the statement-like text it embeds."""

from benchmarks.retrieval.query_variants import stripped


def test_question_words_go_and_the_rest_stays():
    assert (
        stripped("How long do we hold on to records of people signing in?") == "hold on to records of people signing in"
    )
    assert stripped("Which database objects failed to come across?") == "database objects failed to come across"
    assert stripped("What should people bring to the look-back meeting?") == "bring to the look-back meeting"


def test_a_question_without_question_words_is_kept():
    assert stripped("The retro date?") == "The retro date"
    assert stripped("What?") == "What?"  # nothing would be left: the question itself
