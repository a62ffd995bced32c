"""What happens to a thought after it is stored: the follow-up jobs, scheduled on commit.

``brain.services.thoughts.thought_create`` is a plain write. Whoever stores a thought (the memory
orchestration, the transition service, the admin) calls :func:`thought_schedule_followups` after it:

- a thought stored without a request-time vector gets ``brain.jobs.embed_thought`` after commit
  (full-text search finds it meanwhile);
- a thought that asks for contradiction detection gets ``brain.jobs.detect_contradictions`` after
  commit, or, when it has no vector yet, chained after its embedding job (the detector compares
  vectors), so the check never waits on a retry.

This module sits above ``brain.jobs`` (which sits above every service a job calls), so scheduling
never needs an import inside a function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from celery import chain
from django.db import transaction

from brain import jobs
from brain.models import Thought

#: Where work is handed instead of run at commit (the memory endpoint's after-response list).
Defer = Callable[[Callable[[], Any]], None]


def thought_schedule_followups(
    *, thought: Thought, detect_contradictions: bool = False, defer: Defer | None = None
) -> None:
    """Enqueue, on commit, what a freshly stored ``thought`` still needs (see the module docstring).

    With ``defer`` (the memory endpoint's after-response list), the contradiction check of a thought
    that has its vector is handed to ``defer`` at commit instead of sent then: publishing the Celery
    message (kombu) is ~9% of a contribution's time in process, and the check runs off the request
    path anyway (over HTTP, side by side: p50 -0.9..-1.5 ms; docs/performance.md)."""
    if thought.embedding is None:
        thought_enqueue_embedding(thought_id=str(thought.id), then_detect_contradictions=detect_contradictions)
    elif detect_contradictions:
        thought_schedule_contradiction_check(thought_id=str(thought.id), defer=defer)


def thought_enqueue_embedding(*, thought_id: str, then_detect_contradictions: bool = False) -> None:
    """Embed after commit; with ``then_detect_contradictions`` the contradiction check follows as a
    Celery chain (it runs only once the vector is stored, and not at all if embedding fails for good)."""
    if then_detect_contradictions:
        # The worker that finishes the embedding sends the check; pin it to the queue this chain is
        # sent to (the sender's default queue), or it would go to the worker app's default instead.
        queue = jobs.embed_thought.app.conf.task_default_queue
        work = chain(jobs.embed_thought.si(thought_id), jobs.detect_contradictions.si(thought_id).set(queue=queue))
        transaction.on_commit(lambda: work.delay(), robust=True)
    else:
        transaction.on_commit(lambda: jobs.embed_thought.delay(thought_id), robust=True)


def thought_schedule_contradiction_check(*, thought_id: str, defer: Defer | None = None) -> None:
    """Enqueue ``brain.jobs.detect_contradictions`` once the current transaction commits (with
    ``defer``: hand the sending to ``defer`` once it commits)."""

    def send() -> None:
        jobs.detect_contradictions.delay(str(thought_id))

    transaction.on_commit(send if defer is None else functools.partial(defer, send), robust=True)


def thought_content_changed(*, thought_id: str) -> None:
    """The content was edited outside the memory endpoint (admin): drop the stale vector and embed
    again after commit; full-text search finds the new wording meanwhile."""
    Thought.objects.filter(pk=thought_id).update(embedding=None, embedding_model="")
    thought_enqueue_embedding(thought_id=str(thought_id))
