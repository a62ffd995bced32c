"""Judges (SPEC 4.2): the offline judge on real sentence pairs with the real model, the LLM judge
against a local fake HTTP server speaking both provider formats."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from brain.judging import EmbeddingJudge, Judge, JudgeUnavailable, LLMJudge, Verdict, get_judge
from brain.judging.cues import (
    antonym_cue,
    negation_cue,
    number_cue,
    opposition_cue,
    sentence_negation_cue,
    sentence_number_mismatch,
    sentences,
    word_overlap,
)
from brain.judging.embedding import sentence_match
from brain.judging.llm import parse_verdict

# --- offline judge, real model --------------------------------------------------------------------

CONTRADICTING = [
    ("The deploy uses Postgres 15", "The deploy does not use Postgres 15"),
    ("Thomas is the certified Neuroimaginations-Coach", "Thomas is NOT the certified Neuroimaginations-Coach"),
    ("Feature flags are enabled in production", "Feature flags are disabled in production"),
    ("The CI pipeline passed on main", "The CI pipeline failed on main"),
    ("Redis is the Celery broker in production", "Redis is no longer the Celery broker in production"),
    ("The staging server isn't reachable from CI", "The staging server is reachable from CI"),
    ("The deploy uses Postgres 15", "The deploy uses Postgres 16"),
]

NOT_CONTRADICTING = [
    ("The deploy uses Postgres 15", "The office coffee machine is broken again"),
    ("The deploy uses Postgres 15", "The cache does not use Redis"),
    ("The deploy uses Postgres 15", "The deploy uses Postgres 15, not MySQL"),
    ("The API requires a bearer token", "The API requires a bearer token, stored hashed at rest"),
    ("Thomas is the certified Neuroimaginations-Coach", "Thomas founded XPollination as an EPU in 2026"),
]


@pytest.fixture(scope="module")
def judge():
    return EmbeddingJudge()


def test_embedding_judge_satisfies_the_interface(judge):
    assert isinstance(judge, Judge)
    assert judge.name == "embedding"


@pytest.mark.parametrize("a,b", CONTRADICTING)
def test_offline_judge_finds_contradictions(judge, a, b):
    verdict = judge.contradicts(a, b)
    assert isinstance(verdict, Verdict)
    assert verdict.verdict is True, verdict
    assert 0.5 <= verdict.confidence <= 1.0
    assert verdict.reason


@pytest.mark.parametrize("a,b", NOT_CONTRADICTING)
def test_offline_judge_does_not_invent_contradictions(judge, a, b):
    verdict = judge.contradicts(a, b)
    assert verdict.verdict is False, verdict
    assert 0.0 <= verdict.confidence <= 1.0


def test_offline_judge_is_symmetric_on_negation(judge):
    assert judge.contradicts("The deploy does not use Postgres 15", "The deploy uses Postgres 15").verdict


def test_offline_on_topic(judge):
    assert judge.on_topic("How do we deploy the database?", "The deploy uses Postgres 15").verdict
    assert not judge.on_topic("How do we deploy the database?", "The office coffee machine is broken").verdict


def test_offline_used_by_overlap_or_similarity(judge):
    item = "The deploy uses Postgres 15 with the pgvector extension"
    by_words = judge.used("I deployed it; Postgres 15 with pgvector is running.", item)
    assert by_words.verdict and "overlap" in by_words.reason
    by_meaning = judge.used("We run the deployment on PostgreSQL 15 plus its vector extension.", item)
    assert by_meaning.verdict
    assert not judge.used("I fixed the CSS of the login page.", item).verdict


# --- responses of several sentences (the quality loop's turns), real model -----------------------

RESPONSE = (
    "I checked the retention settings. TURN_LOG_RETENTION_DAYS defaults to 90; the daily expire job "
    "deletes older turn logs. The daily rollups are kept forever, so the history survives."
)


def test_a_sentence_stating_another_value_contradicts_the_item(judge):
    verdict = judge.contradicts("Turn logs expire after 30 days and their rollups with them.", RESPONSE)
    assert verdict.verdict is True, verdict
    assert "another number" in verdict.reason and "RETENTION_DAYS" in verdict.reason


def test_a_sentence_negating_the_item_contradicts_it_and_so_it_was_not_used(judge):
    item = "The full-text vector is maintained by a trigger on insert and update."
    response = (
        "I looked at the migration. The full-text vector is no longer maintained by a trigger; it is a "
        "generated column now."
    )
    assert judge.contradicts(item, response).verdict is True
    used = judge.used(response, item)
    assert used.verdict is False and "contradicts" in used.reason


def test_an_agreeing_response_is_used_and_not_contradicted(judge):
    item = "Daily rollups are kept forever; only turn logs expire."
    assert judge.contradicts(item, RESPONSE).verdict is False
    assert judge.used(RESPONSE, item).verdict is True


def test_a_negation_elsewhere_in_a_long_response_is_no_contradiction(judge):
    item = "A state snapshot whose temporal_scope is older than STALE_SNAPSHOT_DAYS (14) is flagged stale."
    response = (
        "A state snapshot with temporal_scope 20 days ago got the stale flag after the nightly job; "
        "STALE_SNAPSHOT_DAYS is 14. The nightly job did not crash this time."
    )
    assert judge.contradicts(item, response).verdict is False
    assert judge.used(response, item).verdict is True


def test_sentence_match_reports_the_most_similar_sentence(judge):
    match = sentence_match("Daily rollups are kept forever.", RESPONSE)
    assert match.best_sentence == "The daily rollups are kept forever, so the history survives."
    assert match.contradiction is None


# --- cues without the model -----------------------------------------------------------------------


def test_sentences_split_statements_and_tool_call_lines():
    text = "Done: two fixes. It works; tests pass!\nls -la var/\nok"
    assert sentences(text) == ["Done:", "two fixes.", "It works;", "tests pass!", "ls -la var/"]
    assert sentences("one statement") == ["one statement"]
    assert sentences("") == []


def test_sentence_negation_needs_a_strong_negation_in_the_response():
    item = "The worker uses Redis as the broker."
    assert sentence_negation_cue(item, "The worker does not use Redis any more.")
    assert not sentence_negation_cue(item, "The worker was started without Redis, so it fell back.")
    # both sides negate the same thing: agreement
    assert not sentence_negation_cue("The UI works without a JS build step.", "There is no JS build step.")


def test_a_negated_opposite_term_agrees():
    assert opposition_cue("flags are enabled", "flags are disabled") == ("enabled", "disabled")
    assert opposition_cue("the LLM judge is optional", "the LLM judge is never required") is None
    assert not negation_cue("the LLM judge is optional", "the LLM judge is never required")


@pytest.mark.parametrize(
    "item,sentence,whole,expected",
    [
        ("expire after 7 days", "flagged after 14 days", "flagged after 14 days", True),
        ("expire after 7 days", "flagged after 14 days", "7 days later; flagged after 14 days", False),  # repeated
        ("gamma = 0.3", "each use moves it by 30%", "each use moves it by 30%", False),  # 30% is 0.3
        ("needs count > 0", "41 of 41 passed", "41 of 41 passed", False),  # 0 and 1 are bounds, not values
        ("max(0, 1 + 0.5 u - 2.0 c)", "after 3 uses it is 1.33", "after 3 uses it is 1.33", False),  # a formula
        ("expire after 7 days", "they expire", "they expire", False),  # no value in the sentence
    ],
)
def test_sentence_number_mismatch(item, sentence, whole, expected):
    assert sentence_number_mismatch(item, sentence, whole) is expected


@pytest.mark.parametrize(
    "a,b,expected",
    [
        ("uses Postgres 15", "does not use Postgres 15", True),
        ("uses Postgres 15", "uses Postgres 15, not MySQL", False),  # the negation is about something else
        ("is not slow", "is not slow at all", False),  # both negate
        ("Agents push to main", "Agents never push to main", True),
        ("Redis is the broker", "Redis is no longer the broker", True),
        ("The job is running", "The job isn't running", True),
        ("Thomas ist Coach", "Thomas ist nicht Coach", True),
    ],
)
def test_negation_cue(a, b, expected):
    assert negation_cue(a, b) is expected


def test_antonym_cue():
    assert antonym_cue("flags are enabled", "flags are disabled") == ("enabled", "disabled")
    assert antonym_cue("flags are disabled", "flags are enabled") == ("disabled", "enabled")
    assert antonym_cue("enabled here, disabled there", "disabled there") is None
    assert antonym_cue("the build is green", "the build is red") is None  # not in the list: a documented limit


def test_number_cue():
    assert number_cue("The deploy uses Postgres 15", "The deploy uses Postgres 16")
    assert not number_cue("The deploy uses Postgres 15", "The deploy uses Postgres 15")
    assert not number_cue("We have 3 agents", "Release 4 shipped on Friday with a new dashboard")


def test_word_overlap_uses_distinctive_words():
    assert word_overlap("postgres and pgvector", "The deploy uses Postgres with pgvector") == pytest.approx(2 / 3)
    assert word_overlap("anything", "a an the of") == 0.0


# --- verdict parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ('{"verdict": true, "confidence": 0.9, "reason": "negation"}', Verdict(True, 0.9, "negation")),
        ('```json\n{"verdict": false, "confidence": 0.2, "reason": "x"}\n```', Verdict(False, 0.2, "x")),
        (
            'Sure! Here it is: {"verdict": "true", "confidence": "0.7", "reason": "r"} Hope it helps.',
            Verdict(True, 0.7, "r"),
        ),
        ('{"verdict": true, "confidence": 7, "reason": "r"}', Verdict(True, 1.0, "r")),
        ('{"verdict": false}', Verdict(False, 0.5, "")),
        ('{"note": {"x": 1}} {"verdict": true, "confidence": 0.6, "reason": "second"}', Verdict(True, 0.6, "second")),
    ],
)
def test_parse_verdict_is_tolerant_of_wrapping(text, expected):
    assert parse_verdict(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yes",
        "{not json}",
        '{"answer": true}',
        '{"verdict": "maybe", "confidence": 0.5}',
        '{"verdict": 1, "confidence": 0.5}',
        '{"verdict": true, "confidence": "high"}',
    ],
)
def test_parse_verdict_refuses_guesses(text):
    with pytest.raises(JudgeUnavailable):
        parse_verdict(text)


# --- LLM judge against a fake server --------------------------------------------------------------


class FakeLLM:
    """A local HTTP server that records requests and answers as configured."""

    def __init__(self):
        self.requests: list[dict] = []
        self.status = 200
        self.body: bytes | None = None
        self.answer_text = '{"verdict": true, "confidence": 0.8, "reason": "B negates A"}'
        self.delay = 0.0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server API)
                length = int(self.headers.get("Content-Length", 0))
                payload = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append({"path": self.path, "headers": dict(self.headers), "json": payload})
                if fake.delay:
                    time.sleep(fake.delay)
                body = fake.body if fake.body is not None else fake.provider_body(self.path)
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def provider_body(self, path: str) -> bytes:
        if path.endswith("/v1/messages"):
            data = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": self.answer_text}],
                "stop_reason": "end_turn",
            }
        else:
            data = {
                "id": "c1",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": self.answer_text}}],
            }
        return json.dumps(data).encode()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_llm():
    server = FakeLLM()
    yield server
    server.close()


def openai_judge(fake, **kw):
    return LLMJudge(provider="openai", base_url=f"{fake.url}/v1", api_key="sk-test", model="judge-1", **kw)


def anthropic_judge(fake, **kw):
    return LLMJudge(provider="anthropic", base_url=fake.url, api_key="ak-test", model="claude-x", **kw)


def test_openai_compatible_request_and_answer(fake_llm):
    verdict = openai_judge(fake_llm).contradicts("The deploy uses Postgres 15", "The deploy does not use it")
    assert verdict == Verdict(True, 0.8, "B negates A")
    request = fake_llm.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["json"]
    assert body["model"] == "judge-1" and body["temperature"] == 0
    assert body["messages"][0]["role"] == "system" and "JSON" in body["messages"][0]["content"]
    assert "The deploy uses Postgres 15" in body["messages"][1]["content"]
    assert "The deploy does not use it" in body["messages"][1]["content"]


def test_anthropic_request_and_answer(fake_llm):
    fake_llm.answer_text = 'Here you go:\n```json\n{"verdict": false, "confidence": 0.3, "reason": "unrelated"}\n```'
    verdict = anthropic_judge(fake_llm).on_topic("How do we deploy?", "Coffee machine is broken")
    assert verdict == Verdict(False, 0.3, "unrelated")
    request = fake_llm.requests[0]
    assert request["path"] == "/v1/messages"
    assert request["headers"]["x-api-key"] == "ak-test"
    assert request["headers"]["anthropic-version"] == "2023-06-01"
    body = request["json"]
    assert body["model"] == "claude-x" and "JSON" in body["system"] and body["max_tokens"] > 0
    assert body["messages"] == [{"role": "user", "content": body["messages"][0]["content"]}]
    assert "Coffee machine is broken" in body["messages"][0]["content"]


def test_used_asks_about_the_response(fake_llm):
    openai_judge(fake_llm).used("We deployed on Postgres 15.", "The deploy uses Postgres 15")
    assert "Did the response use" in fake_llm.requests[0]["json"]["messages"][1]["content"]


def test_timeout_is_unavailable(fake_llm):
    fake_llm.delay = 1.0
    started = time.monotonic()
    with pytest.raises(JudgeUnavailable, match="did not answer"):
        openai_judge(fake_llm, timeout=0.2).contradicts("a", "b")
    assert time.monotonic() - started < 0.9


@pytest.mark.parametrize(
    "status,body",
    [
        (500, b'{"error": "overloaded"}'),
        (429, b'{"error": "rate limited"}'),
        (200, b"<html>gateway</html>"),
        (200, b'{"unexpected": "shape"}'),
        (200, json.dumps({"choices": [{"message": {"content": "I think they contradict."}}]}).encode()),
    ],
    ids=["500", "429", "html", "wrong-shape", "prose-instead-of-json"],
)
def test_garbage_answers_are_unavailable(fake_llm, status, body):
    fake_llm.status, fake_llm.body = status, body
    with pytest.raises(JudgeUnavailable):
        openai_judge(fake_llm).contradicts("a", "b")


def test_anthropic_garbage_shape_is_unavailable(fake_llm):
    fake_llm.body = b'{"content": "not a list of blocks"}'
    with pytest.raises(JudgeUnavailable):
        anthropic_judge(fake_llm).contradicts("a", "b")


def test_endpoint_down_is_unavailable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    judge = LLMJudge(provider="openai", base_url=f"http://127.0.0.1:{port}/v1", api_key="", model="m", timeout=1)
    with pytest.raises(JudgeUnavailable):
        judge.contradicts("a", "b")


# --- choosing a judge -----------------------------------------------------------------------------


def test_default_judge_is_the_offline_one():
    assert get_judge().name == "embedding"
    assert isinstance(get_judge("embedding"), EmbeddingJudge)


@override_settings(
    QUALITY_JUDGE="llm",
    QUALITY_LLM_PROVIDER="anthropic",
    QUALITY_LLM_BASE_URL="http://127.0.0.1:9/",
    QUALITY_LLM_API_KEY="k",
    QUALITY_LLM_MODEL="claude-x",
    QUALITY_LLM_TIMEOUT=3,
)
def test_llm_judge_from_settings():
    judge = get_judge()
    assert isinstance(judge, LLMJudge) and isinstance(judge, Judge)
    assert (judge.provider, judge.base_url, judge.model, judge.timeout) == (
        "anthropic",
        "http://127.0.0.1:9",
        "claude-x",
        3.0,
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"QUALITY_JUDGE": "oracle"},
        {"QUALITY_JUDGE": "llm", "QUALITY_LLM_MODEL": ""},
        {"QUALITY_JUDGE": "llm", "QUALITY_LLM_MODEL": "m", "QUALITY_LLM_PROVIDER": "cohere"},
    ],
)
def test_misconfigured_judge_is_refused(overrides):
    with override_settings(**overrides), pytest.raises(ImproperlyConfigured):
        get_judge()
