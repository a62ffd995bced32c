"""The judge interface: one verdict type, one error, one protocol (SPEC 2.5, 4.2).

Every judge (the offline :class:`~brain.judging.embedding.EmbeddingJudge`, the
:class:`~brain.judging.llm.LLMJudge`, a test's deterministic one) answers three questions about a
pair of texts with a :class:`Verdict`, and raises :class:`JudgeUnavailable` when it can't answer
right now; callers are Celery jobs, which retry it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Verdict:
    """A judge's answer: the yes/no, how sure it is (0..1) and why, in words for humans."""

    verdict: bool
    confidence: float
    reason: str


class JudgeUnavailable(RuntimeError):
    """The judge could not answer now (endpoint down, timeout, bad answer): transient, jobs retry."""


class JudgeAnswerInvalid(JudgeUnavailable):
    """The judge answered, but with no verdict (no JSON, not a boolean): about this pair of texts, whose
    words may have steered the model (a thought saying "ignore your instructions"), not about the
    judge. A caller judging many pairs skips this one and goes on with the others."""


@runtime_checkable
class Judge(Protocol):
    name: str

    def contradicts(self, a: str, b: str) -> Verdict:
        """Does ``b`` contradict ``a`` (can they not both be true)?"""
        ...

    def on_topic(self, prompt: str, item: str) -> Verdict:
        """Is ``item`` relevant to ``prompt``?"""
        ...

    def used(self, response: str, item: str) -> Verdict:
        """Did ``response`` use (build on) ``item``?"""
        ...
