"""Look-alike letters of other scripts (SPEC 2.5 re-contamination guard, one row per fact; 6 integrity),
with the real embedding model and the real database.

An agent steered by a prompt injection writes a corrected (wrong) fact again with Cyrillic "а", "е",
"о", "р", "с" in place of the Latin letters: readers, and the agents the text is injected into, read
the same sentence, but NFKC does not map one script's letters to another's, so the text's key and the
tokenizer's pieces differ from the Latin sentence's. Colony reads such text through its confusable
skeleton (``brain.confusables``) wherever it compares texts: the key of one row per fact and of the
exact-text guard, and the text the model embeds. Each test is an attack and what Colony does instead;
the last ones check that legitimate non-Latin text is left alone.
"""

from __future__ import annotations

import pytest
from django.db import connection

from brain.confusables import embedding_text, fold_table, skeleton
from brain.embedding import embed_many
from brain.models import Thought
from tests.security.support import memory_answer as memory

pytestmark = pytest.mark.django_db

#: Latin letters and the Cyrillic letters drawn alike in every common font.
_CYRILLIC_LOOK_ALIKES = str.maketrans({"a": "\u0430", "e": "\u0435", "o": "\u043e", "p": "\u0440", "c": "\u0441"})


def cyrillic(text: str) -> str:
    """``text`` with every Latin a, e, o, p, c replaced by its Cyrillic look-alike."""
    changed = text.translate(_CYRILLIC_LOOK_ALIKES)
    assert changed != text and changed.isascii() is False
    return changed


def flagged_with_warning(body: dict) -> bool:
    stored = Thought.objects.get(pk=body["trace"]["thought_id"])
    return "contradicts_correction" in stored.quality_flags and (body["result"]["guidance"] or "").startswith("WARNING")


# --- the corrected fact, written with look-alikes --------------------------------------------------

WRONG = "The staging database listens on port 5433 for every service of the cluster."
RIGHT = "The staging database listens on port 5432."


def test_a_corrected_fact_written_with_cyrillic_look_alikes_is_flagged(dev, agent_factory, space):
    """Attack: after ``POST /thoughts/{id}/correct`` corrected WRONG, contribute WRONG with Cyrillic
    look-alikes. Expected (SPEC 2.5): flagged ``contradicts_correction``, the response warns with the
    correct fact, as for WRONG itself."""
    wrong = memory(dev, prompt=WRONG, topic="staging")["trace"]["thought_id"]
    corrected = agent_factory("qa").post(f"/api/v1/thoughts/{wrong}/correct", {"correct_fact": RIGHT}, format="json")
    assert corrected.status_code == 201, corrected.json()

    body = memory(agent_factory("dev"), prompt=cyrillic(WRONG), topic="staging")

    assert flagged_with_warning(body), body
    assert RIGHT in body["result"]["guidance"]


STALE = (
    "Deploying to staging: connect to vpn-old.example.org first, then run make deploy; the upload "
    "times out without the VPN."
)


def _correct_stale(dev, agent_factory) -> str:
    wrong = memory(dev, prompt=STALE, topic="deploy")["trace"]["thought_id"]
    memory(
        agent_factory("liaison"),
        prompt="CORRECTION: staging deploys go through vpn-new.example.org; vpn-old was shut down.",
        thought_category="correction",
        topic="deploy",
        corrected_fact="The staging VPN host is vpn-old.example.org.",
        correct_fact="The staging VPN host is vpn-new.example.org.",
        supersedes=[wrong],
    )
    assert Thought.objects.get(pk=wrong).superseded
    return wrong


def test_the_text_of_a_corrected_thought_written_with_look_alikes_is_flagged(dev, agent_factory, space):
    """Attack (stale-source re-contamination): the correction names its wrong fact in a short
    ``corrected_fact``; the superseded thought is a longer statement, caught when it comes back by its
    text's key (the exact-text guard), not by vectors. Sent again with Cyrillic look-alikes.
    Expected: flagged ``contradicts_correction`` with the WARNING guidance, as the Latin text is."""
    _correct_stale(dev, agent_factory)

    body = memory(agent_factory("dev"), prompt=cyrillic(STALE), topic="deploy")

    assert flagged_with_warning(body), body


def test_the_corrected_text_written_with_look_alikes_then_again_is_flagged_too(dev, agent_factory, space):
    """The look-alike copy is stored (flagged); the same copy once more, and the Latin text, are still
    flagged: a flagged repeat never becomes the "already known" live version of the wrong fact."""
    _correct_stale(dev, agent_factory)
    memory(agent_factory("dev"), prompt=cyrillic(STALE), topic="deploy")

    assert flagged_with_warning(memory(agent_factory("dev"), prompt=cyrillic(STALE), topic="deploy"))
    assert flagged_with_warning(memory(agent_factory("dev"), prompt=STALE, topic="deploy"))


# --- one row per fact ------------------------------------------------------------------------------

FACT = "The deploy pipeline runs the database migrations before it restarts the web workers."


_GREEK_LOOK_ALIKES = str.maketrans({"o": "\u03bf", "p": "\u03c1", "i": "\u03b9", "v": "\u03bd", "T": "\u03a4"})


def greek(text: str) -> str:
    """``text`` with Latin o, p, i, v, T replaced by Greek omicron, rho, iota, nu, capital tau."""
    return text.translate(_GREEK_LOOK_ALIKES)


@pytest.mark.parametrize("look_alike", [cyrillic, greek])
def test_a_live_thought_repeated_with_look_alikes_is_already_known(dev, agent_factory, space, look_alike):
    """Attack: copy a live thought with Cyrillic (or Greek) look-alikes, for a second row (a second
    vote in every count of agreement, a second place on the page). Expected: "already known", no new
    row, the stored text unchanged."""
    thought_id = memory(dev, prompt=FACT)["trace"]["thought_id"]

    again = memory(agent_factory("qa"), prompt=look_alike(FACT))

    assert (again["trace"]["already_known"], again["trace"]["thought_id"]) == (True, thought_id)
    assert list(Thought.objects.filter(space=space).values_list("content", flat=True)) == [FACT]


def test_a_look_alike_copy_stored_first_is_known_when_the_latin_text_comes(dev, agent_factory, space):
    """The other order: the look-alike copy came first (it is stored as sent: Colony keeps what the
    caller wrote); the Latin text is then the same fact, already known."""
    thought_id = memory(dev, prompt=cyrillic(FACT))["trace"]["thought_id"]
    assert Thought.objects.get(pk=thought_id).content == cyrillic(FACT)

    again = memory(agent_factory("qa"), prompt=FACT)

    assert (again["trace"]["already_known"], again["trace"]["thought_id"]) == (True, thought_id)


PROXY = "The staging proxy keeps a cache of every response for five minutes."
#: PROXY with "proxy", "a", "cache" and "every" written wholly in Cyrillic: no Latin letter is left in
#: those words, so only the words around them say the text is Latin.
PROXY_WORDS = (
    PROXY.replace("proxy", "\u0440\u0433\u043e\u0445\u0443")
    .replace(" a ", " \u0430 ")
    .replace("cache", "\u0441\u0430\u0441\u04bb\u0435")
    .replace("every", "\u0435\u0475\u0435\u0433\u0443")
)


@pytest.mark.parametrize(
    ("latin", "copy"),
    [(FACT, cyrillic(FACT)), (FACT, greek(FACT)), (PROXY, PROXY_WORDS)],
    ids=["cyrillic", "greek", "whole-words"],
)
def test_a_look_alike_copy_embeds_as_the_latin_text(space, latin, copy):
    """The model reads the skeleton: a look-alike copy's vector is the Latin text's (so the cosine
    guard, near-duplicate guidance and retrieval see one sentence)."""
    assert copy != latin and skeleton(copy) == latin
    latin_vector, copy_vector = embed_many([latin, copy])
    assert sum(a * b for a, b in zip(latin_vector, copy_vector, strict=True)) > 0.999


# --- legitimate non-Latin text ---------------------------------------------------------------------

RUSSIAN = "Сервер базы данных перезапускается каждую ночь в три часа по московскому времени."


def test_a_russian_sentence_is_its_own_fact_and_known_when_repeated(dev, agent_factory, space):
    """An all-Cyrillic sentence stays distinct from an unrelated Latin one (it is stored, not "already
    known", not flagged), and is one fact with itself."""
    latin = memory(dev, prompt=FACT)["trace"]["thought_id"]

    russian = memory(agent_factory("qa"), prompt=RUSSIAN)
    assert russian["trace"]["already_known"] is False and russian["trace"]["thought_id"] not in (None, latin)
    assert Thought.objects.get(pk=russian["trace"]["thought_id"]).quality_flags == []

    again = memory(agent_factory("qa"), prompt=RUSSIAN)
    assert (again["trace"]["already_known"], again["trace"]["thought_id"]) == (True, russian["trace"]["thought_id"])
    assert Thought.objects.filter(space=space).count() == 2


def test_a_russian_sentence_with_latin_look_alikes_is_the_same_fact(dev, agent_factory, space):
    """The other direction: Latin "a", "e", "o", "p", "c" in a Russian sentence. The key folds every
    look-alike wherever it stands, so the copy is the Russian sentence, already known."""
    thought_id = memory(dev, prompt=RUSSIAN)["trace"]["thought_id"]
    latinised = RUSSIAN.translate(str.maketrans("аеорс", "aeopc"))
    assert latinised != RUSSIAN

    again = memory(agent_factory("qa"), prompt=latinised)

    assert (again["trace"]["already_known"], again["trace"]["thought_id"]) == (True, thought_id)


def test_a_russian_sentence_embeds_as_written(space):
    """The model reads a Russian sentence as it is: its Cyrillic letters are not folded to Latin."""
    assert embedding_text(RUSSIAN) == RUSSIAN


# --- the skeleton itself ---------------------------------------------------------------------------


def test_folding_is_a_no_op_on_ascii():
    """Search, ranking and the benchmarks see ASCII text exactly as before."""
    ascii_text = "".join(chr(c) for c in range(128)) + " Il1| 0O rn m vv w"
    assert skeleton(ascii_text) == ascii_text
    assert embedding_text(ascii_text) == ascii_text


def test_the_database_folds_as_python_does():
    """``brain_content_key`` (SQL, migration) folds with the table ``brain.confusables`` builds from the
    library: every folded character gives the key of its skeleton (and Cyrillic "І", which TR39 sends
    to "l" as it does Latin "I", folds to "I")."""
    table = fold_table()
    assert len(table) > 400 and all(len(target) == 1 and target.isascii() for target in table.values())
    assert [table[ch] for ch in "\u0430\u0435\u043e\u0440\u0441\u0406\u0456\u03bf\u0399"] == list("aeopcIioI")
    text = "".join(sorted(table))
    expected = "".join(table[ch] for ch in sorted(table))
    with connection.cursor() as cursor:
        cursor.execute("SELECT brain_content_key(%s) = brain_content_key(%s)", [text, expected])
        assert cursor.fetchone() == (True,)
        cursor.execute("SELECT brain_fold_confusables(%s)", [text])
        assert cursor.fetchone() == (expected,)
