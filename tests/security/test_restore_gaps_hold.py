"""The operator's restore (``manage.py brain import`` of a Colony export or a seed dump) stores no
``context_metadata`` larger than Colony could have written, restores a space's backup into that space only
unless told to put it elsewhere, and a copy made with ``--new-ids`` keeps no id of the source space in the
records Colony writes into a thought's metadata: a transition marker's contribution, an accepted
suggestion's correction (SPEC 6, docs/operations.md "Export and import").
"""

from __future__ import annotations

import json
import uuid

import pytest

from brain.choices import ThoughtCategory
from brain.models import CorrectionSuggestion, Thought
from brain.services.corrections import suggestion_accept
from brain.transfer.serializers import CONTEXT_METADATA_MAX_CHARS
from tasks.workflow import MCI
from tests.conftest import fake_vector
from tests.security.support import import_post, remember
from tests.security.test_backup_round_trip import _dump_with, brain_rows, empty_brain, export, restore, write_jsonl
from tests.tasks_helpers import make_project, make_task

pytestmark = pytest.mark.django_db


# --- (1) a context_metadata no door could have stored ----------------------------------------------------
def test_a_multi_megabyte_context_metadata_in_a_dump_is_refused_whole(space, tmp_path):
    """Attack: the operator restores a dump someone edited by hand: one thought's ``context_metadata`` is
    a JSON object of three million characters (nested keys, a long note). Without a bound the restore
    stores it as it is: every read of the thought (``GET /api/v1/thoughts/{id}``, the admin, every later
    export and restore) carries megabytes, where an import over the API takes 20,000 characters and what
    Colony writes itself is a few thousand. With the rule, the file is refused before anything is stored,
    and the message names the row and the field."""
    huge = {"note": "x" * 1_000_000, "nested": {"more": ["y" * 1_000_000], "again": "z" * 1_000_000}}
    rows, where = _dump_with("thought", "context_metadata", huge)
    path = tmp_path / "edited.jsonl"
    write_jsonl(path, rows)

    message = restore(path, "--format", "colony")
    assert brain_rows(space) == (0, 0, 0), message or f"{where}: accepted and stored"
    assert where in message and "nothing was imported" in message, message[:2000]


def test_the_largest_context_metadata_colony_writes_comes_back(dev, space, fake_embedder, tmp_path):
    """Boundary next to the test above: an agent's import stores the most ``context_metadata`` the API
    takes, the import adds its own record, and a retraction adds its reason. The backup of that thought
    is restored as it was: the restore's bound is above what Colony's doors write together."""
    metadata = {"note": "n" * (CONTEXT_METADATA_MAX_CHARS - 20)}
    response = import_post(dev, [{"content": "Deploy notes with a long context.", "context_metadata": metadata}])
    assert response.status_code == 201, response.content[:2000]
    thought_id = response.json()["ids"][0]
    retracted = dev.post(f"/api/v1/thoughts/{thought_id}/retract", {"reason": "r" * 2000}, format="json")
    assert retracted.status_code == 200, retracted.content[:2000]
    before = export(tmp_path / "backup.jsonl")

    empty_brain(space)
    message = restore(tmp_path / "backup.jsonl")
    assert message is None, message[:2000]
    assert export(tmp_path / "again.jsonl") == before


# --- (2) one space's backup, another space --------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "into"),
    [
        pytest.param("default", ["--space", "other"], id="default-backup-into-other"),
        pytest.param("other", [], id="other-backup-into-the-default-space"),
    ],
)
def test_a_backup_restored_into_another_space_by_mistake_is_refused(
    space, other_space, thought_factory, fake_embedder, tmp_path, source, into
):
    """Attack (a mistake): the operator restores space ``default``'s backup with ``--space other`` (or
    space ``other``'s backup without ``--space``, into the default space), keeping its ids: the source
    space was emptied, or the backup comes from another server, so no id of the file is taken and nothing
    tells the restore it is the wrong space. Without the rule the target space gains another team's
    thoughts, markers, query log and suggestions as its own, and their agents' names map onto its agents.
    With the rule the header's space is compared with the target: the file is refused before anything is
    stored, with a message naming the file's space and the ways to import it there on purpose
    (``--new-ids`` for a copy, ``--into-other-space`` to keep its ids)."""
    spaces = {"default": space, "other": other_space}
    origin, target = spaces[source], spaces["other" if source == "default" else "default"]
    thought_factory("Deploys run migrations first.", in_space=origin)
    path = tmp_path / "backup.jsonl"
    assert export(path, "--space", source)[0]["space"] == source
    empty_brain(origin)

    message = restore(path, *into)
    assert brain_rows(target) == (0, 0, 0), message or "restored into the other space"
    assert f"space {source}" in message and "--new-ids" in message and "--into-other-space" in message, message
    assert "nothing was imported" in message, message

    assert restore(path, *into, "--into-other-space") is None
    assert brain_rows(target) == (1, 0, 0)


def test_a_seed_dump_has_no_space_to_compare_and_is_restored_into_any(space, other_space, fake_embedder, tmp_path):
    """Boundary next to the test above: a seed-brain dump (no header) names no space, so it is restored
    into whichever ``--space`` the operator names."""
    point = {
        "id": str(uuid.uuid4()),
        "vector": fake_vector("The staging broker is Redis."),
        "payload": {"content": "The staging broker is Redis."},
    }
    path = tmp_path / "seed.json"
    path.write_text(json.dumps([point]), encoding="utf-8")

    assert restore(path, "--format", "seed", "--space", "other") is None
    assert brain_rows(other_space) == (1, 0, 0)


# --- (3) a copy's metadata naming the source space's rows ------------------------------------------------
def test_a_copy_with_new_ids_names_its_own_thoughts_in_markers_and_corrections(
    dev, space, other_space, thought_factory, fake_embedder, tmp_path
):
    """Attack: the operator copies space ``default``'s export into space ``other`` (``--new-ids``). A
    hand-off marker records the contribution the task was handed off on (``memory_contribution_id``), a
    correction accepted from a suggestion records that suggestion (``accepted_suggestion``). Without the
    rule those ids are copied as they were: the copy's marker names a thought of ``default`` (the memory
    gate, which reads markers by the contribution they name, never sees the copy's contribution as handed
    off, and a reader following the id leaves the space), and the copy's correction names a suggestion of
    ``default``. With the rule they follow the same mapping as every other reference of the file: the
    copy's marker names the copy's contribution, the copy's correction the copy's suggestion; the rest of
    the marker's record (its task, rule, states, actor) is kept."""
    task = make_task(
        make_project(space, "gates"), slug="copy-gate", status="active", role="dev", dna={"pdsa_ref": "d.md"}
    )
    note_id = remember(dev, "The import-gate parser needs a lock around its cache: two workers filled it at once.")
    patched = dev.patch(f"/api/v1/tasks/{task.slug}/dna", {MCI: note_id}, format="json")
    assert patched.status_code == 200, patched.content[:2000]
    handed = dev.post(f"/api/v1/tasks/{task.slug}/transition", {"to": "review", "summary": "done"}, format="json")
    assert handed.status_code == 200, handed.content[:2000]
    wrong = thought_factory("The coach is Thomas.", topic="coach")
    pending = CorrectionSuggestion.objects.create(
        space=space, thought=wrong, statement="The coach is Gerhard.", origin="quality_judge"
    )
    suggestion_accept(suggestion=pending, resolved_by="human:boss")
    path = tmp_path / "default.jsonl"
    export(path)

    message = restore(path, "--space", "other", "--new-ids")
    assert message is None, message

    source_marker = Thought.objects.get(space=space, thought_category=ThoughtCategory.TRANSITION_MARKER)
    marker = Thought.objects.get(space=other_space, thought_category=ThoughtCategory.TRANSITION_MARKER)
    note_copy = Thought.objects.get(space=other_space, content__startswith="The import-gate parser")
    assert marker.context_metadata[MCI] == str(note_copy.id), marker.context_metadata
    assert {k: v for k, v in marker.context_metadata.items() if k != MCI} == {
        k: v for k, v in source_marker.context_metadata.items() if k != MCI
    }

    suggestion_copy = CorrectionSuggestion.objects.get(space=other_space)
    correction_copy = Thought.objects.get(space=other_space, pk=suggestion_copy.correction_id)
    assert correction_copy.context_metadata["accepted_suggestion"] == str(suggestion_copy.id)
