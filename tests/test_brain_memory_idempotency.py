"""POST /api/v1/memory and POST /api/v1/thoughts/{id}/correct with Idempotency-Key: a contribution or a
correction retried after a lost response is stored once (brain.services.receipts, shared with the import)."""

from __future__ import annotations

import json
import time

import pytest
from rest_framework.test import APIClient

from brain.models import ImportReceipt, QueryLog, Thought
from tests.concurrency_support import run_concurrently
from tests.conftest import fake_vector

URL = "/api/v1/memory"
pytestmark = pytest.mark.django_db

NOTE = {"prompt": "Deploys run the database migrations before the web workers restart, never after."}


def post(client, fields, key=None):
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    return client.post(URL, data=json.dumps(fields), content_type="application/json", **headers)


def test_without_a_key_a_resent_contribution_is_answered_as_already_known(dev, space, fake_embedder):
    """The server can't tell a retry from a second contribution; either way the same text is one row."""
    first = post(dev, NOTE).json()
    again = post(dev, NOTE).json()
    assert Thought.objects.filter(space=space).count() == 1
    assert again["trace"]["already_known"] is True and again["trace"]["thought_id"] == first["trace"]["thought_id"]


def test_a_resent_contribution_with_its_key_gets_the_first_answer_and_stores_nothing(dev, space, fake_embedder):
    first = post(dev, NOTE, "note-1")
    assert first.status_code == 200, first.json()
    assert first.get("Idempotent-Replayed") is None
    thought_id = first.json()["trace"]["thought_id"]
    assert thought_id is not None
    again = post(dev, {**dict(reversed(NOTE.items()))}, "note-1")  # the same fields, serialised again
    assert again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()  # the same thought id and session
    assert [str(t) for t in Thought.objects.filter(space=space).values_list("id", flat=True)] == [thought_id]
    assert QueryLog.objects.filter(space=space).count() == 1  # logged once
    fresh = post(dev, NOTE, "note-2").json()["trace"]  # a new key is a new call: the same text is known already
    assert (fresh["already_known"], fresh["thought_id"]) == (True, thought_id)
    assert QueryLog.objects.filter(space=space).count() == 2


def test_the_same_key_with_other_fields_or_from_an_import_is_refused_and_changes_nothing(dev, space, fake_embedder):
    assert post(dev, NOTE, "k").status_code == 200
    response = post(dev, {**NOTE, "topic": "deploys"}, "k")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "IDEMPOTENCY_KEY_REUSED" and "'k' was used at" in error["message"]
    imported = dev.post(
        "/api/v1/thoughts/import",
        data=json.dumps([{"content": "x"}]),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="k",
    )
    assert imported.status_code == 409
    assert post(dev, {"prompt": NOTE["prompt"], "contribute": False}, "k").status_code == 409
    assert Thought.objects.filter(space=space).count() == 1


def test_a_refused_call_leaves_its_key_free(dev, space, fake_embedder):
    bad = post(dev, {**NOTE, "thought_category": "decision_record"}, "retry-me")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "MISSING_CATEGORY_FIELDS"
    assert not ImportReceipt.objects.exists()
    good = post(dev, NOTE, "retry-me")  # the fixed call, same key
    assert good.status_code == 200 and good.get("Idempotent-Replayed") is None
    assert Thought.objects.filter(space=space).count() == 1


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "ключ"])
def test_a_key_that_cant_be_one_is_a_400_and_stores_nothing(dev, space, fake_embedder, key):
    response = post(dev, NOTE, key)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()["error"]["message"]
    assert not Thought.objects.exists() and not QueryLog.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_calls_with_one_key_at_once_store_the_thought_once(dev, space, monkeypatch):
    """The others wait on the first one's uncommitted receipt (its embedding takes a while here), then
    are answered from it."""
    from brain import embedding

    calls: list[str] = []

    def slow_embed(text):
        calls.append(text)
        time.sleep(0.3)
        return fake_vector(text)

    monkeypatch.setattr(embedding, "embed", slow_embed)

    def send():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {dev.token}")
        return post(client, NOTE, "same-time")

    results = run_concurrently([send] * 4)
    assert all(not isinstance(r, Exception) and r.status_code == 200 for r in results), results
    assert len({r.json()["trace"]["thought_id"] for r in results}) == 1
    assert sorted(r.get("Idempotent-Replayed") is not None for r in results) == [False, True, True, True]
    assert Thought.objects.filter(space=space).count() == 1
    assert len(calls) == 1  # embedded once


def test_a_resent_correction_with_its_key_stores_one_correction(dev, space, fake_embedder):
    """Without a key a retried correction stored a second correction of the same thought."""
    wrong = post(dev, {"prompt": "The staging database password rotates every 30 days, on Mondays."}).json()
    url = f"/api/v1/thoughts/{wrong['trace']['thought_id']}/correct"
    fix = {"correct_fact": "It rotates every 60 days."}

    def correct(fields, key):
        return dev.post(url, data=json.dumps(fields), content_type="application/json", HTTP_IDEMPOTENCY_KEY=key)

    first = correct(fix, "fix-1")
    assert first.status_code == 201, first.json()
    again = correct(fix, "fix-1")
    assert (again.status_code, again["Idempotent-Replayed"]) == (201, "true")
    assert again.json() == first.json()
    assert Thought.objects.filter(space=space, thought_category="correction").count() == 1
    other = correct({"correct_fact": "It rotates every 90 days."}, "fix-1")
    assert other.status_code == 409 and other.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert correct(fix, "bad key").status_code == 400
    assert Thought.objects.filter(space=space, thought_category="correction").count() == 1
