"""`make run`'s shape survives its parts: the supervisor restarts a SIGKILLed worker and beat while
the web (uvicorn, several workers) keeps answering, and a SIGKILLed web master with new workers (the
old ones stopped, so the port is free); with PostgreSQL stopped the API answers 503
DATABASE_UNAVAILABLE with Retry-After at once, pages a readable 503, and both recover by themselves
when it is back.

Everything runs against a PostgreSQL of its own (the embedded wheel on a free TCP port in a temp
folder) that the test stops and starts: never the suite's database or anyone else's.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.process_support import group, stop
from tests.standalone import PgServer, free_port

pytestmark = pytest.mark.integration

BASE_DIR = Path(__file__).resolve().parents[2]
ADMIN_PASSWORD = "outage-test-password"


class Colony:
    def __init__(self, *, env: dict, log: Path, process: subprocess.Popen, pg: PgServer, port: int, token: str):
        self.env, self.log, self.process, self.pg, self.port, self.token = env, log, process, pg, port, token
        self.base = f"http://127.0.0.1:{port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def pids(self, name: str) -> list[int]:
        return [int(pid) for pid in re.findall(rf"started {name} \(pid (\d+)\)", self.output())]

    def wait_for(self, predicate, what: str, timeout: float = 120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the supervisor exited ({self.process.returncode}):\n{self.output()[-4000:]}")
            value = predicate()
            if value:
                return value
            time.sleep(0.3)
        pytest.fail(f"{what} did not happen in {timeout:.0f} s:\n{self.output()[-4000:]}")


def _manage(env: dict, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def colony(tmp_path_factory):
    folder = tmp_path_factory.mktemp("colony-run")
    # The database folder lives outside pytest's temp root: every pytest run resets that root to
    # 0700, and as root the server runs as another user who must keep reaching its data.
    pg_folder = Path(tempfile.mkdtemp(prefix="colony-outage-pg-"))
    pg_folder.chmod(0o755)
    pg = PgServer(pg_folder, free_port()).start()
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": pg.url(),
        "COLONY_DATA_DIR": str(folder / "data"),
        "COLONY_BROKER": "filesystem",
        "SECRET_KEY": "run-survives-test",
        "DEBUG": "false",
        "PORT": str(port),
        "WEB_WORKERS": "2",
        "COLONY_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "DATABASE_CONNECT_TIMEOUT": "2",
        "PYTHONUNBUFFERED": "1",
    }
    _manage(env, "migrate", "--no-input", "-v", "0")
    token = re.search(r"Agent dev-agent \(role dev\) token, shown once: (\S+)", _manage(env, "colony_bootstrap"))[1]
    _manage(env, "collectstatic", "--no-input", "-v", "0")
    procfile = folder / "Procfile"
    procfile.write_text(
        "web: python -m runtime.serve\n"
        "worker: celery -A config.celery:app worker --loglevel INFO --pool solo --concurrency 1"
        " --without-mingle --without-gossip --hostname run-test@%h\n"
        f"beat: celery -A config.celery:app beat --loglevel INFO --schedule {folder / 'beat-schedule'}\n"
    )
    log = folder / "supervisor.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "runtime.supervisor", str(procfile)],
        cwd=BASE_DIR,
        env={**env, "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}"},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    colony = Colony(env=env, log=log, process=process, pg=pg, port=port, token=token)
    try:

        def web_up():
            try:
                return httpx.get(f"{colony.base}/api/v1/agents/me", headers=colony.auth, timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        colony.auth = {"Authorization": f"Bearer {token}"}
        colony.wait_for(web_up, "the web answering")
        colony.wait_for(lambda: " ready." in colony.output(), "the Celery worker becoming ready")
        yield colony
    finally:
        stop(process, 30)
        pg.stop()
        shutil.rmtree(pg_folder, ignore_errors=True)


class Poller(threading.Thread):
    """Calls the API every 0.2 s until stopped; records what did not answer 200."""

    def __init__(self, colony: Colony):
        super().__init__(daemon=True)
        self.colony, self.ok, self.failures = colony, 0, []
        self.stop = threading.Event()

    def run(self):
        with httpx.Client(base_url=self.colony.base, headers=self.colony.auth, timeout=10) as client:
            while not self.stop.is_set():
                try:
                    response = client.get("/api/v1/agents/me")
                    if response.status_code == 200:
                        self.ok += 1
                    else:
                        self.failures.append(response.status_code)
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                self.stop.wait(0.2)


def test_killed_worker_and_beat_come_back_while_the_web_serves(colony):
    poller = Poller(colony)
    poller.start()
    try:
        for name in ("worker", "beat"):
            before = colony.pids(name)
            os.kill(before[-1], signal.SIGKILL)
            colony.wait_for(lambda n=name, b=before: len(colony.pids(n)) > len(b), f"{name} being restarted", 60)
            new_pid = colony.pids(name)[-1]
            assert new_pid != before[-1]
            assert f"{name} (pid {before[-1]}) ended with signal 9" in colony.output()
            os.kill(new_pid, 0)  # alive
        # The restarted worker is a working worker again, not just a process.
        colony.wait_for(lambda: colony.output().count(" ready.") >= 2, "the restarted worker becoming ready", 90)
    finally:
        poller.stop.set()
        poller.join(15)
    assert poller.failures == []
    assert poller.ok >= 10
    # The access log goes through Python logging (Django's LOGGING handler and its filters).
    assert re.search(
        r"INFO uvicorn\.access: 127\.0\.0\.1:\d+ - \"GET /api/v1/agents/me HTTP/1\.1\" 200", colony.output()
    )


def test_a_killed_web_master_comes_back_with_new_workers(colony):
    """uvicorn's master SIGKILLed (the OOM killer's way): its workers used to go on holding the port, so
    every restart failed with "Address already in use" and the orphans outlived make run."""
    before = colony.pids("web")
    master = before[-1]
    old_workers = [pid for pid in group(master) if pid != master]
    assert len(old_workers) >= 2  # the WEB_WORKERS=2 workers (and multiprocessing's resource tracker)
    os.kill(master, signal.SIGKILL)
    colony.wait_for(lambda: len(colony.pids("web")) > len(before), "web being restarted", 60)
    new_master = colony.pids("web")[-1]

    def served_by_the_new_master():
        try:
            answered = httpx.get(f"{colony.base}/api/v1/agents/me", headers=colony.auth, timeout=5).status_code
        except httpx.HTTPError:
            return False
        return answered == 200 and len(group(new_master)) >= 3

    colony.wait_for(served_by_the_new_master, "the restarted web answering", 90)
    assert group(master) == [], "the dead master's workers outlived it"
    assert f"web (pid {master}) ended with signal 9" in colony.output()
    assert "Address already in use" not in colony.output()
    assert len(colony.pids("web")) == len(before) + 1  # one restart was enough


def test_database_outage_answers_503_at_once_and_recovers(colony):
    client = httpx.Client(base_url=colony.base, timeout=15)
    login = client.get("/login/")
    csrf = client.cookies["csrftoken"]
    assert login.status_code == 200
    response = client.post(
        "/login/", data={"username": "admin", "password": ADMIN_PASSWORD, "csrfmiddlewaretoken": csrf}
    )
    assert response.status_code == 302, response.text[:500]
    assert client.get("/").status_code == 200
    # Static files come from the web process (WhiteNoise) under the production server.
    assert client.get("/static/admin/css/base.css").status_code == 200

    # A token no web worker has looked up yet: a worker keeps a found token TOKEN_CACHE_SECONDS, and /mcp's
    # tools/list needs nothing else of the database, so a kept token's request was (rightly) answered.
    fresh_token = _manage(colony.env, "agent", "token", "dev-agent").strip().splitlines()[-1]
    colony.pg.stop()
    try:
        started = time.monotonic()
        api = client.get("/api/v1/agents/me", headers=colony.auth)
        elapsed = time.monotonic() - started
        assert api.status_code == 503, api.text[:500]
        assert api.json()["error"]["code"] == "DATABASE_UNAVAILABLE"
        assert int(api.headers["Retry-After"]) > 0
        assert elapsed < 5
        write = client.post("/api/v1/memory", headers=colony.auth, json={"prompt": "deploys need a green build first"})
        assert write.status_code == 503 and write.json()["error"]["code"] == "DATABASE_UNAVAILABLE"
        mcp = client.post(
            "/mcp",
            headers={"Authorization": f"Bearer {fresh_token}", "Accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        )
        assert mcp.status_code == 503 and mcp.json()["error"]["code"] == "DATABASE_UNAVAILABLE", mcp.text[:300]
        assert int(mcp.headers["Retry-After"]) > 0
        page = client.get("/")
        assert page.status_code == 503
        assert "database is unavailable" in page.text and "Retry-After" in page.headers
        health = client.get("/api/v1/health")
        assert health.status_code == 503 and health.json()["database"] is False
    finally:
        colony.pg.start()

    def recovered():
        return client.get("/api/v1/agents/me", headers=colony.auth).status_code == 200

    colony.wait_for(recovered, "the API answering again after PostgreSQL is back", 30)
    assert client.get("/").status_code == 200
    assert client.get("/api/v1/health").json()["database"] is True


def test_an_idle_keep_alive_connection_outlives_common_client_expiries(colony):
    """A client that reuses a connection after 6 s idle (httpx keeps them 5 s, aiohttp 15 s) finds it
    open: the server keeps idle connections longer than clients do, so the client closes first. With
    uvicorn's 5 s the server closed them, and a request sent as it did got "connection reset" (the
    soak saw 3 in 29,640 requests)."""
    import socket

    request = (
        f"GET /api/v1/agents/me HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {colony.token}\r\n\r\n"
    ).encode()

    def read_response(conn) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            assert chunk, f"the server closed the connection: {data[:200]!r}"
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", head)[1])
        while len(body) < length:
            chunk = conn.recv(65536)
            assert chunk, "the server closed the connection mid-body"
            body += chunk
        return head

    with socket.create_connection(("127.0.0.1", colony.port), timeout=10) as conn:
        for attempt in range(2):
            if attempt:
                time.sleep(6)
            conn.sendall(request)
            head = read_response(conn)
            assert head.startswith(b"HTTP/1.1 200"), (attempt, head[:200])
