"""The LLM judge: asks a language model (Anthropic's Messages API, or any OpenAI-compatible
``/chat/completions`` endpoint) for a strict JSON verdict. Never required: nothing in Colony needs it
to run or to be tested.
"""

from __future__ import annotations

import json
import math
import re

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from api.text import without_invisible_controls
from brain.judging.base import JudgeAnswerInvalid, JudgeUnavailable, Verdict

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_BASE_URLS = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}
LLM_MAX_TOKENS = 300
#: Answers that refuse the request's input (a content filter, a text too long for the model, a body
#: the provider can't process): about this pair of texts, so the pair is skipped (JudgeAnswerInvalid),
#: not retried as an outage. A thought the provider always refuses would otherwise fail every job that
#: judges it, and the other pairs of those jobs with it. Authentication, a missing model, rate limits and
#: server errors stay JudgeUnavailable (retried; the operator fixes the configuration).
REFUSED_INPUT_STATUSES = frozenset({400, 413, 422})

SYSTEM_PROMPT = (
    "You are a strict evaluator for a knowledge base used by AI agents. Answer ONLY with one JSON "
    'object of the form {"verdict": true|false, "confidence": <number from 0 to 1>, "reason": "<one '
    'short sentence>"} and nothing else.'
)

QUESTIONS = {
    "contradicts": (
        "Statement A:\n{a}\n\nStatement B:\n{b}\n\n"
        "Does statement B contradict statement A, i.e. can they not both be true? Different topics, "
        "or B adding detail, are NOT contradictions."
    ),
    "on_topic": (
        "Request:\n{a}\n\nKnowledge item:\n{b}\n\nIs the knowledge item relevant to the request, i.e. "
        "would it help to answer it?"
    ),
    "used": (
        "Response:\n{a}\n\nKnowledge item:\n{b}\n\nDid the response use the knowledge item: does it "
        "rely on, repeat or build on information that the item provides?"
    ),
}


def parse_verdict(text: str) -> Verdict:
    """The first JSON object in ``text`` as a Verdict; code fences and chatter around it are ignored.

    Strict about meaning: ``verdict`` must be a boolean (or "true"/"false"), ``confidence`` a number
    (clamped to 0..1; missing = 0.5), ``reason`` a string (missing = ""). Anything else raises
    JudgeAnswerInvalid (a JudgeUnavailable) instead of storing a guess.
    """
    decoder = json.JSONDecoder()
    data = None
    for match in re.finditer(r"\{", text or ""):
        try:
            candidate, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(candidate, dict) and "verdict" in candidate:
            data = candidate
            break
    if data is None:
        raise JudgeAnswerInvalid(f"The judge's answer holds no JSON verdict: {str(text)[:200]!r}")
    raw_verdict = data["verdict"]
    if isinstance(raw_verdict, str) and raw_verdict.strip().lower() in {"true", "false"}:
        raw_verdict = raw_verdict.strip().lower() == "true"
    if not isinstance(raw_verdict, bool):
        raise JudgeAnswerInvalid(f"The judge's verdict is not a boolean: {raw_verdict!r}")
    raw_confidence = data.get("confidence", 0.5)
    try:
        if isinstance(raw_confidence, bool):
            raise TypeError("a boolean")
        confidence = float(raw_confidence)  # an int of 300 digits overflows a float
    except (TypeError, ValueError, OverflowError):
        raise JudgeAnswerInvalid(f"The judge's confidence is not a number: {str(raw_confidence)[:50]!r}") from None
    if not math.isfinite(confidence):
        raise JudgeAnswerInvalid(f"The judge's confidence is not finite: {confidence!r}")
    reason = data.get("reason", "")
    if not isinstance(reason, str):
        reason = json.dumps(reason)
    return Verdict(raw_verdict, min(1.0, max(0.0, confidence)), storable_reason(reason))


#: The most of a judge's reason that is kept (it is stored with the verdict and shown on the pages).
REASON_MAX_CHARS = 1000


def storable_reason(reason: str) -> str:
    """A judge's reason as it can be stored and shown: the judged texts can steer a model into writing a
    NUL or half a surrogate pair (which PostgreSQL refuses, failing the whole job) or hidden controls;
    those go, and the reason is cut to REASON_MAX_CHARS."""
    reason = reason.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    return without_invisible_controls(reason)[:REASON_MAX_CHARS]


class LLMJudge:
    """A judge that asks a language model. ``provider`` is ``anthropic`` or ``openai`` (any
    OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, LiteLLM...)."""

    name = "llm"

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        api_key: str,
        model: str,
        timeout: float = 20.0,
        transport: httpx.BaseTransport | None = None,
    ):
        provider = (provider or "").strip().lower()
        if provider not in DEFAULT_BASE_URLS:
            raise ImproperlyConfigured(f"QUALITY_LLM_PROVIDER must be 'anthropic' or 'openai', not {provider!r}.")
        if not model:
            raise ImproperlyConfigured("QUALITY_LLM_MODEL must name the model the LLM judge asks.")
        self.provider = provider
        self.base_url = (base_url or DEFAULT_BASE_URLS[provider]).rstrip("/")
        self.api_key = api_key
        self.model = model
        self.timeout = float(timeout)
        self._transport = transport

    @classmethod
    def from_settings(cls) -> LLMJudge:
        return cls(
            provider=settings.QUALITY_LLM_PROVIDER,
            base_url=settings.QUALITY_LLM_BASE_URL,
            api_key=settings.QUALITY_LLM_API_KEY,
            model=settings.QUALITY_LLM_MODEL,
            timeout=settings.QUALITY_LLM_TIMEOUT,
        )

    def contradicts(self, a: str, b: str) -> Verdict:
        return self.ask("contradicts", a, b)

    def on_topic(self, prompt: str, item: str) -> Verdict:
        return self.ask("on_topic", prompt, item)

    def used(self, response: str, item: str) -> Verdict:
        return self.ask("used", response, item)

    def ask(self, question: str, a: str, b: str) -> Verdict:
        """Ask one question about a pair of texts and parse the model's JSON answer."""
        user = QUESTIONS[question].format(a=a, b=b)
        if self.provider == "anthropic":
            url = f"{self.base_url}/v1/messages"
            headers = {"x-api-key": self.api_key, "anthropic-version": ANTHROPIC_VERSION}
            body = {
                "model": self.model,
                "max_tokens": LLM_MAX_TOKENS,
                "temperature": 0,
                "system": SYSTEM_PROMPT,
                "messages": [{"role": "user", "content": user}],
            }
        else:
            url = f"{self.base_url}/chat/completions"
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            body = {
                "model": self.model,
                "max_tokens": LLM_MAX_TOKENS,
                "temperature": 0,
                "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
            }
        try:
            with httpx.Client(timeout=self.timeout, transport=self._transport) as client:
                response = client.post(url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise JudgeUnavailable(f"LLM judge at {url} did not answer: {type(exc).__name__}: {exc}") from exc
        if response.status_code in REFUSED_INPUT_STATUSES:
            raise JudgeAnswerInvalid(
                f"LLM judge at {url} refused this pair's input, HTTP {response.status_code}: {response.text[:200]}"
            )
        if response.status_code != 200:
            raise JudgeUnavailable(f"LLM judge at {url} answered HTTP {response.status_code}: {response.text[:200]}")
        try:
            payload = response.json()
        except ValueError as exc:
            raise JudgeUnavailable(f"LLM judge at {url} answered non-JSON: {response.text[:200]!r}") from exc
        return parse_verdict(self._answer_text(payload))

    def _answer_text(self, payload) -> str:
        """The model's text from a Messages or a Chat Completions response."""
        try:
            if self.provider == "anthropic":
                return "".join(part.get("text", "") for part in payload["content"] if part.get("type") == "text")
            return payload["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise JudgeUnavailable(f"Unexpected {self.provider} response shape: {str(payload)[:200]}") from exc
