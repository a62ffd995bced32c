"""Deterministic judges and builders for the quality-loop tests (not a test module).

``LexicalJudge`` implements the ``brain.judging.Judge`` protocol with word overlap, so its verdicts
can be worked out by hand; ``ScriptedJudge`` answers from marker words. ``lexical_judge_factory``
is a ``QUALITY_JUDGE_FACTORY`` for processes (a real Celery worker) that can't be handed an object.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from brain.models import QueryLog, Thought
from core.models import Space
from quality import formulas
from quality.models import JudgeValidation, TurnItem, TurnLog

WORD = re.compile(r"[a-z0-9_]+")
STOP = {"this", "that", "with", "from", "have", "will", "when", "what", "which", "then", "than", "into", "does"}
NEGATION = re.compile(r"\b(not|no longer|wrong|instead|never|isn't|doesn't|don't)\b")


@dataclass(frozen=True)
class Verdict:
    verdict: bool
    confidence: float
    reason: str


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if len(w) >= 4 and w not in STOP}


def overlap(item: str, other: str) -> float:
    item_words = words(item)
    return len(item_words & words(other)) / len(item_words) if item_words else 0.0


class LexicalJudge:
    """on topic: >= 20% of the item's words in the prompt; used: >= 40% in the response;
    contradicted: a response sentence with a negation shares >= 2 words with the item."""

    name = "lexical"

    def on_topic(self, prompt: str, item: str) -> Verdict:
        share = overlap(item, prompt)
        return Verdict(share >= 0.2, min(1.0, share * 2), f"{share:.2f} of the item's words in the prompt")

    def used(self, response: str, item: str) -> Verdict:
        share = overlap(item, response)
        return Verdict(share >= 0.4, min(1.0, share * 1.5), f"{share:.2f} of the item's words in the response")

    def contradicts(self, a: str, b: str) -> Verdict:
        item_words = words(a)
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", b):
            if NEGATION.search(sentence.lower()) and len(item_words & words(sentence)) >= 2:
                return Verdict(True, 0.8, f"negated: {sentence[:80]}")
        return Verdict(False, 0.6, "no negated sentence about it")


def lexical_judge_factory(name: str | None = None) -> LexicalJudge:
    return LexicalJudge()


class ScriptedJudge:
    """Answers True when the item text contains one of the marker words given for that question."""

    def __init__(self, *, on_topic=(), used=(), contradicted=(), name: str = "scripted"):
        self.name = name
        self.markers = {"on_topic": set(on_topic), "used": set(used), "contradicted": set(contradicted)}
        self.calls: list[tuple[str, str, str]] = []

    def _answer(self, question: str, item: str, other: str) -> Verdict:
        self.calls.append((question, item, other))
        hit = any(marker in item for marker in self.markers[question])
        return Verdict(hit, 0.9 if hit else 0.7, f"scripted {question}: {hit}")

    def on_topic(self, prompt: str, item: str) -> Verdict:
        return self._answer("on_topic", item, prompt)

    def used(self, response: str, item: str) -> Verdict:
        return self._answer("used", item, response)

    def contradicts(self, a: str, b: str) -> Verdict:
        return self._answer("contradicted", a, b)


def make_thought(space: Space, content: str, **fields) -> Thought:
    """A thought with a fixed vector, so no embedding job is needed."""
    return Thought.objects.create(
        space=space,
        content=content,
        contributor_id="tester",
        contributor_name="tester",
        embedding=[0.1] * 384,
        **fields,
    )


def make_query_log(
    space: Space, session_id: str, thoughts: list[Thought], scores: list[float] | None = None, *, agent=None
):
    """A memory call's query-log row; ``agent``: the agent that made it (feedback on its sources counts
    only for that agent's turns)."""
    scores = scores or [round(0.9 - 0.1 * i, 2) for i in range(len(thoughts))]
    return QueryLog.objects.create(
        space=space,
        agent=agent,
        agent_ref="tester",
        session_id=session_id,
        query_text="what do we know",
        results=[{"id": str(t.id), "score": s} for t, s in zip(thoughts, scores, strict=True)],
    )


def new_session() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


def make_turn(agent, at, outcomes, *, status="scored", session_id: str | None = None, turn_id: str = "t") -> TurnLog:
    """A turn logged at ``at`` whose items have the given (thought, on_topic, used, contradicted); in a
    session of its own unless ``session_id`` is given."""
    turn = TurnLog.objects.create(
        space=agent.space,
        agent=agent,
        agent_name=agent.name,
        session_id=session_id or new_session(),
        turn_id=turn_id,
        injected_from="explicit",
        status=status,
    )
    TurnLog.objects.filter(pk=turn.pk).update(created_at=at)
    for position, (thought, on_topic, used, contradicted) in enumerate(outcomes):
        TurnItem.objects.create(
            turn=turn,
            thought=thought,
            position=position,
            excerpt=thought.content[:500],
            content_length=len(thought.content),
            on_topic=on_topic if status == "scored" else None,
            used=used if status == "scored" else None,
            contradicted=contradicted if status == "scored" else None,
            verdict_source="judge" if status == "scored" else "",
            fed_ema=status == "scored",
        )
    return turn


def marker_judge_factory(name: str | None = None) -> ScriptedJudge:
    """A judge whose verdicts follow markers in the item text: [on], [used], [contra]."""
    return ScriptedJudge(on_topic={"[on]"}, used={"[used]"}, contradicted={"[contra]"}, name=name or "embedding")


def trust(judge_name: str, on_topic=0.9, used=0.9, contradicted=0.9) -> JudgeValidation:
    """A validation of ``judge_name`` on 50 turns (trusted when every agreement is at least 0.85)."""
    return JudgeValidation.objects.create(
        judge_name=judge_name,
        source="labels.jsonl",
        source_sha256="0" * 64,
        turns=50,
        items=150,
        on_topic_agreement=on_topic,
        used_agreement=used,
        contradicted_agreement=contradicted,
        trusted=min(on_topic, used, contradicted) >= 0.85,
        details={"trust_rule": formulas.JUDGE_TRUST_RULE},
    )
