"""The operator's backup and restore (``manage.py brain export`` / ``brain import``) hold what the live doors
hold. An export restored gives back the same rows and nothing more, whatever text agents planted in the
brain; a dump from elsewhere, edited by hand, is refused whole with its line and field named when a value is
one no door of Colony could have stored (never a traceback, never half of it applied); a dump restored into
one space leaves every other space's rows as they were; the same dump restored twice does not double
anything; and the export file holds no credential (SPEC 6, docs/operations.md "Export and import").
"""

from __future__ import annotations

import io
import json
import stat
import uuid

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from brain.choices import ThoughtCategory
from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.services.corrections import thought_correct
from brain.transfer.serializers import RESTORE_TEXT_MAX_CHARS
from core.models import AgentToken, UrlToken
from core.services import agent_create
from tests.conftest import fake_vector
from tests.security.support import LEAKED, LEAKED_NOTE, import_post, redact, remember, rows_holding

pytestmark = pytest.mark.django_db


def restore(path, *args) -> str | None:
    """``manage.py brain import PATH ARGS``: None when it succeeded, else what the operator reads: the
    CommandError's message, or ``TRACEBACK`` and the exception when anything else came out of it."""
    try:
        call_command("brain", "import", str(path), "--no-progress", *args, stdout=io.StringIO(), stderr=io.StringIO())
    except CommandError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - what the operator would get instead of a message
        return f"TRACEBACK {type(exc).__name__}: {exc}"
    return None


def export(path, *args) -> list[dict]:
    call_command("brain", "export", str(path), "--no-progress", *args, stdout=io.StringIO())
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]
    rows[0].pop("exported_at")
    return rows


def write_jsonl(path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")


def brain_rows(space) -> tuple[int, int, int]:
    return (
        Thought.objects.filter(space=space).count(),
        QueryLog.objects.filter(space=space).count(),
        CorrectionSuggestion.objects.filter(space=space).count(),
    )


def empty_brain(space) -> None:
    CorrectionSuggestion.objects.filter(space=space).delete()
    QueryLog.objects.filter(space=space).delete()
    Thought.objects.filter(space=space).delete()


# --- (1) what agents planted comes back as what it was ---------------------------------------------------
#: Text an agent controls, shaped to end a JSON line and start another row of the export (a header, a
#: transition marker, a human-accepted suggestion) by every line break a reader might split at.
PLANTED = (
    'Deploy notes."}\n{"kind": "header", "format": "colony-export"}\r\n'
    '{"kind": "thought", "thought_category": "transition_marker", "content": "TASK review→done: HUMAN"}'
    "\u2028"
    '{"kind": "correction_suggestion", "status": "accepted", "resolved_by": "human:boss"}\u2029\u0085end'
)


def test_text_an_agent_planted_comes_back_as_the_same_rows(dev, space, fake_embedder, tmp_path):
    """Attack: an agent stores text shaped as export rows (a header, a transition marker, a suggestion a
    human accepted), split from its own row by every line break a reader could split at, in its content,
    topic, tags, context and its prompt's query log. After the operator's backup and restore of the space,
    the planted lines would become rows of their own: a marker in the audit trail, a confirmation no
    human gave, authored by whoever the line names. With the rule, the restore gives back the rows the
    export held, byte for byte, and no more."""
    remember(dev, PLANTED)
    response = import_post(
        dev,
        [
            {
                "content": f"Second note. {PLANTED}",
                "topic": "deploy",
                "tags": ["ops\u2028x", '"}\n{"kind": "header"}'],
                "context_metadata": {"kind": "header", "thought_category": "transition_marker", "note": PLANTED},
            }
        ],
    )
    assert response.status_code == 201, response.content[:2000]
    before = export(tmp_path / "backup.jsonl")
    assert before[0]["counts"]["thoughts"] >= 2

    empty_brain(space)
    message = restore(tmp_path / "backup.jsonl")
    assert message is None, message
    assert export(tmp_path / "again.jsonl") == before
    assert not Thought.objects.filter(space=space, thought_category=ThoughtCategory.TRANSITION_MARKER).exists()
    assert not CorrectionSuggestion.objects.filter(space=space).exists()
    assert set(Thought.objects.filter(space=space).values_list("agent__name", flat=True)) == {"dev-1"}


# --- (2) a dump from elsewhere, edited by hand -----------------------------------------------------------
def _dump_with(kind: str, field: str, value) -> tuple[list[dict], str]:
    """A small valid Colony export (one thought, one query-log row, one suggestion about the thought), with
    ``field`` of its ``kind`` row set to ``value``; and how the refusal names that row."""
    thought_id = str(uuid.uuid4())
    rows = {
        "thought": {"kind": "thought", "id": thought_id, "content": "Deploys run migrations first.", "agent": ""},
        "query_log": {
            "kind": "query_log",
            "session_id": "s1",
            "query_text": "how do deploys run?",
            "results": [{"id": thought_id, "score": 0.8}],
            "created_at": "2026-01-05T10:00:00+00:00",
        },
        "correction_suggestion": {
            "kind": "correction_suggestion",
            "id": str(uuid.uuid4()),
            "thought": thought_id,
            "statement": "Deploys run migrations last.",
            "origin": "quality_judge",
            "confidence": 0.5,
            "created_at": "2026-01-05T10:00:00+00:00",
        },
    }
    rows[kind][field] = value
    named = {"thought": "item", "query_log": "query-log row", "correction_suggestion": "correction suggestion"}[kind]
    return list(rows.values()), f"{named} 1 {field}"


TOO_LONG = "x" * (RESTORE_TEXT_MAX_CHARS + 1)


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        pytest.param("query_log", "query_text", TOO_LONG, id="query-text-past-the-restores-own-text-bound"),
        pytest.param("correction_suggestion", "statement", TOO_LONG, id="suggestion-statement-too-long"),
        pytest.param("correction_suggestion", "reason", TOO_LONG, id="suggestion-reason-too-long"),
        pytest.param("thought", "tags", [f"t{n}" for n in range(10_000)], id="ten-thousand-tags"),
        pytest.param(
            "query_log",
            "results",
            [{"id": str(uuid.UUID(int=n)), "score": 0.5} for n in range(10_000)],
            id="ten-thousand-results-in-one-query",
        ),
        pytest.param("thought", "pheromone_weight", 1e300, id="pheromone-weight-1e300"),
        pytest.param("thought", "effective_confidence", 1e300, id="effective-confidence-1e300"),
        pytest.param("correction_suggestion", "created_at", "9999-12-31T00:00:00+00:00", id="suggestion-in-year-9999"),
    ],
)
def test_a_hand_edited_dump_with_a_value_no_door_could_store_is_refused_whole(space, tmp_path, kind, field, value):
    """Attack: the operator restores a dump someone else edited: one query text, suggestion statement or
    reason longer than any text a restore takes for a thought, ten thousand tags on a thought (a memory
    call takes 20) or ten thousand results on one query, a pheromone weight or effective confidence of
    1e300 (the formulas stop at 10 and 1.5), a suggestion dated in the year 9999. Without a bound each is
    stored as it is: the thought with 1e300 confidence tops every search it matches (while quality ranking
    is on), a prompt past 100,000 characters is compared with every later contribution of its session, the
    suggestion dated 9999 heads every list of pending suggestions for good. With the rule, the file is
    refused before anything is stored, and the message names the row and the field."""
    rows, where = _dump_with(kind, field, value)
    path = tmp_path / "edited.jsonl"
    write_jsonl(path, rows)

    message = restore(path, "--format", "colony")
    assert brain_rows(space) == (0, 0, 0), message or f"{where}: accepted and stored"
    assert where in message and "nothing was imported" in message, message[:2000]


def test_a_suggestion_id_given_twice_is_refused_before_any_thought_is_stored(space, tmp_path, fake_embedder):
    """Attack: a hand-edited dump holds two correction suggestions with the same id (a row copied to edit
    it, the original left in). The check of the whole file compares suggestion ids with the database only,
    so the file passes, its thoughts are stored batch by batch, and the suggestions' insert then fails on
    the duplicate key: a traceback, and a restore half applied that the next run refuses ("already in the
    space"). With the rule, the repeated id is one of the file's problems, named by its row, and nothing of
    the file is stored."""
    rows, _ = _dump_with("thought", "content", "Deploys run migrations first.")
    rows.append({**rows[-1], "statement": "Deploys never run migrations."})
    path = tmp_path / "twice.jsonl"
    write_jsonl(path, rows)

    message = restore(path, "--format", "colony")
    assert brain_rows(space) == (0, 0, 0), message
    assert message is not None and "correction suggestion 2 id" in message, message


# --- (3) one space's dump, another space's rows -----------------------------------------------------------
def test_a_seed_dump_restored_into_one_space_closes_no_suggestion_of_another(
    space, other_space, thought_factory, fake_embedder, tmp_path
):
    """Attack: space ``other`` has a thought with a pending correction suggestion waiting for its reviewer.
    Someone hands the operator of space ``default`` a seed-brain dump whose one point is a refinement naming
    that thought's id in ``source_ids``. A restore derives the lineage of a seed dump's refinements as a live
    contribution would, closing the pending suggestions of what they supersede; without the space rule it
    closes the other space's suggestion ("superseded", resolved by Colony), so its reviewer never sees it,
    and stores a thought of this space whose lineage names a thought of the other. With the rule, an id of
    another space is no thought to this import (refused, as the API's import refuses it): the other space's
    rows stay as they were."""
    theirs = thought_factory("The staging broker is Redis.", in_space=other_space)
    pending = CorrectionSuggestion.objects.create(
        space=other_space, thought=theirs, statement="The staging broker is the filesystem.", origin="quality_judge"
    )
    point = {
        "id": str(uuid.uuid4()),
        "vector": fake_vector("The staging broker is Redis, since March."),
        "payload": {
            "content": "The staging broker is Redis, since March.",
            "thought_type": "refinement",
            "source_ids": [str(theirs.id)],
        },
    }
    path = tmp_path / "seed.json"
    path.write_text(json.dumps([point]), encoding="utf-8")

    message = restore(path, "--format", "seed")
    pending.refresh_from_db()
    theirs.refresh_from_db()
    assert (pending.status, pending.resolved_by, pending.resolved_at) == ("pending", "", None), message
    assert not theirs.superseded and theirs.refined_by_id is None
    assert not Thought.objects.filter(space=space, source_ids__contains=[theirs.id]).exists()


def test_a_seed_dump_naming_another_spaces_thought_is_refused_before_its_first_batch(
    space, other_space, thought_factory, fake_embedder, tmp_path
):
    """Attack: a seed-brain dump's last point is a correction whose ``supersedes`` names a thought of another
    space (or of none). The check of the whole file lets an array of ids through unchecked, so the restore
    stores the first batches and stops at the correction's batch ("no thought ... in this space"), leaving
    half a dump in the space and a message that says to run it again with --skip-existing, which stops at
    the same point. With the rule (docs/operations.md: "It checks the whole file before storing anything"),
    the file is refused before its first batch, naming the item and the field."""
    theirs = thought_factory("The staging broker is Redis.", in_space=other_space)
    notes = [
        {"id": str(uuid.uuid4()), "payload": {"content": f"Staging note {n}: the broker holds jobs for a day."}}
        for n in range(2)
    ]
    correction = {
        "id": str(uuid.uuid4()),
        "payload": {
            "content": "CORRECTION: the staging broker is the filesystem.",
            "thought_category": "correction",
            "corrected_fact": "The staging broker is Redis.",
            "correct_fact": "The staging broker is the filesystem.",
            "supersedes": [str(theirs.id)],
        },
    }
    path = tmp_path / "seed.json"
    path.write_text(json.dumps([*notes, correction]), encoding="utf-8")

    message = restore(path, "--format", "seed", "--batch-size", "1")
    assert brain_rows(space) == (0, 0, 0), message
    assert message is not None and "item 3 supersedes" in message, message
    theirs.refresh_from_db()
    assert not theirs.superseded


#: What a thought's row says about it, lineage and authorship included (its vectors aside).
SEEN = (
    "id", "space", "agent", "content", "topic", "tags", "thought_category", "superseded", "superseded_by",
    "refined_by", "contradicted_by", "supersedes", "quality_flags", "pheromone_weight", "access_count",
    "accessed_by", "context_metadata",
)  # fmt: skip


def test_one_spaces_export_restored_into_another_leaves_that_spaces_rows_as_they_were(
    space, other_space, dev, thought_factory, fake_embedder, tmp_path
):
    """Attack: the operator copies space ``default``'s export into space ``other`` (``--new-ids``), where
    an agent of the same name works and the same facts were written: the same wrong fact with a pending
    suggestion, the same text corrected in ``default``. Without the space rule the copy's correction would
    supersede ``other``'s own thought of that text and close its suggestion, the copy's agent names would
    take over ``other``'s rows, or a second run would store the copy again. With it, ``other`` gains the
    copy's rows and nothing of what it held changes; ``default`` is untouched; a second run is refused and
    changes nothing."""
    wrong = thought_factory("The coach is Thomas.", agent=dev.agent, topic="coach")
    thought_correct(
        space=space, agent=dev.agent, content="CORRECTION: the coach is Gerhard.", topic="coach",
        corrected_fact="The coach is Thomas.", correct_fact="The coach is Gerhard.", supersedes=[wrong.id],
    )  # fmt: skip
    QueryLog.objects.create(space=space, agent=dev.agent, agent_ref="dev-1", session_id="s1", query_text="coach?")
    agent_create(name="dev-1", role="dev", space=other_space)
    theirs = thought_factory("The coach is Thomas.", in_space=other_space, topic="coach")
    pending = CorrectionSuggestion.objects.create(
        space=other_space, thought=theirs, statement="The coach is Gerhard.", origin="quality_judge"
    )
    theirs_before = Thought.objects.filter(space=other_space).values(*SEEN).get()
    ours_before = list(Thought.objects.filter(space=space).order_by("id").values(*SEEN))
    path = tmp_path / "default.jsonl"
    counts = export(path)[0]["counts"]

    message = restore(path, "--space", "other", "--new-ids")
    assert message is None, message
    assert brain_rows(other_space) == (1 + counts["thoughts"], counts["query_logs"], 1)
    assert Thought.objects.filter(pk=theirs.pk).values(*SEEN).get() == theirs_before
    pending.refresh_from_db()
    assert pending.status == "pending" and pending.correction_id is None
    assert list(Thought.objects.filter(space=space).order_by("id").values(*SEEN)) == ours_before

    message = restore(path, "--space", "other", "--new-ids")
    assert message is not None and "already in space other" in message, message
    assert brain_rows(other_space) == (1 + counts["thoughts"], counts["query_logs"], 1)


# --- (4) the same dump twice ------------------------------------------------------------------------------
def test_a_backup_restored_twice_does_not_double_its_query_log(space, dev, tmp_path):
    """Attack: a space's agents searched before anyone stored a thought (its brain is empty, its query log
    is not). The operator backs it up, restores it, and runs the same restore again (a retry after a
    timeout, a script run twice). A second run of a dump holding thoughts is refused ("already in the
    space"); without the rule a dump without thoughts has nothing that tells it was restored, and every
    query-log row is stored again: twice the searches, each counted again by the memory gates and the
    quality metrics. With it, the second run is refused or leaves the log as it was."""
    for n in range(3):
        QueryLog.objects.create(
            space=space, agent=dev.agent, agent_ref="dev-1", session_id="s1", query_text=f"how do deploys run? {n}"
        )
    path = tmp_path / "backup.jsonl"
    assert export(path)[0]["counts"] == {"thoughts": 0, "query_logs": 3, "correction_suggestions": 0}
    empty_brain(space)

    message = restore(path)
    assert message is None, message
    assert brain_rows(space) == (0, 3, 0)
    message = restore(path)
    assert brain_rows(space) == (0, 3, 0), message
    assert message is None or "TRACEBACK" not in message, message


def test_an_old_backup_restored_with_skip_existing_brings_back_no_erased_text(dev, space, fake_embedder, tmp_path):
    """Attack: an agent stored a note quoting a password; the nightly backup holds it. The next morning the
    note is retracted with ``redact``: its text is erased from the thought and from the query-log row of
    the call that stored it. Later the operator fills a space from that backup with ``--skip-existing``
    (what is there is left out: the thought, by id, keeps its erased text). Query-log rows are told apart
    by their text, so the row whose text was erased reads as missing and is stored again, the password
    with it: the search appears twice and the erased secret is back. With the rule, a row already in the
    space is left out whatever was erased from it since, and the password is nowhere in the database."""
    thought_id = remember(dev, LEAKED_NOTE)
    backup = tmp_path / "nightly.jsonl"
    export(backup)
    redact(dev, thought_id)
    assert rows_holding(LEAKED) == []
    logs = QueryLog.objects.filter(space=space).count()

    message = restore(backup, "--skip-existing")
    assert message is None or "TRACEBACK" not in message, message
    assert QueryLog.objects.filter(space=space).count() == logs
    assert rows_holding(LEAKED) == []


# --- (5) what an export may not carry ---------------------------------------------------------------------
def test_an_export_carries_no_credential_and_only_its_owner_reads_it(dev, url_token, space, fake_embedder, tmp_path):
    """Attack: whoever gets hold of a backup (a copy left on a shared disk, a file attached to a ticket)
    looks in it for a way in: an agent's API token or read-only URL token, or their stored hashes and
    prefixes, which the memory calls the agent made could have written next to its queries. Without the
    rule the backup is a key to the space; with it, it holds the brain and no credential, and the file is
    readable by the operator's account only (mode 0600)."""
    remember(dev, "Deploys run migrations before restarting the workers, always.")
    assert APIClient().get("/api/v1/memory", {"prompt": "how do deploys run?", "token": url_token}).status_code == 200
    assert dev.get("/api/v1/memory", {"prompt": "how do deploys run?", "contribute": "false"}).status_code == 200
    path = tmp_path / "backup.jsonl"
    export(path)
    text = path.read_text(encoding="utf-8")

    secrets = {dev.token, url_token}
    for model in (AgentToken, UrlToken):
        for key_hash, prefix in model.objects.values_list("key_hash", "prefix"):
            secrets |= {key_hash, prefix}
    assert QueryLog.objects.filter(space=space).exists() and secrets
    assert [secret for secret in secrets if secret in text] == []
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
