"""Real Celery workers for integration tests.

``start_worker(broker=...)`` starts ``celery -A config worker`` as a separate process against the
test database, on Redis or on the filesystem broker, and returns a Celery app that sends to it.
Tests using it need ``django_db(transaction=True)`` so the worker sees committed rows.

The test run brings its own broker: a private ``redis-server`` (Debian's, which ``make test``
installs when missing) on a free 127.0.0.1 port for the session, with no persistence. The machine's
Redis and ``REDIS_URL`` are never used, so the tests pass on a machine with no Redis server running.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from celery import Celery
from django.conf import settings
from django.db import connection

from config.celery import app as colony_app
from config.celery import broker_settings, redis_answers

BASE_DIR = Path(settings.BASE_DIR)
REDIS_SERVER = os.environ.get("COLONY_REDIS_SERVER") or shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def private_redis(tmp_path_factory) -> str:
    """A redis-server of this test session on a free port; its URL. Stopped at the end of the session."""
    if not Path(REDIS_SERVER).exists():
        pytest.fail(
            f"No redis-server at {REDIS_SERVER}: run `make redis` (installs Debian's redis-server) "
            "or set COLONY_REDIS_SERVER."
        )
    workdir = tmp_path_factory.mktemp("redis")
    for _attempt in range(5):
        port = free_port()
        process = subprocess.Popen(
            [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
            + ["--dir", str(workdir), "--protected-mode", "yes", "--daemonize", "no"],
            stdout=(workdir / f"redis-{port}.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and process.poll() is None and not redis_answers(url):
            time.sleep(0.05)
        if process.poll() is None and redis_answers(url):
            break
        process.kill()
        process.wait()
    else:
        pytest.fail(f"redis-server did not start:\n{(workdir / f'redis-{port}.log').read_text()[-2000:]}")
    try:
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_database_url() -> str:
    db = connection.settings_dict
    host = db["HOST"]
    if host.startswith("/"):
        return f"postgresql://{db['USER']}:{db['PASSWORD']}@/{db['NAME']}?host={host}"
    return f"postgresql://{db['USER']}:{db['PASSWORD']}@{host}:{db['PORT'] or 5432}/{db['NAME']}"


class WorkerHandle:
    def __init__(self, process: subprocess.Popen, app: Celery, log: Path):
        self.process = process
        self.app = app
        self.log = log

    def send(self, name: str, *args, **kwargs):
        # Colony's jobs store no result (task_ignore_result); the tests read theirs.
        return self.app.send_task(name, args=args, kwargs=kwargs, ignore_result=False)

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


def _point_colony_app_at(conf: dict) -> None:
    """Colony's own Celery app (``job.delay()`` in the code under test) sends to the test's broker."""
    colony_app.conf.update(conf)
    colony_app._pool = None
    colony_app.amqp._producer_pool = None


@pytest.fixture
def start_worker(tmp_path, private_redis):
    handles: list[WorkerHandle] = []
    saved_conf: dict = {}

    def start(*, broker: str, extra_env: dict | None = None) -> WorkerHandle:
        data_dir = tmp_path / f"colony-{broker}"
        data_dir.mkdir()
        conf = broker_settings(choice=broker, redis_url=private_redis, data_dir=data_dir)
        # Not the current app: shared tasks of later unit tests must keep using the eager Colony app.
        app = Celery("colony-test-client", set_as_current=False)
        broker_conf = {k: v for k, v in conf.items() if not k.startswith("colony_")}
        app.conf.update(broker_conf)
        saved_conf.update({k: colony_app.conf.get(k) for k in broker_conf if k not in saved_conf})
        _point_colony_app_at(broker_conf)
        app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
        queue = f"test-{broker}-{os.getpid()}-{time.monotonic_ns()}"
        app.conf.task_default_queue = queue
        env = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "COLONY_BROKER": broker,
            "REDIS_URL": private_redis,
            "COLONY_DATA_DIR": str(data_dir),
            "SECRET_KEY": "integration-test",
            **(extra_env or {}),
        }
        log = tmp_path / f"worker-{broker}.log"
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                "1",
                "--pool",
                "solo",
                "-Q",
                queue,
                "--hostname",
                f"{queue}@%h",
                "--without-mingle",
                "--without-gossip",
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )
        handle = WorkerHandle(process, app, log)
        handles.append(handle)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"Celery worker exited with {process.returncode}:\n{handle.output()[-3000:]}")
            if "ready." in handle.output():
                return handle
            time.sleep(0.3)
        pytest.fail(f"Celery worker did not become ready in 90s:\n{handle.output()[-3000:]}")

    yield start
    if saved_conf:
        _point_colony_app_at(saved_conf)
    for handle in handles:
        handle.process.terminate()
        try:
            handle.process.wait(20)
        except subprocess.TimeoutExpired:
            handle.process.kill()
            handle.process.wait()
