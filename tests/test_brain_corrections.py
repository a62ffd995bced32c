"""Corrections supersede in one transaction; the re-contamination guard (SPEC 2.5, seeds/000 7b/7c).

The guard tests use the real model: they claim that a paraphrase of a corrected fact is caught and
an unrelated fact is not.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid

import pytest
from django.db import connection
from django.utils import timezone

from api.errors import NotFound, ServiceFailure, ValidationFailed
from brain import embedding
from brain.models import Thought
from brain.services import corrections
from brain.services.corrections import (
    correction_guidance,
    thought_correct,
    thought_correct_by_id,
)
from brain.services.flags import correction_guard
from brain.services.lineage import lineage_supersede
from brain.services.retraction import thought_retract
from brain.services.thoughts import thought_create, thought_link_related

pytestmark = pytest.mark.django_db

WRONG = "Thomas is the certified Neuroimaginations-Coach"
RIGHT = (
    "Neuroimaginations-Coaching is offered via a joint venture with Gerhard Quiring; Thomas is NOT the certified coach."
)


def store(space, content, *, agent_name="liaison-1", vector=None, **fields):
    return thought_create(
        space=space,
        content=content,
        contributor_id=agent_name,
        contributor_name=agent_name,
        embedding=vector if vector is not None else embedding.embed(content),
        **fields,
    )


def wrong_copies(space, n=3):
    texts = [
        "Thomas is Zertifizierter Neuroimaginations-Coach and offers NI coaching to founders.",
        "Team profile: Thomas, certified Neuroimaginations-Coach, leads the coaching offer.",
        "Thomas is the certified Neuroimaginations-Coach of XPollination.",
    ]
    return [store(space, texts[i % 3], agent_name=f"agent-{i}", topic="xpollination-gruendung") for i in range(n)]


def correct(space, supersedes, **overrides):
    kwargs = dict(
        space=space,
        agent=None,
        content=f"CORRECTION: {RIGHT}",
        topic="xpollination-gruendung",
        corrected_fact=WRONG,
        correct_fact=RIGHT,
        supersedes=supersedes,
        source_ref={"type": "url", "value": "human-correction", "project": "best-practices"},
    )
    kwargs.update(overrides)
    return thought_correct(**kwargs)


def test_correction_supersedes_every_listed_thought_at_once(space, dev):
    wrong = wrong_copies(space)
    untouched = store(space, "The deploy uses Postgres 15.")
    correction, count = correct(space, [str(t.id) for t in wrong], agent=dev.agent)

    assert count == 3
    assert correction.thought_category == "correction"
    assert correction.agent == dev.agent and correction.contributor_name == "dev-1"
    assert correction.supersedes == [t.id for t in wrong]
    assert (correction.corrected_fact, correction.correct_fact, correction.topic) == (
        WRONG,
        RIGHT,
        "xpollination-gruendung",
    )
    stored = Thought.objects.get(pk=correction.pk)
    assert stored.embedding is not None
    fact_vector = embedding.embed(WRONG)
    # The default int8 embedder quantizes activations per batch, so a text embedded beside another
    # (content and corrected fact in one call) comes out a little different from the same text alone.
    assert sum(a * b for a, b in zip(stored.corrected_fact_embedding, fact_vector, strict=True)) == pytest.approx(
        1.0, abs=0.02
    )
    for thought in wrong:
        thought.refresh_from_db()
        assert thought.superseded is True
        assert thought.superseded_by_id == correction.id
        assert thought.superseded_at is not None
    untouched.refresh_from_db()
    assert (untouched.superseded, untouched.superseded_by_id) == (False, None)


def test_unknown_id_rejects_the_whole_correction(space):
    wrong = wrong_copies(space, 2)
    ghost = uuid.uuid4()
    before = Thought.objects.count()
    with pytest.raises(NotFound) as caught:
        correct(space, [str(wrong[0].id), str(ghost), str(wrong[1].id)])
    assert caught.value.code == "THOUGHT_NOT_FOUND"
    assert caught.value.extra == {"missing": [str(ghost)]}
    assert Thought.objects.count() == before
    assert not Thought.objects.filter(superseded=True).exists()
    assert not Thought.objects.filter(thought_category="correction").exists()


def test_id_of_another_space_rejects_the_whole_correction(space, other_space):
    mine = wrong_copies(space, 1)[0]
    theirs = store(other_space, WRONG)
    with pytest.raises(NotFound) as caught:
        correct(space, [mine.id, theirs.id])
    assert caught.value.extra == {"missing": [str(theirs.id)]}
    assert not Thought.objects.filter(superseded=True).exists()
    assert not Thought.objects.filter(thought_category="correction").exists()


@pytest.mark.parametrize(
    "overrides,missing",
    [({"supersedes": []}, ["supersedes"]), ({"topic": " ", "correct_fact": ""}, ["topic", "correct_fact"])],
)
def test_missing_correction_fields_change_nothing(space, overrides, missing):
    wrong = wrong_copies(space, 1)
    supersedes = overrides.pop("supersedes", [wrong[0].id])
    with pytest.raises(ValidationFailed) as caught:
        correct(space, supersedes, **overrides)
    assert caught.value.code == "MISSING_CATEGORY_FIELDS"
    assert caught.value.extra["missing"] == missing
    assert not Thought.objects.filter(thought_category="correction").exists()


def test_malformed_id_is_a_validation_error(space):
    with pytest.raises(ValidationFailed) as caught:
        correct(space, ["not-a-uuid"])
    assert caught.value.code == "VALIDATION_ERROR"


def test_duplicate_ids_count_once_and_first_superseded_time_is_kept(space):
    wrong = wrong_copies(space, 2)
    first_time = timezone.now() - dt.timedelta(days=3)
    Thought.objects.filter(pk=wrong[0].pk).update(superseded=True, superseded_at=first_time)
    correction, count = correct(space, [wrong[0].id, wrong[1].id, str(wrong[0].id)])
    assert count == 2
    assert correction.supersedes == [wrong[0].id, wrong[1].id]
    wrong[0].refresh_from_db()
    assert wrong[0].superseded_at == first_time
    assert wrong[0].superseded_by_id == correction.id


def test_a_later_correction_takes_over_superseded_by(space):
    wrong = wrong_copies(space, 1)[0]
    first, _ = correct(space, [wrong.id])
    second, _ = correct(space, [wrong.id], correct_fact="Gerhard Quiring is the certified coach; JV with Thomas.")
    wrong.refresh_from_db()
    assert wrong.superseded_by_id == second.id


def test_correcting_a_corrected_thought_again_supersedes_the_earlier_correction(space):
    # Before: both corrections stayed live, and a query about the fact got two "correct" facts.
    wrong, other_copy = wrong_copies(space, 2)
    first, _ = correct(space, [wrong.id, other_copy.id])
    second, count = correct(space, [wrong.id], correct_fact="Gerhard Quiring is the certified coach; JV with Thomas.")
    assert count == 2
    assert second.supersedes == [wrong.id, first.id]
    first.refresh_from_db()
    other_copy.refresh_from_db()
    assert (first.superseded, first.superseded_by_id) == (True, second.id)
    assert other_copy.superseded_by_id == first.id  # the earlier correction's other targets stay as they were
    live = Thought.objects.filter(space=space, thought_category="correction", superseded=False)
    assert list(live.values_list("id", flat=True)) == [second.id]
    # Listing the earlier correction too counts it once; a retracted (superseded) one is not taken again.
    third, count = correct(space, [wrong.id, second.id])
    assert (count, third.supersedes) == (2, [wrong.id, second.id])


def test_a_refinement_of_a_corrected_thought_is_left_alone(space):
    wrong = wrong_copies(space, 1)[0]
    refinement = store(space, "Thomas coaches founders.")
    lineage_supersede(thought=refinement, source_ids=[wrong.id])
    wrong.refresh_from_db()
    assert wrong.refined_by_id == refinement.id
    _, count = correct(space, [wrong.id])
    refinement.refresh_from_db()
    assert count == 1 and not refinement.superseded


def test_correcting_a_correction_by_id_takes_its_correct_fact_as_the_wrong_one(space, dev):
    # Before: the wrong fact defaulted to the correction's whole text, wrong and right fact together.
    wrong = wrong_copies(space, 1)[0]
    first, _ = correct(space, [wrong.id])
    second, count = thought_correct_by_id(
        space=space, agent=dev.agent, thought_id=first.id, correct_fact="Gerhard Quiring is the certified coach."
    )
    assert (second.corrected_fact, count) == (RIGHT, 1)
    assert correction_guard(space=space, vector=embedding.embed(RIGHT), text=RIGHT).id == second.id


def test_given_vector_is_stored_and_default_content_is_written(space, monkeypatch):
    wrong = wrong_copies(space, 1)[0]
    vector = [0.0] * 383 + [1.0]
    correction, _ = correct(space, [wrong.id], content="  ", vector=vector)
    stored = Thought.objects.get(pk=correction.pk)
    assert list(stored.embedding) == vector
    assert stored.content.startswith("CORRECTION:") and WRONG in stored.content and RIGHT in stored.content


def test_embedding_failure_is_embedding_failed_and_changes_nothing(space, monkeypatch):
    wrong = wrong_copies(space, 1)[0]

    def broken(texts, **kwargs):
        raise embedding.EmbeddingError("model gone")

    monkeypatch.setattr(corrections.embedder, "embed_many", broken)
    with pytest.raises(ServiceFailure) as caught:
        correct(space, [wrong.id])
    assert (caught.value.code, caught.value.status_code) == ("EMBEDDING_FAILED", 500)
    wrong.refresh_from_db()
    assert not wrong.superseded
    assert not Thought.objects.filter(thought_category="correction").exists()


def test_correct_by_id_defaults_from_the_thought(space, dev):
    wrong = store(space, WRONG, topic="team")
    extra = store(space, "Thomas (certified Neuroimaginations-Coach) runs the workshops.")
    correction, count = thought_correct_by_id(
        space=space, agent=dev.agent, thought_id=wrong.id, correct_fact=RIGHT, extra_supersedes=[extra.id]
    )
    assert count == 2
    assert (correction.corrected_fact, correction.topic) == (WRONG, "team")
    untitled = store(space, "Thomas is a certified coach.")
    correction, _ = thought_correct_by_id(space=space, agent=None, thought_id=untitled.id, correct_fact=RIGHT)
    assert correction.topic == "general"


def test_correct_by_id_of_another_space_is_not_found(space, other_space):
    theirs = store(other_space, WRONG)
    with pytest.raises(NotFound) as caught:
        thought_correct_by_id(space=space, agent=None, thought_id=theirs.id, correct_fact=RIGHT)
    assert caught.value.code == "THOUGHT_NOT_FOUND"
    theirs.refresh_from_db()
    assert not theirs.superseded


# --- re-contamination guard (real model) ----------------------------------------------------------


def test_guard_catches_a_paraphrase_of_the_corrected_fact_and_not_an_unrelated_fact(space):
    wrong = wrong_copies(space)
    correction, _ = correct(space, [t.id for t in wrong])

    for paraphrase in (
        "Thomas is a certified Neuroimaginations coach.",
        "Thomas holds the Neuroimaginations-Coach certification",
        "Thomas is Zertifizierter Neuroimaginations-Coach and offers coaching",
    ):
        hit = correction_guard(space=space, vector=embedding.embed(paraphrase), text=paraphrase)
        assert hit is not None, paraphrase
        assert hit.id == correction.id
        assert hit.guard_similarity > 0.85

    for unrelated in (
        "The deploy uses Postgres 15 with pgvector 0.8.",
        "Thomas founded XPollination as an EPU in 2026.",
        "Gerhard Quiring offers Neuroimaginations-Coaching in a joint venture.",
    ):
        assert correction_guard(space=space, vector=embedding.embed(unrelated), text=unrelated) is None, unrelated


def test_guard_picks_the_most_similar_correction(space):
    a = store(space, "The staging database is MySQL 8.")
    b = wrong_copies(space, 1)[0]
    db_fix, _ = correct(
        space, [a.id], topic="infra", corrected_fact="The staging database is MySQL 8", correct_fact="It is Postgres 16"
    )
    coach_fix, _ = correct(space, [b.id])
    assert (
        correction_guard(space=space, vector=embedding.embed("Our staging database is MySQL version 8")).id == db_fix.id
    )
    assert correction_guard(space=space, vector=embedding.embed("Thomas: certified Neuroimaginations-Coach")).id == (
        coach_fix.id
    )


def test_guard_does_not_flag_a_contribution_that_agrees_with_the_correction(space):
    correction, _ = correct(space, [wrong_copies(space, 1)[0].id])
    agreeing = "Thomas is not the certified Neuroimaginations-Coach."
    # The embedding alone can't tell them apart...
    assert correction_guard(space=space, vector=embedding.embed(agreeing)) is not None
    # ...the text's negation of the corrected fact can.
    assert correction_guard(space=space, vector=embedding.embed(agreeing), text=agreeing) is None
    repeating = "Thomas is a certified Neuroimaginations coach."
    hit = correction_guard(space=space, vector=embedding.embed(repeating), text=repeating)
    assert hit is not None and hit.id == correction.id


def test_guard_is_space_scoped_and_ignores_superseded_corrections(space, other_space):
    wrong = wrong_copies(space, 1)[0]
    correction, _ = correct(space, [wrong.id])
    vector = embedding.embed("Thomas is a certified Neuroimaginations coach.")
    assert correction_guard(space=other_space, vector=vector) is None
    Thought.objects.filter(pk=correction.pk).update(superseded=True)
    assert correction_guard(space=space, vector=vector) is None


def test_a_refined_or_consolidated_correction_still_guards_a_retracted_one_does_not(space, dev):
    # Before: refining a correction (rewording it, adding a source) switched its guard off: the
    # wrong fact could be contributed again unflagged.
    correction, _ = correct(space, [wrong_copies(space, 1)[0].id])
    paraphrase = "Thomas is a certified Neuroimaginations coach."
    vector = embedding.embed(paraphrase)
    reworded = store(space, "CORRECTION, reworded: NI coaching is a JV with Gerhard Quiring (see the contract).")
    lineage_supersede(thought=reworded, source_ids=[correction.id])
    hit = correction_guard(space=space, vector=vector, text=paraphrase)
    assert hit is not None and hit.id == correction.id
    Thought.objects.filter(pk=correction.pk).update(quality_flags=["retracted"])
    assert correction_guard(space=space, vector=vector, text=paraphrase) is None


def test_a_correction_is_not_refined_and_still_flags_a_contribution_that_repeats_the_wrong_fact(space, dev):
    # Only a correction supersedes a correction: the API refuses a plain refinement of one (an import
    # can still hold one: the test above covers its guard).
    wrong = wrong_copies(space, 1)[0]
    body = {"correct_fact": RIGHT, "source_ref": {"type": "url", "value": "contract"}}
    correction = dev.post(f"/api/v1/thoughts/{wrong.id}/correct", body, format="json").json()["correction"]
    reworded = dev.post(
        "/api/v1/memory",
        {"prompt": "Reworded: NI coaching runs as a JV with Gerhard Quiring.", "refines": correction["thought_id"]},
        format="json",
    )
    assert reworded.status_code == 409, reworded.json()
    assert reworded.json()["error"]["code"] == "CORRECTION_NEEDS_CORRECTION"
    assert not Thought.objects.get(pk=correction["thought_id"]).superseded
    again = dev.post(
        "/api/v1/memory",
        {"prompt": "Thomas is Zertifizierter Neuroimaginations-Coach and offers NI coaching to teams."},
        format="json",
    )
    trace = again.json()["trace"]
    assert "contradicts_correction" in Thought.objects.get(pk=trace["thought_id"]).quality_flags
    assert f"Correction {correction['thought_id']}" in again.json()["result"]["guidance"]


def test_a_correction_flags_the_live_copies_of_the_wrong_fact_it_does_not_name(space):
    # Before: a copy the correction's author missed stayed live and unflagged beside the correction
    # (the guard caught only later contributions; the detector skips corrections).
    far, named, missed = wrong_copies(space, 3)  # similarity to WRONG: 0.82, 0.92, 0.92
    friday = store(space, "Thomas, our certified Neuroimaginations-Coach, runs the Friday sessions.")  # 0.90
    agrees = store(space, "Thomas is NOT the certified Neuroimaginations-Coach.")
    unrelated = store(space, "Billing webhooks retry five times with jitter.")
    earlier, _ = correct(space, [unrelated.id], corrected_fact="Billing retries twice.", correct_fact="Five times.")
    correction, count = correct(space, [named.id])
    assert count == 1 and correction.repeats_flagged == [missed.id, friday.id]
    flags = dict(Thought.objects.values_list("id", "quality_flags"))
    assert flags[missed.id] == flags[friday.id] == ["contradicts_correction"]
    for thought in (far, named, agrees, unrelated, earlier):  # too far, superseded, negated, other fact, a correction
        assert "contradicts_correction" not in flags[thought.id]
    assert "2 other live thoughts repeat the wrong fact and were flagged contradicts_correction" in (
        corrections.correction_supersede_guidance(count=count, repeats=correction.repeats_flagged)
    )
    assert Thought.objects.get(pk=missed.pk).contradicted_by_id == correction.id
    again, _ = correct(space, [missed.id])  # flagged already: listed, not flagged twice
    assert again.repeats_flagged == [friday.id]
    assert Thought.objects.get(pk=friday.pk).quality_flags == ["contradicts_correction"]


def test_retracting_a_correction_takes_off_the_flags_it_set_and_brings_back_what_it_superseded(space):
    named, missed = wrong_copies(space, 3)[1:]
    correction, _ = correct(space, [named.id])
    assert correction.repeats_flagged == [missed.id]
    retracted = thought_retract(space=space, thought_id=correction.id, reason="wrong person", user_name="ada")
    assert retracted.live_again == [named.id]
    rows = {t.id: t for t in Thought.objects.filter(pk__in=[named.id, missed.id])}
    assert (rows[missed.id].quality_flags, rows[missed.id].contradicted_by_id) == ([], None)
    assert (rows[named.id].superseded, rows[named.id].superseded_by_id) == (False, None)


def test_guidance_quotes_the_correct_fact_and_the_correction_id(space):
    correction, _ = correct(space, [wrong_copies(space, 1)[0].id])
    text = correction_guidance(correction)
    assert text.startswith("WARNING")
    assert str(correction.id) in text
    assert RIGHT in text


# --- related thoughts -----------------------------------------------------------------------------


def test_related_links_are_visible_from_both_ends(space):
    a, b, c = (store(space, f"fact {i} about the rollout", vector=[1.0] + [0.0] * 383) for i in range(3))
    assert thought_link_related(thought=a, related_ids=[b.id, str(c.id), b.id]) == 2
    assert set(a.related_thoughts.values_list("id", flat=True)) == {b.id, c.id}
    assert list(b.related_thoughts.values_list("id", flat=True)) == [a.id]
    assert list(c.related_thoughts.values_list("id", flat=True)) == [a.id]


def test_related_unknown_or_other_space_id_links_nothing(space, other_space):
    a, b = (store(space, f"fact {i}", vector=[1.0] + [0.0] * 383) for i in range(2))
    theirs = store(other_space, "their fact", vector=[1.0] + [0.0] * 383)
    for bad in (uuid.uuid4(), theirs.id):
        with pytest.raises(NotFound) as caught:
            thought_link_related(thought=a, related_ids=[b.id, bad])
        assert caught.value.code == "THOUGHT_NOT_FOUND"
        assert caught.value.extra == {"missing": [str(bad)]}
    assert not a.related_thoughts.exists()
    with pytest.raises(ValidationFailed):
        thought_link_related(thought=a, related_ids=[a.id])


def test_correction_can_carry_related_thoughts(space):
    wrong = wrong_copies(space, 1)[0]
    context = store(space, "XPollination partners: Gerhard Quiring (JV for NI coaching).")
    correction, _ = correct(space, [wrong.id], related_thoughts=[context.id])
    assert list(context.related_thoughts.values_list("id", flat=True)) == [correction.id]


# --- concurrency ----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_corrections_over_the_same_thoughts_do_not_deadlock(space):
    a, b = (store(space, f"Thomas is the certified coach, copy {i}", vector=[1.0] + [0.0] * 383) for i in range(2))
    vector = [0.0, 1.0] + [0.0] * 382
    results, errors = [], []
    barrier = threading.Barrier(2)

    def run(order):
        try:
            barrier.wait()
            results.append(correct(space, order, vector=vector))
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(order,)) for order in ([a.id, b.id], [b.id, a.id])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    # The locks serialised the two: the later one also superseded the earlier correction.
    assert sorted(count for _, count in results) == [2, 3]
    winners = {c.id for c, _ in results}
    a.refresh_from_db()
    b.refresh_from_db()
    assert a.superseded and b.superseded
    assert a.superseded_by_id == b.superseded_by_id and a.superseded_by_id in winners
    live = Thought.objects.filter(id__in=winners, superseded=False)
    assert list(live.values_list("id", flat=True)) == [a.superseded_by_id]
