"""What a caller can do to the operator's side: the metrics, the logs, the settings a process starts with.

- ``/metrics`` keeps a handful of series per route whatever HTTP method a caller sends: each label value
  is a series (14 samples of a histogram) and, in multiprocess mode, an entry in every process's file.
- The address a request is counted and logged under is the one it came from, not a header the caller
  wrote: on a local install every client connects from 127.0.0.1.
- A secret in a setting (the Redis password in ``REDIS_URL``) is never printed or logged.
- A malformed setting stops the start with a message naming it, instead of a server that answers 500
  to every request or runs without the protection the setting was meant to give.
- The health check, which answers anyone, names no folder of the operator's machine.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]

#: Methods uvicorn's HTTP parser (llhttp) passes on to the application, beyond the usual seven.
UNUSUAL_METHODS = (
    "CONNECT TRACE COPY LOCK MKCOL MOVE PROPFIND PROPPATCH SEARCH UNLOCK BIND REBIND UNBIND ACL REPORT "
    "MKACTIVITY CHECKOUT MERGE M-SEARCH NOTIFY SUBSCRIBE UNSUBSCRIBE PURGE MKCALENDAR LINK UNLINK SOURCE QUERY"
).split()


def _metrics_text() -> str:
    response = Client().get("/metrics")  # from 127.0.0.1: METRICS_ALLOW_LOCALHOST
    assert response.status_code == 200, response.content[:300]
    return response.content.decode()


def _method_labels(text: str) -> set[str]:
    return set(re.findall(r'method="([^"]*)"', text))


# --- metrics: label cardinality a caller controls -------------------------------------------------------
@pytest.mark.django_db
def test_made_up_http_methods_do_not_add_series_to_the_metrics():
    """Attack: an anonymous caller sends 300 requests, each with a method of its own making (``X0000``,
    ``X0001``...; Django's runserver and other WSGI/ASGI servers pass any token on). Each became a new
    ``method`` label value of ``colony_http_request_duration_seconds``: 14 samples a method, ~1.5 KB of
    ``/metrics`` per request and ~5 KB of the process's multiprocess file, without bound. Instead the
    label is one of the methods Colony serves, or one bucket for every other."""
    before = len(_metrics_text())
    client = Client()
    for n in range(300):
        assert client.generic(f"X{n:04d}", "/api/v1/health").status_code == 405
    text = _metrics_text()
    made_up = {label for label in _method_labels(text) if re.fullmatch(r"X\d{4}", label)}
    assert not made_up, f"{len(made_up)} made-up methods became label values"
    assert len(text) - before < 20_000, f"/metrics grew by {len(text) - before:,} bytes"


class _Server:
    """uvicorn serving Colony's ASGI application on a free port, with the options ``runtime.serve`` gives
    it in production (its HTTP protocol, proxy headers, forwarded_allow_ips)."""

    def __init__(self, **overrides):
        import uvicorn

        from config.asgi import django_application, make_application
        from runtime.serve import HTTP_PROTOCOL, server_options

        options = server_options()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            make_application(django_application),
            host="127.0.0.1",
            port=self.port,
            lifespan="on",
            log_config=None,
            access_log=True,
            http=HTTP_PROTOCOL,
            proxy_headers=options["proxy_headers"],
            forwarded_allow_ips=options["forwarded_allow_ips"],
            **overrides,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)


def _raw_request(port: int, method: str, path: str) -> bytes:
    """The status line of one request written as bytes on a socket, its method exactly as given."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
        )
        answer = b""
        for _ in range(1000):  # bounded: the answer is a few KB, the server closes the connection
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    return answer.split(b"\r\n", 1)[0]


@pytest.mark.django_db(transaction=True)
def test_every_method_the_production_server_lets_through_is_one_bucket_in_the_metrics():
    """Attack: through the production server (uvicorn with httptools), an anonymous caller sends the
    28 WebDAV/RTSP-era methods its parser accepts (PROPFIND, MKCALENDAR, M-SEARCH...) to a route. Each
    reached Django (405) and became a label value: times the 184 routes, one caller with ~5,000
    requests adds ~5,000 histogram series (~70,000 samples, ~10 MB) to every scrape. Instead the methods
    Colony does not serve share one label value."""
    with _Server() as server:
        for method in UNUSUAL_METHODS:
            status = _raw_request(server.port, method, "/api/v1/health")
            assert status.startswith(b"HTTP/1.1 405"), (method, status)
    labelled = _method_labels(_metrics_text()) & set(UNUSUAL_METHODS)
    assert not labelled, f"{len(labelled)} unusual methods are label values: {sorted(labelled)[:8]}"


# --- the address a request comes from -------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_a_caller_on_this_host_cannot_pick_its_address_with_x_forwarded_for(settings, caplog, monkeypatch):
    """Attack: on an install run as documented (``make run``: ``runtime.serve`` on 127.0.0.1, no proxy),
    every client (a browser, every local agent) connects from 127.0.0.1, which ``FORWARDED_ALLOW_IPS``
    trusts by default. A local process that sprays passwords at /login/ with a new ``X-Forwarded-For``
    each time was never locked (8 failures at an address limit of 3: eight 200s; without the header the
    third is a 429), and the access log showed the address it chose (``203.0.113.0:0``). Instead a
    header from a client that is not a configured proxy is ignored: the lock counts 127.0.0.1 and the
    log says so (a proxy on this host is configured with ``FORWARDED_ALLOW_IPS=127.0.0.1``)."""
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    settings.AXES_FAILURE_LIMIT = 2
    settings.AXES_ADDRESS_FAILURE_LIMIT = 3
    caplog.set_level(logging.INFO, logger="uvicorn.access")
    codes = []
    with _Server() as server, httpx.Client(base_url=server.url, timeout=30) as client:
        for n in range(6):
            client.get("/login/")
            answer = client.post(
                "/login/",
                data={
                    "username": f"user-{n}",
                    "password": "Summer2024!",
                    "csrfmiddlewaretoken": client.cookies["csrftoken"],
                },
                headers={"X-Forwarded-For": f"203.0.113.{n}", "Referer": f"{server.url}/login/"},
            )
            codes.append(answer.status_code)
    assert codes[3:] == [429, 429, 429], codes
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "uvicorn.access")
    assert "203.0.113." not in logged


# --- secrets ----------------------------------------------------------------------------------------
REDIS_PASSWORD = "s3cret-redis-pass"  # noqa: S105 - a test value


@pytest.mark.django_db
@pytest.mark.parametrize("choice", ["redis", "filesystem"])
def test_the_redis_password_is_not_in_the_broker_description_nor_the_log(choice, tmp_path, caplog, monkeypatch):
    """Attack (a leak, not a caller's doing): ``REDIS_URL=redis://:PASSWORD@host:6379/0``, as a managed
    Redis is given. The broker description ``make run`` prints at every start (``broker: redis
    (redis://:PASSWORD@...)``, or ``filesystem (...; no Redis answered at redis://:PASSWORD@...)``) held
    it, and the health check logged it with every failed broker probe (an anonymous ``GET
    /api/v1/health`` while Redis is down: a WARNING every 5 s). Instead the URL is shown with its
    password masked."""
    from celery import current_app

    from config.celery import broker_settings
    from core import health

    url = f"redis://:{REDIS_PASSWORD}@127.0.0.1:1/0"  # port 1: nothing answers
    description = broker_settings(choice=choice, redis_url=url, data_dir=tmp_path)["colony_broker_description"]
    assert REDIS_PASSWORD not in description, description

    monkeypatch.setattr(current_app.conf, "broker_url", url)
    monkeypatch.setattr(current_app, "colony_broker_description", description, raising=False)
    monkeypatch.setattr(health, "_broker_seen", {})
    caplog.set_level(logging.WARNING, logger="colony.health")
    assert health.health_broker() is False
    assert "unreachable" in caplog.text
    assert REDIS_PASSWORD not in caplog.text


def test_a_malformed_redis_url_is_refused_without_printing_its_password():
    """Attack (a leak): a ``REDIS_URL`` with a typo in its port stops the start, rightly, but the message
    ``make run`` prints quoted the whole URL, password included. Instead it names what is wrong."""
    from config.env import ImproperSetting, check_redis_url

    with pytest.raises(ImproperSetting) as refused:
        check_redis_url(f"redis://:{REDIS_PASSWORD}@redis.internal:63a9/0")
    assert "port" in str(refused.value)
    assert REDIS_PASSWORD not in str(refused.value)


# --- settings read at the start ------------------------------------------------------------------------
def _check(**environment) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in environment} | environment
    return subprocess.run(  # noqa: S603 - fixed argv: this Python and manage.py
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("name", "value", "before"),
    [
        ("API_THROTTLE_RATE", "3000", "every authenticated API call answered 500 with a traceback logged"),
        ("API_THROTTLE_RATE", "1e3/min", "every authenticated API call answered 500 with a traceback logged"),
        ("API_THROTTLE_RATE", "0/min", "every authenticated API call answered 500 (division by zero)"),
        ("API_THROTTLE_RATE", "-5/min", "no token was throttled (a warning logged per request)"),
        ("AXES_COOLOFF_TIME", "-1", "no login was ever locked (25 failures, 25 answers 200)"),
        ("AXES_COOLOFF_TIME", "nan", "every failed login answered 500"),
        ("MAX_REQUEST_BODY_MB", "nan", "every import request failed in the body limit (int(nan))"),
        ("MAX_REQUEST_BODY_MB", "inf", "every import request failed in the body limit (int(inf))"),
    ],
)
def test_a_malformed_setting_stops_the_start_with_a_message_naming_it(name, value, before):
    """A value that can't mean what the setting says (a rate without a period, a negative or not-a-number
    duration or size) must stop ``manage.py`` (and so ``make run`` and every process) with a message
    naming the variable, as THROTTLE_CACHE and EMBEDDING_BACKEND do; otherwise the start succeeds and then
    ``before`` happens."""
    started = _check(**{name: value})
    assert started.returncode != 0, f"{name}={value} started; then {before}"
    assert name in started.stderr + started.stdout


# --- what the health check tells anyone -----------------------------------------------------------------
@pytest.mark.django_db
def test_the_health_check_names_no_folder_of_the_operators_machine(anon, settings):
    """Attack: an anonymous ``GET /api/v1/health``. With ``EMBEDDING_MODEL`` set to a model folder, as
    docs/configuration.md allows, the body's ``embedding_model`` and ``embedding.embedder`` were the
    full path (the operator's home folder and user name). Instead the model is named by its folder's
    name."""
    folder = "/home/ops-alice/private-models/minilm-finetuned-acme"
    settings.EMBEDDING_MODEL = folder
    response = anon.get("/api/v1/health")
    assert response.status_code in (200, 503)
    text = response.content.decode()
    assert "minilm-finetuned-acme" in text  # the model is still named
    assert "/home/ops-alice" not in text, text[:400]
