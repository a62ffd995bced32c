"""The embedded PostgreSQL: init once, start, stop, and a second start that keeps the data."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest
from django.conf import settings


def run(args, data_dir):
    env = {"COLONY_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "core.embedded_db", *args],
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
