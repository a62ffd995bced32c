"""An error answer stays a few KB whatever the request held: an unknown-field error names a few fields
and says how many more there were, a list of thousands of bad items gets a few messages and a count, and
a long value is echoed cut short. Every envelope goes through ``api.errors.error_body``, which bounds it."""

from __future__ import annotations

import json

import pytest

from api.errors import ERROR_MAX_BYTES, error_body
from brain.models import QueryLog, Thought

pytestmark = pytest.mark.django_db

SMALL = 4096  # what the cases below must stay under


def refused(response) -> dict:
    assert response.status_code == 400, response.content[:400]
    assert len(response.content) < SMALL, len(response.content)
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR", error
    return error


def post(client, path: str, body) -> object:
    return client.post(path, json.dumps(body), content_type="application/json")


def test_twenty_thousand_unknown_keys_do_not_make_a_megabyte_error(dev, space):
    body = {"prompt": "What runs before the web workers restart?"}
    body |= {f"bogus_{n:05d}": 1 for n in range(20_000)}  # ~250 KB
    response = post(dev, "/api/v1/memory", body)
    error = refused(response)
    named = [name for name in error["fields"] if name.startswith("bogus_")]
    assert named == [f"bogus_{n:05d}" for n in range(5)]  # the first five, sorted
    assert "19995 more unknown fields" in error["message"] and "bogus_00004" in error["message"]
    assert "Allowed: " in error["message"] and "prompt" in error["message"]
    assert Thought.objects.filter(space=space).count() == 0 and QueryLog.objects.count() == 0


def test_unknown_keys_in_a_query_string_are_bounded_the_same_way(dev):
    params = {"prompt": "deploys", **{f"q{n:03d}": "1" for n in range(900)}}
    error = refused(dev.get("/api/v1/memory", params))
    assert [name for name in error["fields"] if name.startswith("q")] == ["q000", "q001", "q002", "q003", "q004"]
    assert "895 more unknown fields" in error["message"]


def test_more_query_parameters_than_django_reads_is_a_short_envelope_400(dev, anon):
    """Django refuses past DATA_UPLOAD_MAX_NUMBER_FIELDS (1000) parameters; under /api/ that is the
    envelope, for a stranger too, not the site's HTML 400 page."""
    query = "&".join(f"q{n}=1" for n in range(2000))
    for client in (dev, anon):
        error = refused(client.get(f"/api/v1/memory?prompt=deploys&{query}"))
        assert "DATA_UPLOAD_MAX_NUMBER_FIELDS" in error["message"]


def test_a_list_of_ten_thousand_bad_items_gets_a_few_messages_and_a_count(dev):
    error = refused(post(dev, "/api/v1/memory", {"prompt": "deploys", "tags": [1] * 10_000}))
    assert 1 <= len(error["fields"]) <= 10
    assert "tags" in next(iter(error["fields"]))
    assert error["omitted"]["fields"] >= 10_000 - 10
    assert error["message"].startswith("Invalid request (10000 fields: the first 10 below and 9990 more).")


def test_ten_thousand_bad_ids_in_a_turn_are_bounded_too(dev):
    turn = {"session_id": "s1", "turn_id": "t1", "user_prompt": "q", "assistant_response": "a"}
    error = refused(post(dev, "/api/v1/turns", {**turn, "used_ids": ["not-a-uuid"] * 10_000}))
    assert len(error["fields"]) <= 10 and error["omitted"]["fields"] > 0


def test_a_long_value_is_echoed_cut_short(dev):
    long_value = "x" * 200_000
    error = refused(post(dev, "/api/v1/memory", {"prompt": "deploys", "thought_category": long_value}))
    [message] = error["fields"]["thought_category"]
    assert "xxxxxxxxxx" in message and long_value[:1000] not in response_text(error)
    assert "is not one of" in message and "decision_record" in message  # the choices survive the cut


def test_a_long_unknown_key_is_named_cut_short(dev):
    key = "k" * 200_000
    error = refused(post(dev, "/api/v1/memory", {"prompt": "deploys", key: 1}))
    [name] = error["fields"]
    assert name.startswith("kkkk") and len(name) <= 101


def test_twenty_thousand_nul_keys_are_bounded(dev):
    body = {"prompt": "deploys", "context_metadata": {f"k{n}\x00": 1 for n in range(20_000)}}
    response = post(dev, "/api/v1/memory", body)
    error = refused(response)
    assert len(error["fields"]) <= 10 and error["omitted"]["fields"] > 0


def test_an_import_line_with_twenty_thousand_unknown_keys_gets_a_short_error(dev, space):
    item = {"content": "The deploy pipeline runs migrations first."} | {f"bogus_{n:05d}": 1 for n in range(20_000)}
    response = post(dev, "/api/v1/thoughts/import", [item])
    assert response.status_code == 400, response.content[:300]
    assert len(response.content) < SMALL, len(response.content)
    error = response.json()["error"]
    assert error["code"] == "IMPORT_INVALID" and error["lines"][0]["line"] == 1
    message = error["lines"][0]["message"]  # built from the first few keys only, not 20,000 hints
    assert "bogus_00000, bogus_00001" in message and "and 19995 more" in message and "bogus_00005" not in message
    assert Thought.objects.filter(space=space).count() == 0


def test_a_batch_of_bad_import_lines_lists_a_few_and_counts_them_all(dev, space):
    items = [{"content": "x", "bogus": "y" * 2000} for _ in range(500)]
    response = post(dev, "/api/v1/thoughts/import", items)
    assert response.status_code == 400 and len(response.content) < ERROR_MAX_BYTES, len(response.content)
    error = response.json()["error"]
    assert error["error_count"] == 500 and 1 <= len(error["lines"]) <= 10
    assert error["omitted"]["lines"] > 0


def test_every_envelope_is_bounded_whatever_its_caller_put_in_it():
    body = error_body(
        "X",
        "m" * 100_000,
        fields={f"f{n}": ["é" * 5000] * 50 for n in range(1000)},
        ids=list(range(100_000)),
        nested={"a": [{"b": "c" * 100_000}] * 1000},
        count=7,
    )
    assert len(json.dumps(body, ensure_ascii=False).encode()) <= ERROR_MAX_BYTES
    assert body["error"]["code"] == "X" and body["error"]["message"].startswith("mmm")
    assert body["error"]["count"] == 7


def response_text(error: dict) -> str:
    return json.dumps(error)
