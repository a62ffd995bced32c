"""Attacks from the operator's side and the admin's (SPEC 5 admin and import/export, SPEC 6): a staff user's
edit the admin allows, a hostile dump handed to ``manage.py brain import``, a resumed import, and the
management commands' arguments. Each test is an attack and the rule that should hold instead: bad input is a
clear error (a form error, a CommandError, a 4xx) and changes nothing, what the admin allows leaves the
agents' endpoints answering, and an export restored by the operator keeps what it says."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from brain import embedding
from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.services.lineage import lineage_supersede
from tests.conftest import fake_vector
from tests.security import support
from tests.web_support import admin_form_data

pytestmark = pytest.mark.django_db

boss = support.boss  # a fixture: a superuser, member of the space, logged in on ``client``

#: The first line of a Colony export (what ``brain import`` recognises the format by).
HEADER = json.dumps({"kind": "header", "format": "colony-export", "version": 1})
#: A JSON integer past what a float holds (JSON allows it; Python parses it as an int of 401 digits).
HUGE = 10**400


def _own_thought(thought_factory, dev, content="The deploy pipeline runs migrations before restarting workers."):
    return thought_factory(content, topic="deploy", agent=dev.agent, contributor_id="dev-1", contributor_name="dev-1")


def _admin_save(client, url, **changes):
    data = admin_form_data(client.get(url))
    data.update(changes)
    return client.post(url, data)


def _dump(tmp_path, name, *rows) -> str:
    path = tmp_path / name
    path.write_text("\n".join([HEADER, *(json.dumps(row) for row in rows)]) + "\n")
    return str(path)


# --- the admin --------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["[1, 2]", '"a note"'])
def test_the_admin_keeps_a_thoughts_context_metadata_an_object(client, boss, dev, thought_factory, value):
    """Attack: a staff user types ``[1, 2]`` (or a string) into a thought's ``context_metadata`` in the admin
    (/admin/brain/thought/<id>/change/) and saves: the admin's JSON field takes any JSON value. From then on
    ``GET /api/v1/thoughts`` (the space's whole list, for every agent) is a 500 INTERNAL_ERROR
    (brain/apis/thoughts.py reads ``(context_metadata or {}).get("retraction")``), and so is the author's
    ``POST /api/v1/thoughts/{id}/retract`` (brain/services/retraction.py). The same hole the task's DNA had.

    Rule (SPEC 5 admin, SPEC 6: never a 500; the admin's edits leave the agents' endpoints answering):
    the form refuses a context_metadata that is not a JSON object, the thought is unchanged, the list and
    the retraction answer."""
    thought = _own_thought(thought_factory, dev)
    response = _admin_save(client, f"/admin/brain/thought/{thought.id}/change/", context_metadata=value)
    thought.refresh_from_db()
    assert dev.get("/api/v1/thoughts").status_code == 200
    retracted = dev.post(f"/api/v1/thoughts/{thought.id}/retract", {"reason": "stored by mistake"}, format="json")
    assert retracted.status_code == 200, retracted.content[:300]
    assert response.status_code == 200 and response.context["adminform"].form.errors.get("context_metadata")


@pytest.mark.parametrize("draft", ["[1]", '"use the other fact"', '{"correct_fact": 5}'])
def test_the_admin_keeps_a_suggestions_draft_one_that_accepting_can_read(client, boss, dev, thought_factory, draft):
    """Attack: a staff user edits a pending correction suggestion in the admin
    (/admin/brain/correctionsuggestion/<id>/change/) and saves its ``draft`` as ``[1]``, a string, or an object
    whose ``correct_fact`` is a number. The admin takes any JSON value. Accepting the suggestion, one call for
    any agent of the space (``POST /api/v1/corrections/{id}/accept``) or a human on the brain page, is then a
    500: ``suggestion_accept`` does ``draft.get(...)`` and ``len(correct_fact)`` (brain/services/corrections.py).

    Rule (SPEC 4.5: accepting is one call that creates the correction; SPEC 6: never a 500): the form refuses a
    draft that is not an object of the memory endpoint's fields with their types, and the suggestion can still
    be accepted."""
    thought = _own_thought(thought_factory, dev)
    suggestion = CorrectionSuggestion.objects.create(
        space=thought.space, thought=thought, statement="Deploys restart the workers first, then run migrations.",
        origin="quality_judge", confidence=0.7, agent=dev.agent, session_id="s1",
        draft={"correct_fact": "Deploys restart the workers first, then run migrations."},
    )  # fmt: skip
    response = _admin_save(client, f"/admin/brain/correctionsuggestion/{suggestion.pk}/change/", draft=draft)
    accepted = dev.post(f"/api/v1/corrections/{suggestion.pk}/accept", {}, format="json")
    assert accepted.status_code < 500, accepted.content[:300]
    assert response.status_code == 200 and response.context["adminform"].form.errors.get("draft")


@pytest.mark.parametrize(
    "field,value",
    [("quality_flags", "bogus"), ("source_ref", '"see the runbook"'), ("temporal_scope", "2999-01-01"),
     ("topic", "Deploy X")],
)  # fmt: skip
def test_what_the_admin_saves_the_export_restores(client, boss, space, thought_factory, fake_embedder, tmp_path,
                                                  field, value):  # fmt: skip
    """Attack: a staff user saves a thought in the admin with a quality flag Colony does not have (``bogus``:
    the form takes any text of 40 characters), a ``source_ref`` that is a string, a ``temporal_scope`` in 2999,
    or a topic in capitals. The admin stores each; ``manage.py brain export`` writes it; ``brain import`` of
    that export then refuses the WHOLE file ("item 1 quality_flags: 'bogus' is not one of ...", "source_ref:
    Expected a dictionary", "temporal_scope ... no later than today"), so the space's backup can't be restored
    at all, or (the topic) restores it changed (``deploy x``) without a word.

    Rule (docs/operations.md: "Importing it into an emptied space gives the same export back"; SPEC 6: bad
    input is a form error and changes nothing): the form refuses what the import would refuse (or normalises
    it as every other write path does), so the export always restores what the admin left."""
    thought = thought_factory("The deploy pipeline runs migrations.", topic="deploy")
    _admin_save(client, f"/admin/brain/thought/{thought.id}/change/", **{field: value})
    saved = getattr(Thought.objects.get(pk=thought.pk), field)
    path = tmp_path / "backup.jsonl"
    call_command("brain", "export", str(path), "--no-progress")
    Thought.objects.filter(space=space).delete()
    call_command("brain", "import", str(path), "--no-progress")
    assert getattr(Thought.objects.get(pk=thought.pk), field) == saved


# --- brain import: hostile dumps --------------------------------------------------------------------
def test_an_imported_suggestion_draft_is_one_that_accepting_can_read(space, dev, thought_factory, tmp_path):
    """Attack: a Colony export handed to the operator carries a pending correction suggestion whose draft is
    ``{"correct_fact": 5}``. ``suggestion_clean`` (brain/transfer/serializers.py) checks only that the draft is
    an object, so ``manage.py brain import`` stores it, and every accept of it (any agent's one call, a
    human's click) is a 500 (TypeError in ``thought_correct``: ``len(5)``).

    Rule (SPEC 6: bad input is a clear error and changes nothing): the import refuses the row with a
    CommandError naming ``correction suggestion 1 draft``, nothing is stored."""
    thought = _own_thought(thought_factory, dev)
    row = {"kind": "correction_suggestion", "thought": str(thought.id), "statement": "Deploys never migrate.",
           "draft": {"correct_fact": 5}, "origin": "quality_judge", "confidence": 0.7}  # fmt: skip
    try:
        with transaction.atomic():
            call_command("brain", "import", _dump(tmp_path, "suggestion.jsonl", row), "--no-progress")
    except CommandError as exc:
        assert "draft" in str(exc)
    for suggestion in CorrectionSuggestion.objects.all():
        accepted = dev.post(f"/api/v1/corrections/{suggestion.pk}/accept", {}, format="json")
        assert accepted.status_code < 500, accepted.content[:300]
    assert not CorrectionSuggestion.objects.exists()


@pytest.mark.parametrize(
    "row",
    [
        {"content": "A thought whose vector holds a number past float.", "embedding": [HUGE] * 384},
        {"kind": "correction_suggestion", "thought": "PLACEHOLDER", "statement": "x", "confidence": HUGE},
    ],
    ids=["embedding", "suggestion-confidence"],
)
def test_a_number_past_float_in_a_dump_is_a_command_error(space, dev, thought_factory, tmp_path, row):
    """Attack: a dump handed to the operator writes a vector's numbers (or a correction suggestion's
    ``confidence``) as a JSON integer of 401 digits, which JSON allows. ``vector_compact`` / ``_vector``
    (``np.asarray(..., dtype=float64)``) and ``_confidence`` (``math.isfinite``) raise OverflowError, which
    neither the reader nor ``Import.read`` catches (brain/transfer/serializers.py, cli.py): ``manage.py brain
    import`` ends in a traceback. ``1e39`` is reported as a problem of the item; ``10**400`` is not.

    Rule (SPEC 6: bad input never a traceback, and changes nothing): a CommandError naming the item and the
    field, nothing stored."""
    thought = _own_thought(thought_factory, dev)
    row = {k: (str(thought.id) if v == "PLACEHOLDER" else v) for k, v in row.items()}
    before = Thought.objects.count()
    with pytest.raises(CommandError):
        call_command("brain", "import", _dump(tmp_path, "huge.jsonl", row), "--no-progress")
    assert Thought.objects.count() == before and not CorrectionSuggestion.objects.exists()


def test_an_agents_import_with_a_vector_number_past_float_is_a_400(dev):
    """Attack: an agent (or a prompt injection steering it) sends ``POST /api/v1/thoughts/import`` with one item
    whose ``embedding`` is 384 integers of 401 digits. The body parses (the API's parser caps an integer at 4,300
    digits), then ``_vector`` calls ``np.asarray(value, dtype=float64)``, which raises OverflowError: a 500
    INTERNAL_ERROR and an ERROR in the log per call. (1e39 is refused with a 400 naming ``embedding``.)

    Rule (SPEC 6: bad input gets a 4xx with the error envelope, never a 500): 400 IMPORT_INVALID naming
    ``embedding``, nothing stored."""
    response = support.import_post(dev, [{"content": "a note", "embedding": [HUGE] * 384}])
    assert response.status_code == 400, response.content[:300]
    assert not Thought.objects.exists()


def test_an_imported_query_log_score_past_float_does_not_break_the_turn_log(
    space, dev, thought_factory, tmp_path, enqueued
):
    """Attack: an export handed to the operator carries a query-log row of dev-1's session ``s`` whose result
    score is a JSON integer of 401 digits. ``querylog_clean`` checks only that ``results`` is a list of objects
    (brain/transfer/serializers.py), so ``manage.py brain import`` stores it. From then on every
    ``POST /api/v1/turns`` of that session (the Stop hook after each of dev-1's turns) is a 500:
    ``QueryLog.result_scores`` does ``float(score)`` of an int, which raises OverflowError (it skips malformed
    entries "so a broken log entry must not break the turn", but not this one).

    Rule (SPEC 6: bad input is a clear error and changes nothing; one bad row never breaks the others): the
    import refuses the row (a CommandError naming ``results``), or the turn is logged (201)."""
    thought = _own_thought(thought_factory, dev)
    row = {"kind": "query_log", "agent": "dev-1", "agent_ref": "dev-1", "session_id": "s", "query_text": "deploys?",
           "results": [{"id": str(thought.id), "score": HUGE}]}  # fmt: skip
    try:
        with transaction.atomic():
            call_command("brain", "import", _dump(tmp_path, "log.jsonl", row), "--no-progress")
    except CommandError as exc:
        assert "results" in str(exc) and not QueryLog.objects.exists()
        return
    turn = {"session_id": "s", "turn_id": "t1", "user_prompt": "How do deploys work?",
            "assistant_response": "They run migrations before restarting the workers."}  # fmt: skip
    response = dev.post("/api/v1/turns", turn, format="json")
    assert response.status_code in (200, 201, 202), response.content[:300]


# --- brain import: a resumed import -----------------------------------------------------------------
def _export_rows(path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0].pop("exported_at")
    return rows


def test_an_import_resumed_with_skip_existing_keeps_every_link(space, dev, thought_factory, fake_embedder,
                                                               tmp_path, monkeypatch):  # fmt: skip
    """Attack (or an ordinary bad day): the operator restores an export batch by batch and the import stops
    half-way (here the model fails on the second batch: "Could not embed ... Run the same command again with
    --skip-existing to import the rest", as docs/operations.md says to do). The first batch held thought A,
    refined by B of the second batch: A's ``refined_by`` pointed at a thought not stored yet, so it was
    deferred to the link pass at the end, which never ran. The second run leaves A out ("already in the
    space") and applies only the new rows' links: A stays superseded with ``refined_by`` null for ever, and no
    line says so (retrieval can't find A's replacement; the lineage page shows no descendant).

    Rule (docs/operations.md: an import that stopped is finished by running it again with --skip-existing;
    "Importing it into an emptied space gives the same export back"): the export after the resumed import is
    the export that was restored."""
    old = _own_thought(thought_factory, dev, "Deploys run migrations after restarting workers.")
    new = thought_factory(
        "Deploys run migrations before restarting workers.", agent=dev.agent, topic="deploy",
        thought_type="refinement", source_ids=[old.id],
    )  # fmt: skip
    lineage_supersede(thought=new, source_ids=[old.id])
    first = tmp_path / "brain.jsonl"
    call_command("brain", "export", str(first), "--no-progress", "--no-embeddings")
    before = _export_rows(first)
    Thought.objects.filter(space=space).delete()

    calls = {"n": 0}

    def model_fails_once(texts, *, batch_size=64):
        calls["n"] += 1
        if calls["n"] == 2:
            raise embedding.EmbeddingError("the model went away")
        return [fake_vector(text) for text in texts]

    monkeypatch.setattr(embedding, "embed_many", model_fails_once)
    with pytest.raises(CommandError, match="--skip-existing"):
        call_command("brain", "import", str(first), "--no-progress", "--batch-size", "1")
    call_command("brain", "import", str(first), "--no-progress", "--batch-size", "1", "--skip-existing")

    again = tmp_path / "again.jsonl"
    call_command("brain", "export", str(again), "--no-progress", "--no-embeddings")
    restored = Thought.objects.get(pk=old.pk)
    assert (restored.superseded, restored.refined_by_id) == (True, new.pk)
    assert _export_rows(again) == before


# --- management commands ----------------------------------------------------------------------------
def test_reembed_with_a_batch_size_past_bigint_is_a_command_error(space, thought_factory, fake_embedder):
    """Attack: ``manage.py reembed --all --batch-size 99999999999999999999`` (a typo, a script's overflow). The
    command checks only ``batch_size < 1``; the size goes to ``values_list(...)[:batch_size]`` and PostgreSQL
    refuses the LIMIT ("bigint out of range"): a DataError traceback (the round-2 rule for ``brain highways
    --limit``, not applied here). ``--missing`` does the same.

    Rule (SPEC 6: bad input never a traceback): a CommandError saying the batch size's range."""
    thought_factory("The deploy pipeline runs migrations.")
    for which in ("--all", "--missing"):
        with pytest.raises(CommandError), transaction.atomic():
            call_command("reembed", which, "--batch-size", "99999999999999999999", "--restart")
