"""Judging: does one text contradict, concern or use another? (SPEC 2.5, 4.2)

One interface, two implementations, shared by the brain's contradiction detector and the quality
loop's turn scoring:

- :class:`EmbeddingJudge` — the offline default. Sentence similarity (all-MiniLM-L6-v2) plus a few
  surface cues. It needs no network and no key and is deterministic.
- :class:`LLMJudge` — asks a language model (Anthropic's Messages API, or any OpenAI-compatible
  ``/chat/completions`` endpoint) for a strict JSON verdict. Never required: nothing in Colony
  needs it to run or to be tested.

:func:`get_judge` picks one from ``settings.QUALITY_JUDGE`` (``embedding`` | ``llm``). A judge that
cannot answer right now (endpoint down, timeout, unparseable answer, embedding model failing)
raises :class:`JudgeUnavailable`; callers are Celery jobs, which retry it.

The package sits below both apps that judge: ``brain.judging.base`` (the interface),
``brain.judging.cues`` (sentence cues, pure text), ``brain.judging.embedding`` (the offline judge,
how it answers), ``brain.judging.llm`` (the LLM client).

Measured agreement (``manage.py validate_judge quality/fixtures/judge_validation.jsonl --judge
embedding``, 53 turns / 148 items; thresholds tuned on the odd-numbered turns only, ``--split``):

=============  =========================  ==========================  =================
metric         tune half (27 t, 75 items)  held-out (26 t, 73 items)   whole file
=============  =========================  ==========================  =================
on_topic       96.0%                       84.9%                       90.5%
used           92.0%                       82.2%                       87.2%
contradicted   97.3% (found 5 of 7)        82.2% (found 2 of 10)       89.9% (7 of 17)
=============  =========================  ==========================  =================

The held-out column is the honest estimate for unseen turns: below 85% on every metric, and its
contradiction agreement is *below* answering "no" always (86.3% there). The whole-file figure is
lifted by the half the thresholds were tuned on, so trust is decided on held-out turns only
(``quality.services.validation.trust_decide``). With the 200 held-out turns of
``quality/fixtures/judge_heldout.jsonl`` added (570 held-out items): on_topic 91.8%, used 77.2%,
contradicted 84.4% (28 of 77 found): the offline judge is not trusted.

Limits of the offline judge — read these before trusting it:

- It only sees contradictions that look like each other. It misses those that need knowledge or
  paraphrase: "Redis is the broker" vs "RabbitMQ is the broker" (different names, no cue), "runs
  once a day" vs "scheduled hourly", "must call the Anthropic API in CI" vs "is never required to
  run", antonyms outside its small list, contradictions across languages.
- A negation of the same words about another subject fools it: "A snapshot older than 14 days is
  flagged stale" vs "The snapshot from yesterday was not flagged" counts as a contradiction; so do
  double negations and numbers that are ids rather than values ("task 12 done" vs "task 13 done").
- ``used`` is similarity, not understanding: a response that talks about the same thing without
  relying on the item counts as using it, one that acts on an item in other words (a command whose
  effect the item explains) does not.
- ``on_topic`` from the prompt alone is weak (70.9% on the file): short prompts ("run the tests")
  share nothing with the item that matters for them. Most of its agreement comes from the
  used-or-contradicted rule.
- English cues, with a handful of German negations (nicht, kein, nie) because the seed's brain is
  bilingual.

Agreement with hand labels is measured by ``manage.py validate_judge`` (quality loop), which decides
whether a judge is trusted for ranking.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from brain.judging.base import Judge, JudgeAnswerInvalid, JudgeUnavailable, Verdict
from brain.judging.embedding import EmbeddingJudge
from brain.judging.llm import LLMJudge

__all__ = ["EmbeddingJudge", "Judge", "JudgeAnswerInvalid", "JudgeUnavailable", "LLMJudge", "Verdict", "get_judge"]


def get_judge(name: str | None = None) -> Judge:
    """The judge named ``name``, or the one ``settings.QUALITY_JUDGE`` names."""
    chosen = (name or settings.QUALITY_JUDGE or "embedding").strip().lower()
    if chosen == "embedding":
        return EmbeddingJudge()
    if chosen == "llm":
        return LLMJudge.from_settings()
    raise ImproperlyConfigured(f"QUALITY_JUDGE must be 'embedding' or 'llm', not {chosen!r}.")
