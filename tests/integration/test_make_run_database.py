"""`make run`'s embedded PostgreSQL comes back when it is killed: before, the supervisor restarted web,
worker and beat but nothing watched the database it had started, so after a `kill -9` (or the OOM
killer) every API call answered 503 until make run itself was restarted.

The whole of `python -m runtime.run` with its embedded defaults, in a data folder of its own.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.process_support import alive, stop
from tests.standalone import free_port

pytestmark = pytest.mark.integration

BASE_DIR = Path(__file__).resolve().parents[2]


def _wait_for(predicate, what: str, log: Path, run: subprocess.Popen, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if run.poll() is not None:
            pytest.fail(f"make run exited ({run.returncode}):\n{log.read_text()[-4000:]}")
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    pytest.fail(f"{what} did not happen in {timeout:.0f} s:\n{log.read_text()[-4000:]}")


def _postmaster_pid(data: Path) -> int | None:
    try:
        return int((data / "pgdata" / "postmaster.pid").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return None


def test_a_killed_embedded_database_is_restarted_and_the_api_recovers():
    # Outside pytest's temp root (reset to 0700 by every pytest run): as root the server runs as
    # another user, who must keep reaching its data.
    folder = Path(tempfile.mkdtemp(prefix="colony-run-db-"))
    folder.chmod(0o755)
    data, log = folder / "data", folder / "run.log"
    port = free_port()
    env = {**os.environ, "COLONY_DATA_DIR": str(data), "PORT": str(port), "WEB_WORKERS": "1"}
    env.update(COLONY_BROKER="filesystem", PYTHONUNBUFFERED="1", COLONY_ADMIN_PASSWORD="database-keeper-test")
    env.pop("DATABASE_URL", None)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"  # as make run's recipe sets it
    run = subprocess.Popen(
        [sys.executable, "-m", "runtime.run"], cwd=BASE_DIR, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        token = _wait_for(
            lambda: re.search(r"dev-agent \(role dev\) token, shown once: (\S+)", log.read_text()),
            "bootstrap",
            log,
            run,
        )[1]
        auth = {"Authorization": f"Bearer {token}"}

        def answers() -> bool:
            try:
                return httpx.get(f"{base}/api/v1/agents/me", headers=auth, timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        _wait_for(answers, "the API answering", log, run)
        first = _postmaster_pid(data)
        assert first is not None and alive(first)

        os.kill(first, signal.SIGKILL)
        _wait_for(
            lambda: f"embedded PostgreSQL (pid {first}) ended without being stopped" in log.read_text(),
            "the supervisor noticing the database's death",
            log,
            run,
            timeout=30,
        )
        _wait_for(lambda: "embedded PostgreSQL restarted" in log.read_text(), "the restart", log, run, timeout=60)
        second = _postmaster_pid(data)
        assert second not in (None, first) and alive(second)
        _wait_for(answers, "the API answering again", log, run, timeout=60)
        health = httpx.get(f"{base}/api/v1/health", timeout=5).json()
        assert health["database"] is True, health

        run.send_signal(signal.SIGTERM)
        assert run.wait(60) == 0, log.read_text()[-4000:]
        assert "[colony] stopping embedded PostgreSQL ..." in log.read_text()
        assert not alive(second), "make run left the restarted database running"
    finally:
        stop(run, 60)  # after a failure above: stop it as make run stops, then make sure
        # Each process the supervisor started leads a session of its own: a make run killed above
        # would have left them running (an earlier version of this test leaked its web servers so).
        for pid in map(int, re.findall(r"started \w+ \(pid (\d+)\)", log.read_text())):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        subprocess.run(
            [sys.executable, "-m", "runtime.embedded_db", "stop"],
            cwd=BASE_DIR,
            env={**os.environ, "COLONY_DATA_DIR": str(data)},
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(folder, ignore_errors=True)
