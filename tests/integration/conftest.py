"""Real Celery workers for integration tests.

``start_worker(broker=...)`` starts ``celery -A config worker`` as a separate process against the
test database, on Redis or on the filesystem broker, and returns a Celery app that sends to it.
Tests using it need ``django_db(transaction=True)`` so the worker sees committed rows.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from celery import Celery
from django.conf import settings
from django.db import connection

from config.celery import broker_settings, redis_answers

BASE_DIR = Path(settings.BASE_DIR)


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
        return self.app.send_task(name, args=args, kwargs=kwargs)

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


@pytest.fixture
def start_worker(tmp_path):
    handles: list[WorkerHandle] = []

    def start(*, broker: str, extra_env: dict | None = None) -> WorkerHandle:
        if broker == "redis" and not redis_answers(settings.REDIS_URL):
            pytest.fail(f"Redis does not answer at {settings.REDIS_URL}; start it (see README) to run this test.")
        data_dir = tmp_path / f"colony-{broker}"
        data_dir.mkdir()
        conf = broker_settings(choice=broker, redis_url=settings.REDIS_URL, data_dir=data_dir)
        # Not the current app: shared tasks of later unit tests must keep using the eager Colony app.
        app = Celery("colony-test-client", set_as_current=False)
        app.conf.update({k: v for k, v in conf.items() if not k.startswith("colony_")})
        app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
        queue = f"test-{broker}-{os.getpid()}-{time.monotonic_ns()}"
        app.conf.task_default_queue = queue
        env = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "COLONY_BROKER": broker,
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
    for handle in handles:
        handle.process.terminate()
        try:
            handle.process.wait(20)
        except subprocess.TimeoutExpired:
            handle.process.kill()
            handle.process.wait()
