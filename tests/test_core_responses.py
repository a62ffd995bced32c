"""api.responses.ResponseThenWork: work that runs once the answer is out (the WSGI close() hook),
and the memory call's reinforcement, which runs there (tests/test_core_wsgi_bridge.py shows the
bridge calling close() only after the last byte is sent)."""

from __future__ import annotations

import logging

import pytest
from django.core.signals import request_finished
from django.db import close_old_connections
from rest_framework.test import APIRequestFactory

from api.responses import ResponseThenWork
from brain.apis.memory import MemoryApi
from brain.models import QueryLog, Thought


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """As Django's test client does around close(): the test's transaction must survive it."""
    request_finished.disconnect(close_old_connections)
    yield
    request_finished.connect(close_old_connections)


def test_work_runs_in_order_at_close_and_a_failure_is_logged_not_raised(caplog):
    ran, finished = [], []

    def fail():
        raise RuntimeError("database went away")

    response = ResponseThenWork({"ok": True}, after=[lambda: ran.append(1), fail, lambda: ran.append(3)])
    assert ran == []  # nothing before the server closes the response

    def on_finished(**kwargs):
        finished.append(True)

    request_finished.connect(on_finished)
    try:
        with caplog.at_level(logging.ERROR, logger="colony.api"):
            response.close()
            response.close()  # a second close runs nothing again
    finally:
        request_finished.disconnect(on_finished)
    assert ran == [1, 3]
    assert finished == [True, True]  # Django's own close (request_finished) still ran
    failures = [r for r in caplog.records if "after the response failed" in r.getMessage()]
    assert len(failures) == 1 and "database went away" in failures[0].exc_text


@pytest.mark.django_db
def test_a_memory_answer_is_complete_before_its_reinforcement_runs(dev, fake_embedder, thought_factory):
    thought = thought_factory("The deploy pipeline restarts web workers one by one.")
    request = APIRequestFactory().get(
        "/api/v1/memory",
        {"prompt": "deploy pipeline web workers", "contribute": "false"},
        HTTP_AUTHORIZATION=f"Bearer {dev.token}",
    )
    response = MemoryApi.as_view()(request)
    response.render()
    assert response.status_code == 200
    assert [s["thought_id"] for s in response.data["result"]["sources"]] == [str(thought.id)]
    # The query log is written before the answer (the workflow's memory gates read it) ...
    assert QueryLog.objects.filter(agent=dev.agent).count() == 1
    assert Thought.objects.get(pk=thought.pk).access_count == 0
    response.close()  # ... the reinforcement once the server has sent it
    reinforced = Thought.objects.get(pk=thought.pk)
    assert (reinforced.access_count, reinforced.accessed_by) == (1, [str(dev.agent.pk)])
