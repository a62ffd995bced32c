"""The embedded PostgreSQL: init once, start, stop, and a second start that keeps the data."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import psycopg
import pytest
from django.conf import settings


def run(args, data_dir):
    env = {"COLONY_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "runtime.embedded_db", *args],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.integration
def test_second_start_reuses_the_data(tmp_path):
    data_dir = tmp_path / "colony"
    try:
        first = run(["start"], data_dir)
        assert first.returncode == 0, first.stderr
        url = first.stdout.strip().splitlines()[-1]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("CREATE TABLE kept (v vector(3))")
            conn.execute("INSERT INTO kept VALUES ('[1,2,3]')")
        assert run(["stop"], data_dir).stdout.strip() == "stopped"
        assert "not running" in run(["status"], data_dir).stdout
        second = run(["start"], data_dir)
        assert second.returncode == 0, second.stderr
        with psycopg.connect(second.stdout.strip().splitlines()[-1]) as conn:
            assert conn.execute("SELECT v::text FROM kept").fetchone() == ("[1,2,3]",)
    finally:
        run(["stop"], data_dir)


INTERRUPTIBLE_START = """
import signal, sys

def interrupt(*_):
    raise KeyboardInterrupt  # as make run's runtime.run does with SIGTERM while it starts

signal.signal(signal.SIGTERM, interrupt)
from runtime import embedded_db

try:
    embedded_db.ensure_running()
except KeyboardInterrupt:
    sys.exit(130)
sys.exit(0)
"""


@pytest.mark.integration
def test_a_start_interrupted_while_the_server_starts_leaves_no_server_running():
    """An interrupt (Ctrl-C, SIGTERM to make run) while the start helper ran killed the helper, but the
    server it had set starting (pg_ctl, postgres) came up anyway, and nobody stopped it."""
    # Outside pytest's temp root (reset to 0700 by every pytest run): the server runs as another user.
    folder = Path(tempfile.mkdtemp(prefix="colony-interrupted-start-"))
    folder.chmod(0o755)
    data_dir = folder / "colony"
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", INTERRUPTIBLE_START],
            cwd=settings.BASE_DIR,
            env={"COLONY_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin"},
        )
        # Interrupt once the helper has set something of the server going (initdb or pg_ctl, its
        # children): the moment at which killing the helper no longer stops the start.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            helpers = [c for c in psutil.Process(process.pid).children() if "_start" in " ".join(c.cmdline())]
            if helpers and helpers[0].children():
                break
            time.sleep(0.002)
        assert process.poll() is None, "the start ended before it could be interrupted"
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 130
        assert "not running" in run(["status"], data_dir).stdout
        assert not [p for p in psutil.process_iter(["cmdline"]) if str(data_dir) in " ".join(p.info["cmdline"] or [])]
    finally:
        run(["stop"], data_dir)
        shutil.rmtree(folder, ignore_errors=True)
