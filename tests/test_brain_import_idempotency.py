"""POST /api/v1/thoughts/import with Idempotency-Key: a retried batch is stored once
(brain.services.receipts)."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from brain.jobs import import_receipts_expire
from brain.models import ImportReceipt, Thought
from tests.concurrency_support import run_concurrently
from tests.conftest import fake_vector

URL = "/api/v1/thoughts/import"
pytestmark = pytest.mark.django_db

NOTES = [{"content": "Deploys run migrations first."}, {"content": "ok"}]  # no ids: new ones each time


def post(client, items, key=None, *, jsonl=False):
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    if jsonl:
        body = "\n".join(json.dumps(i) for i in items)
        return client.post(URL, data=body, content_type="application/x-ndjson", **headers)
    return client.post(URL, data=json.dumps(items), content_type="application/json", **headers)


def test_without_a_key_a_resent_batch_is_stored_twice(dev, space, fake_embedder):
    """What the key is for: the server can't tell a retry from a new batch."""
    assert post(dev, NOTES).status_code == 201
    assert post(dev, NOTES).status_code == 201
    assert Thought.objects.filter(space=space).count() == 4
    assert not ImportReceipt.objects.exists()


def test_a_resent_batch_with_its_key_gets_the_first_answer_and_stores_nothing(dev, space, fake_embedder):
    first = post(dev, NOTES, "batch-1")
    assert first.status_code == 201, first.json()
    assert first.get("Idempotent-Replayed") is None
    again = post(dev, NOTES, "batch-1")
    assert again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()  # the same ids, counts and seconds
    assert set(Thought.objects.filter(space=space).values_list("id", flat=True).iterator()) == {
        uuid.UUID(i) for i in first.json()["ids"]
    }
    assert len(fake_embedder) == 2  # embedded once
    assert post(dev, NOTES, "batch-2").status_code == 201  # a new key is a new batch
    assert Thought.objects.filter(space=space).count() == 4


def test_the_same_key_with_another_batch_is_refused_and_changes_nothing(dev, space, fake_embedder):
    assert post(dev, NOTES, "k").status_code == 201
    response = post(dev, [{"content": "Another note."}], "k")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert "'k' was used at" in error["message"] and "new key" in error["message"]
    # The same items as JSONL are another body too: a key names the bytes sent, not their meaning.
    assert post(dev, NOTES, "k", jsonl=True).status_code == 409
    assert Thought.objects.filter(space=space).count() == 2


def test_a_refused_batch_leaves_its_key_free(dev, space, fake_embedder):
    bad = post(dev, [{"content": "fine"}, {"content": ""}], "retry-me")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "IMPORT_INVALID"
    assert not ImportReceipt.objects.exists()
    good = post(dev, NOTES, "retry-me")  # the fixed batch, same key
    assert good.status_code == 201 and good.get("Idempotent-Replayed") is None
    assert Thought.objects.filter(space=space).count() == 2


def test_keys_are_per_space(dev, agent_factory, other_space, space, fake_embedder):
    stranger = agent_factory("dev", in_space=other_space)
    assert post(dev, NOTES, "shared-key").status_code == 201
    response = post(stranger, NOTES, "shared-key")
    assert response.status_code == 201 and response.get("Idempotent-Replayed") is None
    assert Thought.objects.filter(space=other_space).count() == 2  # imported, not answered from dev's receipt
    assert post(stranger, [{"content": "x"}], "shared-key").status_code == 409


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "two words"])
def test_a_key_that_cant_be_one_is_a_400_and_stores_nothing(dev, space, fake_embedder, key):
    response = post(dev, NOTES, key)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and "Idempotency-Key must be 1 to 255" in error["message"]
    assert not Thought.objects.exists() and not ImportReceipt.objects.exists()


def test_an_expired_receipt_answers_no_more_and_the_hourly_job_removes_it(dev, space, fake_embedder, settings):
    settings.IMPORT_RECEIPT_HOURS = 24
    assert post(dev, NOTES, "old").status_code == 201
    assert post(dev, NOTES, "fresh").status_code == 201
    ImportReceipt.objects.filter(key="old").update(created_at=timezone.now() - dt.timedelta(hours=25))
    again = post(dev, NOTES, "old")  # the receipt is past its hours: a new batch
    assert again.status_code == 201 and again.get("Idempotent-Replayed") is None
    assert Thought.objects.filter(space=space).count() == 6
    ImportReceipt.objects.filter(key="old").update(created_at=timezone.now() - dt.timedelta(hours=25))
    assert import_receipts_expire() == 1
    assert list(ImportReceipt.objects.values_list("key", flat=True)) == ["fresh"]


def test_the_receipt_sweep_is_scheduled_hourly():
    from config.celery import PERIODIC_JOBS

    entry = PERIODIC_JOBS["import-receipts-expire"]
    assert entry["task"] == import_receipts_expire.name
    assert len(entry["schedule"].hour) == 24 and len(entry["schedule"].minute) == 1


@pytest.mark.django_db(transaction=True)
def test_two_requests_with_one_key_at_once_store_the_batch_once(dev, space, monkeypatch):
    """The others wait on the first one's uncommitted receipt (its embedding takes a while here), then
    are answered from it."""
    from brain import embedding

    calls: list[str] = []

    def slow_embed_many(texts, *, batch_size=64):
        calls.extend(texts)
        time.sleep(0.5)
        return [fake_vector(text) for text in texts]

    monkeypatch.setattr(embedding, "embed_many", slow_embed_many)

    def send():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {dev.token}")
        return post(client, NOTES, "same-time")

    results = run_concurrently([send] * 4)
    assert all(not isinstance(r, Exception) and r.status_code == 201 for r in results), results
    assert len({json.dumps(r.json()["ids"]) for r in results}) == 1
    assert sorted(r.get("Idempotent-Replayed") is not None for r in results) == [False, True, True, True]
    assert Thought.objects.filter(space=space).count() == 2
    assert len(calls) == 2  # embedded once
