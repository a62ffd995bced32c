"""Storing thoughts and computing their embeddings.

``thought_create`` is the one low-level write every other path uses (the memory endpoint,
transition markers, imports, corrections). A thought stored without a request-time vector gets
its embedding from ``brain.jobs.embed_thought``, enqueued on commit; full-text search finds it
meanwhile.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from brain import embedding as embedder
from brain.choices import ThoughtCategory, ThoughtType
from brain.models import Thought
from core.models import Agent, Space

logger = logging.getLogger("colony.brain")


@transaction.atomic
def thought_create(
    *,
    space: Space,
    content: str,
    contributor_id: str,
    contributor_name: str,
    agent: Agent | None = None,
    thought_category: str = ThoughtCategory.UNCATEGORIZED,
    thought_type: str = ThoughtType.ORIGINAL,
    embedding: list[float] | None = None,
    related_thoughts: list | None = None,
    **fields: Any,
) -> Thought:
    """Insert one thought. Without ``embedding`` the vector is computed by a Celery job after commit.

    ``related_thoughts`` (ids of the same space) become bidirectional links.
    """
    thought = Thought.objects.create(
        space=space,
        content=content,
        contributor_id=contributor_id,
        contributor_name=contributor_name,
        agent=agent,
        thought_category=thought_category,
        thought_type=thought_type,
        embedding=embedding,
        embedding_model=embedder.current_model_label() if embedding is not None else "",
        **fields,
    )
    if related_thoughts:
        thought.related_thoughts.add(*related_thoughts)
    if embedding is None:
        thought_enqueue_embedding(thought_id=str(thought.id))
    return thought


def thought_enqueue_embedding(*, thought_id: str) -> None:
    from brain import jobs

    transaction.on_commit(lambda: jobs.embed_thought.delay(thought_id))


def thought_embed(*, thought_id: str, force: bool = False) -> bool:
    """Compute and store the embedding of one thought; returns False when there was nothing to do."""
    thought = Thought.objects.filter(pk=thought_id).only("id", "content", "embedding", "embedding_model").first()
    if thought is None:
        return False
    label = embedder.current_model_label()
    if thought.embedding is not None and thought.embedding_model == label and not force:
        return False
    vector = embedder.embed(thought.content)
    Thought.objects.filter(pk=thought_id).update(embedding=vector, embedding_model=label)
    return True


def thoughts_embed_batch(*, thought_ids: list[str]) -> int:
    """Embed many thoughts in one model call (re-embedding); returns how many were written.

    The model runs before the transaction opens; the writes are one bulk update.
    """
    thoughts = list(Thought.objects.filter(pk__in=thought_ids).only("id", "content"))
    if not thoughts:
        return 0
    vectors = embedder.embed_many([t.content for t in thoughts])
    label = embedder.current_model_label()
    for thought, vector in zip(thoughts, vectors, strict=True):
        thought.embedding = vector
        thought.embedding_model = label
    with transaction.atomic():
        Thought.objects.bulk_update(thoughts, ["embedding", "embedding_model"])
    return len(thoughts)


def thought_content_changed(*, thought_id: str) -> None:
    """The content was edited outside the memory endpoint (admin): drop the stale vector and embed
    again after commit; full-text search finds the new wording meanwhile."""
    Thought.objects.filter(pk=thought_id).update(embedding=None, embedding_model="")
    thought_enqueue_embedding(thought_id=str(thought_id))
