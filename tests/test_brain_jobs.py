"""Brain jobs and the re-embed command: pheromone decay, embedding on commit, resumable re-embedding."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError
from django.utils import timezone

from brain import embedding, jobs
from brain.embedding import EmbeddingError
from brain.management.commands.reembed import checkpoint_path
from brain.models import Thought
from brain.services.pheromones import thoughts_decay
from config.celery import PERIODIC_JOBS
from tests.concurrency_support import row_locked
from tests.conftest import fake_vector

pytestmark = pytest.mark.django_db


# --- pheromone decay ------------------------------------------------------------------------------
def _aged(thought, *, created_hours_ago: float, accessed_hours_ago: float | None, weight: float):
    now = timezone.now()
    Thought.objects.filter(pk=thought.pk).update(
        created_at=now - timedelta(hours=created_hours_ago),
        last_accessed=None if accessed_hours_ago is None else now - timedelta(hours=accessed_hours_ago),
        pheromone_weight=weight,
    )


@pytest.mark.parametrize(
    "created, accessed, weight, expected",
    [
        (5, 2, 2.0, 2.0 * 0.995),  # idle for two hours
        (5, 0.5, 2.0, 2.0),  # accessed half an hour ago: no decay
        (3, None, 1.0, 0.995),  # never accessed: counts from created_at
        (0.5, None, 1.0, 1.0),  # new and never accessed: not yet
        (5, 2, 0.1004, 0.1),  # floor
        (5, 2, 0.1, 0.1),
    ],
)
def test_decay(thought_factory, created, accessed, weight, expected):
    thought = thought_factory("A thought that ages.")
    _aged(thought, created_hours_ago=created, accessed_hours_ago=accessed, weight=weight)
    jobs.pheromone_decay.delay()
    thought.refresh_from_db()
    assert thought.pheromone_weight == pytest.approx(expected)


def test_decay_counts_changed_rows_and_steps_once_per_hour(thought_factory):
    thought = thought_factory("A thought that ages.")
    _aged(thought, created_hours_ago=10, accessed_hours_ago=None, weight=1.0)
    now = timezone.now()
    assert thoughts_decay(now=now) == 1
    assert thoughts_decay(now=now) == 0  # a retry or a second delivery within the hour
    assert thoughts_decay(now=now + timedelta(hours=1)) == 1
    thought.refresh_from_db()
    assert thought.pheromone_weight == pytest.approx(0.995**2)


def test_decay_runs_in_batches_and_ages_each_thought_once(thought_factory):
    thoughts = [thought_factory(f"A thought that ages, number {n}.") for n in range(5)]
    for thought in thoughts:
        _aged(thought, created_hours_ago=10, accessed_hours_ago=None, weight=1.0)
    assert thoughts_decay(batch_size=2) == 5
    weights = Thought.objects.filter(pk__in=[t.pk for t in thoughts]).values_list("pheromone_weight", flat=True)
    assert sorted(weights) == [pytest.approx(0.995)] * 5


@pytest.mark.django_db(transaction=True)
def test_decay_does_not_wait_for_a_thought_another_transaction_holds(thought_factory):
    """The hourly decay touches every idle thought of a space. As one UPDATE it held every row it changed
    until it ended and waited behind any row another transaction held (a memory call's bookkeeping, a
    correction): one long transaction elsewhere held up the whole space's decay, and the decay's locks
    held up that space's writers. It runs in batches, each its own transaction, and leaves a row someone
    holds for the next hour."""
    held, free = thought_factory("A thought someone is correcting."), thought_factory("A thought nobody holds.")
    for thought in (held, free):
        _aged(thought, created_hours_ago=10, accessed_hours_ago=None, weight=1.0)
    started = time.monotonic()
    with row_locked(Thought.objects.filter(pk=held.pk), hold_at_most=5):
        assert thoughts_decay() == 1
        waited = time.monotonic() - started
    assert waited < 4, f"the decay waited {waited:.1f} s for a row another transaction held"
    weights = dict(Thought.objects.values_list("pk", "pheromone_weight"))
    assert (weights[held.pk], weights[free.pk]) == (1.0, pytest.approx(0.995))


def test_decay_is_scheduled_hourly():
    entry = PERIODIC_JOBS["pheromone-decay"]
    assert entry["task"] == jobs.pheromone_decay.name
    assert entry["schedule"].minute == {0} and len(entry["schedule"].hour) == 24


def test_thought_create_is_a_plain_write_that_schedules_nothing(
    fake_embedder, django_capture_on_commit_callbacks, space
):
    """The follow-up jobs are the caller's (brain.services.pipeline), not thought_create's."""
    from brain.services.thoughts import thought_create

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        thought = thought_create(
            space=space, content="Stored without a vector.", contributor_id="s", contributor_name="S"
        )
    assert callbacks == []
    assert Thought.objects.get(pk=thought.pk).embedding is None


# --- embedding job --------------------------------------------------------------------------------
def test_thought_without_vector_is_embedded_by_the_job(fake_embedder, django_capture_on_commit_callbacks, space):
    from brain.services.pipeline import thought_schedule_followups
    from brain.services.thoughts import thought_create

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        thought = thought_create(
            space=space, content="A marker without vector.", contributor_id="s", contributor_name="S"
        )
        thought_schedule_followups(thought=thought)
    assert len(callbacks) == 1  # enqueued on commit, not before
    thought.refresh_from_db()
    assert list(thought.embedding) == pytest.approx(fake_vector("A marker without vector."), abs=1e-6)
    assert thought.embedding_model == embedding.current_model_label()


def test_embedding_job_retries_transient_errors():
    assert set(jobs.embed_thought.autoretry_for) == {OperationalError, EmbeddingError}
    assert jobs.embed_thought.max_retries >= 3
    for job in (jobs.embed_thought, jobs.embed_missing, jobs.pheromone_decay):
        # Celery refuses to run a job whose soft limit (own or the app's 240 s) exceeds its hard limit.
        assert job.time_limit and (job.soft_time_limit or 240) <= job.time_limit
    assert jobs.embed_thought.name == "brain.jobs.embed_thought"


def test_embed_missing_job_catches_lost_jobs(fake_embedder, thought_factory):
    lost = thought_factory("Stored while no worker ran.", embedding=None)
    assert jobs.embed_missing.delay().get() == 1
    lost.refresh_from_db()
    assert lost.embedding is not None


# --- manage.py reembed ----------------------------------------------------------------------------
def test_reembed_missing(fake_embedder, thought_factory):
    pending = [thought_factory(f"Pending thought {i}.", embedding=None) for i in range(5)]
    done = thought_factory("Already embedded.")
    other_model = thought_factory("Embedded by another model.")
    Thought.objects.filter(pk=other_model.pk).update(embedding_model="old-model")
    fake_embedder.clear()
    out, err = StringIO(), StringIO()
    call_command("reembed", "--missing", "--batch-size", "2", stdout=out, stderr=err)
    assert "Embedded 6 thought(s)" in out.getvalue()
    assert "6/6" in err.getvalue()  # the progress bar
    assert done.content not in fake_embedder
    for thought in [*pending, other_model]:
        thought.refresh_from_db()
        assert thought.embedding is not None and thought.embedding_model == embedding.current_model_label()


def test_reembed_all_resumes_after_an_interruption(monkeypatch, settings, tmp_path, thought_factory, fake_embedder):
    settings.COLONY_DATA_DIR = tmp_path
    thoughts = [thought_factory(f"Thought number {i}.") for i in range(7)]
    Thought.objects.update(embedding_model="old-model")
    real = embedding.embed_many
    calls = {"n": 0}

    def flaky(texts, *, batch_size=64):
        calls["n"] += 1
        if calls["n"] == 3:
            raise EmbeddingError("worker killed")
        return real(texts, batch_size=batch_size)

    monkeypatch.setattr(embedding, "embed_many", flaky)
    with pytest.raises(CommandError, match="resumes"):
        call_command("reembed", "--all", "--batch-size", "2", stdout=StringIO(), stderr=StringIO())
    checkpoint = json.loads(checkpoint_path().read_text())
    assert checkpoint["done"] == 4
    assert Thought.objects.exclude(embedding_model="old-model").count() == 4

    monkeypatch.setattr(embedding, "embed_many", real)
    fake_embedder.clear()
    out = StringIO()
    call_command("reembed", "--all", "--batch-size", "2", stdout=out, stderr=StringIO())
    assert "Resuming after" in out.getvalue() and "Embedded 3 thought(s)" in out.getvalue()
    assert len(fake_embedder) == 3  # only the rest
    assert not checkpoint_path().exists()
    assert Thought.objects.filter(embedding_model="old-model").count() == 0
    assert len(thoughts) == 7


def test_reembed_recomputes_the_corrected_fact_embedding_of_corrections(fake_embedder, thought_factory):
    """The re-contamination guard compares new contributions with it: it must follow the model too."""
    correction = thought_factory(
        "CORRECTION: the cache uses LRU.",
        thought_category="correction",
        corrected_fact="The cache uses LFU.",
        correct_fact="The cache uses LRU.",
        corrected_fact_embedding=[1.0] + [0.0] * 383,
    )
    plain = thought_factory("An ordinary thought with a corrected_fact it does not act on.", corrected_fact="x y z")
    Thought.objects.update(embedding_model="old-model")
    call_command("reembed", "--missing", stdout=StringIO(), stderr=StringIO())
    correction.refresh_from_db()
    plain.refresh_from_db()
    assert list(correction.corrected_fact_embedding) == pytest.approx(fake_vector("The cache uses LFU."), abs=1e-6)
    assert list(correction.embedding) == pytest.approx(fake_vector(correction.content), abs=1e-6)
    assert plain.corrected_fact_embedding is None  # only corrections guard


def test_reembed_needs_a_mode():
    with pytest.raises(CommandError):
        call_command("reembed", stdout=StringIO(), stderr=StringIO())


@pytest.mark.django_db
def test_thought_table_keeps_room_for_hot_updates_and_vacuums_early():
    """Retrieval updates thoughts constantly; see brain/migrations/0005 (early vacuum, room for HOT updates)
    and 0014 (half of each page free) for why these matter."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'brain_thought'")
        (options,) = cursor.fetchone()
    assert set(options) >= {"fillfactor=50", "autovacuum_vacuum_scale_factor=0.02"}
