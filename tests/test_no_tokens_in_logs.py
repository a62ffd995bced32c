"""Tokens never appear in logs (SPEC 6): a full request cycle with every log captured.

API calls that succeed and fail (400, 401 with a wrong token, 404, 405, 429, a 500 from a broken
view), a worker job (the turn-scoring job, run inline as the eager worker does) and an import, with
the root logger at DEBUG; then every token issued or sent is searched for in the captured records,
their formatted text and the process's stdout/stderr.
"""

from __future__ import annotations

import logging

import pytest

from brain.apis import thoughts as thought_apis

pytestmark = pytest.mark.django_db


def test_a_full_cycle_logs_no_token(agent_factory, anon, space, caplog, capfd, fake_embedder, settings, monkeypatch):
    caplog.set_level(logging.DEBUG)
    dev, liaison = agent_factory("dev"), agent_factory("liaison")
    tokens = [dev.token, liaison.token]
    wrong = "col_" + "x" * 40
    tokens.append(wrong)

    contributed = dev.post(
        "/api/v1/memory",
        {"prompt": "The deploy pipeline runs migrations before restarting the workers.", "session_id": "s1"},
        format="json",
    )
    assert contributed.status_code == 200
    thought_id = contributed.json()["trace"]["thought_id"]
    assert dev.get("/api/v1/memory", {"prompt": "how do deploys work?", "session_id": "s1"}).status_code == 200
    assert dev.get(f"/api/v1/thoughts/{thought_id}").status_code == 200
    assert dev.get("/api/v1/thoughts/00000000-0000-0000-0000-000000000000").status_code == 404
    assert dev.post("/api/v1/memory", {"prompt": ""}, format="json").status_code == 400
    assert dev.delete("/api/v1/memory").status_code == 405
    anon.credentials(HTTP_AUTHORIZATION=f"Bearer {wrong}")
    assert anon.get("/api/v1/agents/me").status_code == 401
    assert liaison.post("/api/v1/projects", {"slug": "p", "name": "P"}, format="json").status_code == 201
    assert liaison.post("/api/v1/tasks", {"project": "p", "slug": "t1", "title": "T"}, format="json").status_code == 201
    assert liaison.post("/api/v1/tasks/t1/transition", {"to": "pending"}, format="json").status_code == 200
    turn = {
        "session_id": "s1",
        "turn_id": "1",
        "user_prompt": "how do deploys work?",
        "assistant_response": "The pipeline runs migrations first, then restarts workers.",
        "tool_calls": [],
    }
    assert dev.post("/api/v1/turns", turn, format="json").status_code in (201, 202)  # the scoring job runs inline
    assert dev.post("/api/v1/thoughts/import", [{"content": "imported"}], format="json").status_code == 201

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in a view")

    monkeypatch.setattr(thought_apis, "thought_detail", broken)
    settings.DEBUG_PROPAGATE_EXCEPTIONS = False
    dev.raise_request_exception = False
    assert dev.get(f"/api/v1/thoughts/{thought_id}").status_code == 500
    from tests.test_core_throttling import _forget

    # The earlier calls left the liaison's throttle state a few milliseconds ahead of the clock at
    # the default rate; forgotten, its first call at 1/hour passes and the second is refused.
    _forget(liaison)
    settings.API_THROTTLE_RATE = "1/hour"
    assert liaison.get("/api/v1/agents/me").status_code == 200
    assert liaison.get("/api/v1/agents/me").status_code == 429
    _forget(dev, liaison)

    captured = capfd.readouterr()
    text = "\n".join(
        [caplog.text, captured.out, captured.err]
        + [repr(vars(record)) for record in caplog.records]  # extra= fields too (e.g. the request object)
    )
    assert len(caplog.records) > 5  # the cycle did log (warnings for 4xx, the 500's traceback)
    assert "a bug in a view" in text
    for token in tokens:
        assert token not in text, "a token was logged"
        assert token[:16] not in text
