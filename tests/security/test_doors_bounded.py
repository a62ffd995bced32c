"""Doors an anonymous or a steered caller can push on stay bounded (SPEC 6: "bound every number and
string", "bounded work before authentication", "failed logins throttled").

- Login spraying: one address trying a password or two against many usernames is locked once it has
  AXES_ADDRESS_FAILURE_LIMIT failures across usernames, while one username from one address is still
  locked after AXES_FAILURE_LIMIT (5).
- ``GET /api/v1/health`` with the broker down: anonymous callers share one broker probe every few
  seconds instead of each waiting out its own.
- ``POST /api/v1/thoughts/import`` and the operator's restore: ``context_metadata`` and
  ``co_retrieved_with`` are bounded like the API's other fields, and ``contradicted_by`` names a
  correction of the imported space or the batch is refused (400 envelope, nothing stored)."""

from __future__ import annotations

import functools
import socket
import threading
import time
import uuid

import pytest
from django.contrib.auth.models import User

from brain.choices import ThoughtCategory
from brain.models import Thought
from tests.security.support import import_post as _post
from tests.security.support import import_refusal
from tests.security.support import login as _login

pytestmark = pytest.mark.django_db

PASSWORD = "right-horse-battery"  # noqa: S105 - a test password


# --- login spraying ------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """MD5 instead of PBKDF2 (Django hashes a dummy password for an unknown username too): the lock
    counts failures, not hashing time, and a spray test makes dozens."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_one_address_spraying_many_usernames_is_locked(client, settings, path):
    """Attack: one address tries one password against every username it can think of (a spray): the
    per-(username, address) lock never fires, since no username gets more than one guess.

    Rule: an address with AXES_ADDRESS_FAILURE_LIMIT failures across usernames is refused (429, the
    lockout page), the right password of a real user too, until the cool-off; another address is not."""
    User.objects.create_user("ada", password=PASSWORD, is_staff=True, is_superuser=True)
    limit = settings.AXES_ADDRESS_FAILURE_LIMIT
    assert settings.AXES_FAILURE_LIMIT < limit <= 100
    answers = [_login(client, path, f"user-{n}", "Summer2024!") for n in range(limit + 5)]
    assert all(a.status_code == 200 for a in answers[: limit - 1]), [a.status_code for a in answers]
    refused = answers[limit:]
    assert all(a.status_code == 429 for a in refused), [a.status_code for a in answers]
    text = refused[-1].content.decode()
    assert "Too many failed logins from your address" in text and "Traceback" not in text
    # The right password of a real user is refused from that address too, until the cool-off.
    right = _login(client, path, "ada", PASSWORD)
    assert right.status_code == 429 and "_auth_user_id" not in client.session
    # Another address is not affected.
    other = _login(client, path, "ada", PASSWORD, REMOTE_ADDR="10.1.2.3")
    assert other.status_code == 302 and "_auth_user_id" in client.session


def test_a_forwarded_for_header_does_not_make_a_sprayer_a_new_address(client, settings):
    """Attack: the sprayer sends another X-Forwarded-For with every guess to look like many addresses.
    Rule: the lock counts the address the request came from (uvicorn rewrites it only for the proxies
    in FORWARDED_ALLOW_IPS), not a header the client writes."""
    limit = settings.AXES_ADDRESS_FAILURE_LIMIT
    answers = [
        _login(client, "/login/", f"user-{n}", "Summer2024!", HTTP_X_FORWARDED_FOR=f"203.0.113.{n % 250}")
        for n in range(limit + 2)
    ]
    assert [a.status_code for a in answers[limit:]] == [429, 429]


def test_the_per_username_lock_still_fires_at_its_own_limit(client, settings):
    """The address-wide limit is higher; one username from one address is still locked after
    AXES_FAILURE_LIMIT failures, and a successful login of another user from there still works."""
    User.objects.create_user("ada", password=PASSWORD)
    User.objects.create_user("bob", password=PASSWORD)
    limit = settings.AXES_FAILURE_LIMIT
    assert limit == 5
    answers = [_login(client, "/login/", "ada", f"guess-{n}") for n in range(limit + 3)]
    assert [a.status_code for a in answers] == [200] * (limit - 1) + [429] * 4
    assert "for this username from your address" in answers[-1].content.decode()
    assert _login(client, "/login/", "bob", PASSWORD).status_code == 302


def test_a_successful_login_does_not_reset_the_address_count(client, settings):
    """Attack: the sprayer holds one account of its own and logs in with it between rounds, hoping the
    success wipes its failures. Rule: a success resets that username's count from that address only."""
    User.objects.create_user("mallory", password=PASSWORD)
    limit = settings.AXES_ADDRESS_FAILURE_LIMIT
    codes = []
    for n in range(limit + 2):
        codes.append(_login(client, "/login/", f"user-{n}", "Summer2024!").status_code)
        if n % 3 == 2:
            _login(client, "/login/", "mallory", PASSWORD)
            client.logout()
    assert codes[limit:] == [429, 429], codes


# --- health before authentication -----------------------------------------------------------------------
@pytest.fixture
def broker_down(monkeypatch):
    """Celery's broker pointed at a closed port of 127.0.0.1 (the app's conf: Celery reads the Django
    settings once, when it starts); returns the list of broker connections tried, one item each."""
    from celery import current_app

    app = current_app._get_current_object()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert app.conf.get("broker_write_url") is None  # connections for writing follow broker_url
    monkeypatch.setitem(app.conf, "broker_url", f"redis://127.0.0.1:{port}/0")
    probes = []
    connect = type(app).connection_for_write

    def counted(self, *args, **kwargs):
        probes.append(time.monotonic())
        time.sleep(0.05)  # a slow broker: concurrent callers arrive while the probe runs
        return connect(self, *args, **kwargs)

    monkeypatch.setattr(type(app), "connection_for_write", counted)
    return probes


def test_anonymous_health_calls_share_one_broker_probe_while_the_broker_is_down(anon, broker_down):
    """Attack: while the broker is down, every anonymous GET /api/v1/health held a request thread for
    the broker's 1 s timeout: a few callers in a loop kept every thread waiting.

    Rule: the broker's answer is kept for a few seconds, so calls in a row wait for one probe at most,
    and the body still says the broker is down."""
    answers = [anon.get("/api/v1/health") for _ in range(6)]
    for answer in answers:
        assert answer.status_code == 503
        body = answer.json()
        assert body["status"] == "error" and body["broker"] is False and body["database"] is True
    assert len(broker_down) == 1, f"{len(broker_down)} broker probes for {len(answers)} calls"


def test_concurrent_health_checks_wait_for_one_probe(db, broker_down):
    from core import health

    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(health.health_broker())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [False] * 8
    assert len(broker_down) == 1, f"{len(broker_down)} broker probes for 8 concurrent checks"


# --- import bounds ---------------------------------------------------------------------------------------
_refused = functools.partial(import_refusal, nothing_stored=True)  # the message also says nothing was stored


@pytest.mark.parametrize(
    "metadata",
    [
        {"notes": "x" * 40_000},
        {f"key-{n}": n for n in range(5_000)},
        {"a": [[[[{"b": ["y" * 300] * 100}]]]]},
    ],
    ids=["long-string", "many-keys", "nested-bulk"],
)
def test_import_bounds_context_metadata(dev, space, fake_embedder, metadata):
    """Attack: each of 1,000 imported thoughts carries ~60 KB of metadata (bounded by the body alone),
    which every export, admin page and reader of the thought then carries. Rule: at most
    CONTEXT_METADATA_MAX_CHARS characters of JSON, as a task's DNA is bounded by its JSON's size."""
    message = _refused(_post(dev, [{"content": "a note", "context_metadata": metadata}]), "context_metadata")
    assert "characters of JSON" in message
    assert not Thought.objects.filter(space=space).exists()


def test_import_keeps_metadata_of_a_contribution(dev, space, fake_embedder):
    metadata = {"session_id": "s" * 100, "context": "c" * 2000, "claimed_agent_name": "n" * 200}
    response = _post(dev, [{"content": "a note", "context_metadata": metadata}])
    assert response.status_code == 201, response.content[:500]
    stored = Thought.objects.get(space=space).context_metadata
    assert {k: stored[k] for k in metadata} == metadata


@pytest.mark.parametrize(
    "co_retrieved",
    [{"x" * 50_000: 1}, {"not a thought id": 3}, [{"thought_id": "z" * 20_000, "count": 1}]],
    ids=["long-key", "free-text-key", "seed-shape-long-id"],
)
def test_import_co_retrieved_partners_are_thought_ids(dev, space, fake_embedder, co_retrieved):
    """Attack: up to 50 partners each keyed by an arbitrarily long string (bounded by the body only).
    Rule: a partner is a thought id (a UUID), as every other reference of an import is."""
    message = _refused(_post(dev, [{"content": "a note", "co_retrieved_with": co_retrieved}]), "co_retrieved_with")
    assert "thought id" in message
    assert not Thought.objects.filter(space=space).exists()


def test_import_keeps_co_retrieved_partners_given_as_ids(dev, space, fake_embedder):
    partner = str(uuid.uuid4())
    response = _post(dev, [{"content": "a note", "co_retrieved_with": {partner: 3}}])
    assert response.status_code == 201, response.content[:500]
    assert Thought.objects.get(space=space).co_retrieved_with == {partner: 3}


def _correction(thought_factory, **kw):
    return thought_factory(
        "CORRECTION: the deploy runs at 02:00 UTC.",
        thought_category=ThoughtCategory.CORRECTION,
        corrected_fact="the deploy runs at midnight",
        correct_fact="the deploy runs at 02:00 UTC",
        **kw,
    )


def test_import_contradicted_by_must_name_a_correction_not_a_marker(dev, space, thought_factory, fake_embedder):
    """Attack: an import flags its thought as contradicting a transition marker (or any ordinary
    thought), so the thought page and the flag's cleanup point at the audit trail. Rule:
    ``contradicted_by`` names a correction (the one whose corrected fact the thought repeats)."""
    marker = thought_factory("task t-1: dev -> review", thought_category=ThoughtCategory.TRANSITION_MARKER)
    plain = thought_factory("the deploy runs at midnight")
    before = Thought.objects.count()
    for target in (marker, plain):
        message = _refused(
            _post(dev, [{"content": "a note", "contradicted_by": str(target.pk)}]),
            "contradicted_by",
        )
        assert "not a correction" in message
    assert Thought.objects.count() == before


def test_import_contradicted_by_in_another_space_is_unknown(dev, other_space, thought_factory, fake_embedder):
    foreign = _correction(thought_factory, in_space=other_space)
    before = Thought.objects.count()
    message = _refused(_post(dev, [{"content": "a note", "contradicted_by": str(foreign.pk)}]), "contradicted_by")
    assert "no thought" in message
    assert Thought.objects.count() == before


def test_import_contradicted_by_a_correction_is_kept(dev, space, thought_factory, fake_embedder):
    correction = _correction(thought_factory)
    batch_correction = {
        "id": str(uuid.uuid4()),
        "content": "CORRECTION: backups run hourly.",
        "thought_category": "correction",
        "corrected_fact": "backups run daily",
        "correct_fact": "backups run hourly",
    }
    response = _post(
        dev,
        [
            {"content": "the deploy runs at midnight", "contradicted_by": str(correction.pk)},
            batch_correction,
            {"content": "backups run daily", "contradicted_by": batch_correction["id"]},
        ],
    )
    assert response.status_code == 201, response.content[:500]
    ids = response.json()["ids"]
    assert Thought.objects.get(pk=ids[0]).contradicted_by_id == correction.pk
    assert str(Thought.objects.get(pk=ids[2]).contradicted_by_id) == ids[1]


def test_the_operator_restore_refuses_contradicted_by_a_marker(space, thought_factory, fake_embedder):
    from brain.transfer.services import ImportInvalid, ImportMode, thoughts_import

    marker = thought_factory("task t-1: dev -> review", thought_category=ThoughtCategory.TRANSITION_MARKER)
    before = Thought.objects.count()
    with pytest.raises(ImportInvalid) as refused:
        thoughts_import(
            space=space,
            agent=None,
            items=[{"content": "a note", "contradicted_by": str(marker.pk)}],
            mode=ImportMode.OPERATOR,
        )
    [line] = refused.value.extra["lines"]
    assert line["field"] == "contradicted_by" and "not a correction" in line["message"]
    assert Thought.objects.count() == before


def test_a_deferred_contradicted_by_is_applied_only_when_it_names_a_correction(space, thought_factory):
    """The operator's multi-batch restore applies references to later batches at the end
    (``thoughts_import_links``): there too a ``contradicted_by`` naming no correction is left out, and said."""
    from brain.transfer.services import thoughts_import_links

    marker = thought_factory("task t-1: dev -> review", thought_category=ThoughtCategory.TRANSITION_MARKER)
    correction = _correction(thought_factory)
    first, second = thought_factory("the deploy runs at midnight"), thought_factory("deploys at midnight, again")
    dangling = thoughts_import_links(
        space=space,
        links=[
            (str(first.pk), "contradicted_by", str(marker.pk)),
            (str(second.pk), "contradicted_by", str(correction.pk)),
        ],
    )
    assert len(dangling) == 1 and str(marker.pk) in dangling[0] and "not a correction" in dangling[0]
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.contradicted_by_id is None and second.contradicted_by_id == correction.pk
