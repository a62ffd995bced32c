"""Per-token throttling: 429 in the envelope with Retry-After, per token, shared by every process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection

from core.throttling import DatabaseGcra, RedisGcra, TokenRateThrottle, throttle_key, throttle_store
from tests.conftest import synchronous_commit

ROOT = Path(__file__).resolve().parent.parent


def _forget(*clients) -> None:
    """Drop these tokens' throttle state (only theirs: on Redis the broker shares the database)."""
    for client in clients:
        throttle_store().forget(throttle_key(client.agent.tokens.get()))


def test_the_throttle_store_is_shared_by_processes():
    assert isinstance(throttle_store(), (RedisGcra, DatabaseGcra))  # never a per-process memory


def test_the_throttle_store_is_one_per_process_not_one_per_request():
    """Django's caches[...] are per asyncio context: under ASGI that was a new Redis connection per request."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        seen = set(pool.map(lambda _: id(throttle_store()), range(8)))
    assert seen == {id(throttle_store())}


def _stores():
    """Both stores: the database one always, Redis when the settings' Redis answers."""
    stores = [DatabaseGcra("colony-test-throttle")]
    if isinstance(throttle_store(), RedisGcra):
        stores.append(RedisGcra(django_settings.REDIS_URL, "colony-test-throttle"))
    return stores


@pytest.mark.django_db(transaction=True)
def test_each_store_allows_the_burst_then_one_per_interval():
    for store in _stores():
        key = f"burst-{type(store).__name__}"
        store.forget(key)
        try:
            waits = [store.hit(key, interval=20.0, tolerance=40.0) for _ in range(4)]  # 3/min
            assert waits[:3] == [0.0, 0.0, 0.0], type(store).__name__
            assert 19.0 < waits[3] <= 20.0, (type(store).__name__, waits)
        finally:
            store.forget(key)


@pytest.mark.django_db(transaction=True)
def test_the_database_store_commits_its_count_asynchronously_in_its_own_transaction_only():
    """A hit in its own transaction (a request's) doesn't wait for its WAL flush; inside a caller's
    transaction it leaves that transaction's commit alone. The counts are the same either way."""
    from django.db import transaction
    from django.test.utils import CaptureQueriesContext

    store = DatabaseGcra("colony-test-throttle")
    store.forget("commit")
    try:
        with CaptureQueriesContext(connection) as own:
            assert store.hit("commit", interval=20.0, tolerance=20.0) == 0.0
        assert "synchronous_commit" in own.captured_queries[0]["sql"]
        assert synchronous_commit() == "on"  # local to the hit's transaction, which has ended
        with transaction.atomic():
            with CaptureQueriesContext(connection) as inside:
                assert store.hit("commit", interval=20.0, tolerance=20.0) == 0.0
            assert not any("synchronous_commit" in query["sql"] for query in inside.captured_queries)
            assert synchronous_commit() == "on"
        assert 19.0 < store.hit("commit", interval=20.0, tolerance=20.0) <= 20.0  # both were counted
    finally:
        store.forget("commit")


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_of_one_token_are_counted_exactly():
    """8 threads x 10 requests against a limit of 25: exactly 25 allowed (DRF's read-then-write
    throttle could let more through when two requests read the same history)."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    for store in _stores():
        key = f"race-{type(store).__name__}"
        store.forget(key)

        def burst(_, store=store, key=key):
            try:
                return sum(store.hit(key, interval=3600.0, tolerance=3600.0 * 24) == 0.0 for _ in range(10))
            finally:
                connections.close_all()

        try:
            with ThreadPoolExecutor(8) as pool:
                allowed = sum(pool.map(burst, range(8)))
            assert allowed == 25, (type(store).__name__, allowed)
        finally:
            store.forget(key)


@pytest.mark.django_db
def test_over_the_rate_is_429_in_the_envelope_with_retry_after(settings, agent_factory, anon):
    settings.API_THROTTLE_RATE = "3/min"
    first, second = agent_factory("dev"), agent_factory("qa")
    _forget(first, second)
    try:
        assert [first.get("/api/v1/agents/me").status_code for _ in range(3)] == [200, 200, 200]
        refused = first.get("/api/v1/agents/me")
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "THROTTLED"
        assert 1 <= int(refused["Retry-After"]) <= 60
        assert refused.json()["error"]["retry_after"] == int(refused["Retry-After"])
        assert second.get("/api/v1/agents/me").status_code == 200  # per token
        assert anon.get("/api/v1/health").status_code in (200, 503)  # no token, not throttled
        settings.API_THROTTLE_RATE = "off"
        assert first.get("/api/v1/agents/me").status_code == 200
    finally:
        _forget(first, second)


def test_default_rate_is_above_the_soak():
    rate = TokenRateThrottle().parse_rate(django_settings.API_THROTTLE_RATE)
    per_second = rate[0] / rate[1]
    assert per_second >= 50  # one token may alone send the soak's whole rate


@pytest.mark.django_db(transaction=True)
def test_another_process_sees_the_same_counts(settings, agent_factory):
    settings.API_THROTTLE_RATE = "2/min"
    client = agent_factory("dev")
    _forget(client)
    try:
        assert [client.get("/api/v1/agents/me").status_code for _ in range(2)] == [200, 200]
        db = connection.settings_dict
        host = db["HOST"]
        url = f"postgresql://{db['USER']}:{db['PASSWORD']}@localhost:{db['PORT'] or 5432}/{db['NAME']}?host={host}"
        code = (
            "import django; django.setup(); from django.test import Client; "
            f"print(Client(HTTP_AUTHORIZATION='Bearer {client.token}').get('/api/v1/agents/me').status_code)"
        )
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "API_THROTTLE_RATE": "2/min",
            "DJANGO_SETTINGS_MODULE": "config.settings",
        }
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert out.stdout.strip().splitlines()[-1] == "429", out.stderr[-2000:]
    finally:
        _forget(client)
