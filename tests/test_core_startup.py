"""Bad settings stop start-up with one sentence that says what to fix, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings


def manage(*args, **env):
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("DATABASE_URL", "mysql://u:p@host/db", "DATABASE_URL must be a postgresql://"),
        ("DATABASE_URL", "postgresql://u:p@host:port/db", "DATABASE_URL has a port that is not a number"),
        ("DATABASE_URL", "postgresql:///db", "DATABASE_URL names no host"),
        ("REDIS_URL", "localhost:6379", "REDIS_URL must look like redis://"),
        ("REDIS_URL", "redis://:6379/0", "REDIS_URL 'redis://:6379/0' names no host"),
        ("COLONY_DATA_DIR", "/proc/colony-cannot-write-here", "COLONY_DATA_DIR='/proc/colony-cannot-write-here'"),
        ("DEBUG", "perhaps", "DEBUG='perhaps' is not a valid bool"),
        ("EMBEDDING_BATCH_THREADS", "-1", "EMBEDDING_BATCH_THREADS='-1' is out of range: it must be from 0 to 1024"),
        ("EMBEDDING_THREADS", "-2", "EMBEDDING_THREADS='-2' is out of range: it must be from 0 to 1024"),
    ],
)
def test_bad_setting_is_one_clear_sentence(variable, value, says):
    result = manage("check", **{variable: value})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert says in lines[0]
    assert "Traceback" not in result.stderr


def test_unwritable_data_dir_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    if os.access(locked, os.W_OK):  # root ignores permission bits
        target = "/proc/colony-data"
    else:
        target = str(locked / "data")
    result = manage("check", COLONY_DATA_DIR=target)
    assert result.returncode == 2
    assert "COLONY_DATA_DIR" in result.stderr and "Traceback" not in result.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_database_that_does_not_answer_is_one_sentence():
    result = manage("agent", "list", DATABASE_URL=f"postgresql://colony:x@127.0.0.1:{_free_port()}/colony")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("colony: could not connect to the database: connection failed")
    assert "Start it, or point DATABASE_URL at a running PostgreSQL" in lines[0]


@pytest.fixture
def empty_database_url():
    from runtime.databases import drop_database, ensure_database
    from runtime.embedded_db import running_url

    url = running_url("colony_startup_empty")
    ensure_database(url, fresh=True)
    try:
        yield url
    finally:
        drop_database(url)


@pytest.mark.parametrize(
    "command",
    [
        ("agent", "create", "my-dev", "--role", "dev"),  # the README's first step after install
        ("task", "list"),
        ("brain", "export", "/tmp/colony-never-written.jsonl"),
    ],
)
def test_a_command_before_the_first_migration_says_to_run_make_run(empty_database_url, command):
    result = manage(*command, DATABASE_URL=empty_database_url)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("colony: the database has no Colony tables yet (relation ")
    assert "Run `make run` once" in lines[0] and "python manage.py migrate" in lines[0]
