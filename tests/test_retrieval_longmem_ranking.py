"""Contrast and diversity (brain/ranking.py) find more of the long-conversation benchmark's evidence
than the ranking without them, with the real model, on one dev conversation (m01: 447 turns, 46
answerable questions) stored in the test database and searched through ``thought_search``."""

from __future__ import annotations

import pytest

from benchmarks.longmem.dataset import load
from brain import ranking
from brain.embedding import embed, embed_many
from brain.selectors.search import thought_search


@pytest.fixture(scope="module")
def m01():
    dataset = load("dev")
    conversation = dataset.conversation("m01")
    questions = [q for q in dataset.questions_for("m01") if q.evidence]
    return conversation, questions, dataset.turns


def recall_at_10(space, questions, turns, vectors) -> int:
    found = 0
    for question in questions:
        result = thought_search(space=space, vector=vectors[question.id], query_text=question.question, limit=10)
        contents = {c.thought.content for c in result.candidates}
        found += any(turns[e].text in contents for e in question.evidence)
    return found


@pytest.mark.django_db
def test_contrast_and_diversity_find_more_evidence_than_either_alone_or_neither(
    m01, space, thought_factory, monkeypatch
):
    conversation, questions, turns = m01
    texts = [turn.text for turn in conversation.turns]
    for text, vector in zip(texts, embed_many(texts), strict=True):
        thought_factory(text, embedding=vector)
    vectors = {q.id: embed(q.question) for q in questions}

    shipped = recall_at_10(space, questions, turns, vectors)
    monkeypatch.setattr(ranking, "DIVERSITY_LAMBDA", 1.0)
    contrast_only = recall_at_10(space, questions, turns, vectors)
    monkeypatch.setattr(ranking, "CONTRAST_BETA", 0.0)
    neither = recall_at_10(space, questions, turns, vectors)

    assert shipped >= contrast_only >= neither, (shipped, contrast_only, neither)
    assert shipped - neither >= 3, (shipped, contrast_only, neither)  # 29, 27 and 25 of 46 when written
