"""`make run` hands its process to Colony's supervisor: a SIGTERM sent to the recipe's process (what
`pgrep -f runtime.run` finds, what `kill` of make's child hits) reaches `runtime.run` itself, which stops the
stack. Before, make's shell sat between them and died alone, leaving everything running. (A signal to
the whole process group, Ctrl-C or `timeout make run`, stopped everything either way.)

The recipe runs with a stand-in `python` (it records its pid and parent, then waits for a signal),
so the test needs neither the stack nor the database.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.process_support import alive, children
from tests.standalone import free_port

STAND_IN = """#!/bin/sh
trap 'echo terminated >> "$RECORD"; exit 0' TERM
echo "$$ $PPID $*" > "$RECORD"
i=0
while [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
"""


def _wait_for(predicate, seconds: float = 20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


def test_sigterm_to_the_recipe_process_reaches_core_run(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "python"
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    stamp = tmp_path / "installed"
    stamp.touch()  # newer than requirements.txt: make installs nothing
    record = tmp_path / "record"
    make = subprocess.Popen(
        ["make", "-s", "run", f"BIN={bin_dir}", f"STAMP={stamp}"],
        cwd=settings.BASE_DIR,
        env={**os.environ, "RECORD": str(record)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = _wait_for(lambda: record.exists() and record.read_text().strip())
        assert line, "the recipe never started python"
        pid, parent, *args = line.split()
        assert args == ["-m", "runtime.run"]
        assert int(parent) == make.pid, "a shell sits between make and runtime.run"

        os.kill(int(pid), signal.SIGTERM)
        assert make.wait(20) == 0, make.stdout.read()
        assert record.read_text().splitlines()[-1] == "terminated"
    finally:
        if make.poll() is None:
            make.kill()
            make.wait()
        if record.exists() and record.read_text().strip():  # a stand-in left behind by a failure
            try:
                os.kill(int(record.read_text().split()[0]), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


def _run_env(data: Path, *, web_port: int, database_port: int, connect_timeout: int) -> dict[str, str]:
    """runtime.run's environment: its web on ``web_port``, its database a socket on ``database_port``
    that is no PostgreSQL, its data folder ``data``."""
    return {
        **os.environ,
        "HOST": "127.0.0.1",
        "PORT": str(web_port),
        "COLONY_DATA_DIR": str(data),
        "DATABASE_URL": f"postgres://colony@127.0.0.1:{database_port}/nowhere",
        "DATABASE_CONNECT_TIMEOUT": str(connect_timeout),
    }


@contextlib.contextmanager
def _listening():
    """A port something listens on and never answers (a taken web port, or a "database" that holds
    runtime.run in its migrate step)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def _core_run(env: dict[str, str]) -> subprocess.CompletedProcess:
    """runtime.run to its end (a refusal, in these tests), its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "runtime.run"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _start_core_run(env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "runtime.run"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )


def test_make_run_says_at_once_when_its_port_is_taken(tmp_path: Path):
    """A Colony left running (its supervisor killed with SIGKILL, say) holds the port: the new web
    failed to bind and was restarted forever while make run looked started."""
    with _listening() as port:
        # A database that does not answer: without the check, make run would stop at its first step.
        result = _core_run(_run_env(tmp_path, web_port=port, database_port=port, connect_timeout=1))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"[colony] port {port} on 127.0.0.1 is already in use." in result.stdout
    assert "PORT=<another port>" in result.stdout
    assert "database:" not in result.stdout  # it stopped before anything started


def test_make_run_with_its_port_taken_starts_no_embedded_database(tmp_path: Path):
    """The checks ran after Colony's configuration was imported, and that import starts the embedded
    database: make run refused, but left a database it had just started running."""
    data = tmp_path / "colony"
    env = _run_env(data, web_port=0, database_port=0, connect_timeout=1)
    del env["DATABASE_URL"]
    try:
        with _listening() as port:
            result = _core_run({**env, "PORT": str(port)})
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"[colony] port {port} on 127.0.0.1 is already in use." in result.stdout
        assert not (data / "pgdata").exists()
    finally:
        if (data / "pgdata").exists():  # what the fault left running
            _embedded(data, "stop")


def test_sigterm_while_starting_stops_the_start_up_step(tmp_path: Path):
    """SIGTERM (or SIGHUP) during the start-up steps ended runtime.run by the signal's default action: the
    step it was running ran on, and an embedded database it had started was never stopped."""
    log = tmp_path / "run.log"
    with _listening() as silent:  # a "database" that accepts connections and never answers: migrate waits on it
        run = _start_core_run(_run_env(tmp_path, web_port=free_port(), database_port=silent, connect_timeout=60), log)
        step = None
        try:
            found = _wait_for(lambda: [pid for pid, cmd in children(run.pid).items() if "manage.py migrate" in cmd], 60)
            assert found, f"runtime.run never reached its migrate step:\n{log.read_text()}"
            [step] = found
            os.kill(run.pid, signal.SIGTERM)
            assert run.wait(20) == 130, log.read_text()
            assert "[colony] stopped while starting." in log.read_text()
            assert _wait_for(lambda: not alive(step), 10), "the migrate step outlived runtime.run"
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
            if step is not None and alive(step):
                os.kill(step, signal.SIGKILL)


@pytest.mark.parametrize("inside", [True, False])
def test_make_run_empties_the_metrics_folder_of_its_data_folder(tmp_path: Path, inside: bool):
    """A scrape adds up every sample file in the metrics folder, and nothing ever removed one: /metrics
    under make run counted the requests of every earlier run, test run and command of the data folder.
    make run empties it before its processes start, when the folder is inside its data folder (the
    default); one elsewhere may be shared and is left alone."""
    data = tmp_path / "data"
    folder = data / "metrics" if inside else tmp_path / "shared-metrics"
    folder.mkdir(parents=True)
    (folder / "histogram_999999.db").write_bytes(b"an earlier run's samples")
    (folder / "notes.txt").write_text("not a sample file")
    log = tmp_path / "run.log"
    with _listening() as silent:  # migrate waits on this "database": runtime.run stays in its start-up
        env = _run_env(data, web_port=free_port(), database_port=silent, connect_timeout=60)
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # the settings' default: <data>/metrics
        if not inside:
            env["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
        run = _start_core_run(env, log)
        try:
            reached = _wait_for(lambda: any("manage.py migrate" in c for c in children(run.pid).values()), 60)
            assert reached, f"runtime.run never reached its migrate step:\n{log.read_text()}"
        finally:
            run.terminate()
            run.wait(30)
    assert (folder / "histogram_999999.db").exists() is not inside
    assert (folder / "notes.txt").exists()


def test_a_second_make_run_on_the_same_data_folder_refuses_at_once(tmp_path: Path):
    """Two make runs on one data folder (the second on another port) ran two Celery beats, and the
    second one's stop stopped the embedded database under the first one's feet."""
    log = tmp_path / "first.log"
    with _listening() as silent:  # holds the first make run in its migrate step
        first_port = free_port()
        first = _start_core_run(_run_env(tmp_path, web_port=first_port, database_port=silent, connect_timeout=60), log)
        try:
            assert _wait_for(lambda: "[colony] database:" in log.read_text(), 60), log.read_text()
            second = _core_run(_run_env(tmp_path, web_port=free_port(), database_port=silent, connect_timeout=1))
            assert second.returncode == 1, second.stdout + second.stderr
            assert (
                f"[colony] Colony is already running from the data folder {tmp_path.resolve()} "
                f"(make run pid {first.pid}, web on http://127.0.0.1:{first_port}/)."
            ) in second.stdout
            assert "COLONY_DATA_DIR=<folder>" in second.stdout
            assert "database:" not in second.stdout  # it stopped before anything started
            assert first.poll() is None, "the second make run disturbed the first"
        finally:
            first.send_signal(signal.SIGTERM)
            assert first.wait(20) == 130, log.read_text()
    # The lock goes with its holder: the next make run gets past it (to the port check here).
    with _listening() as port:
        third = _core_run(_run_env(tmp_path, web_port=port, database_port=port, connect_timeout=1))
    assert "already running from the data folder" not in third.stdout
    assert f"[colony] port {port} on 127.0.0.1 is already in use." in third.stdout


def _embedded(data: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runtime.embedded_db", *args],
        cwd=settings.BASE_DIR,
        env={**os.environ, "COLONY_DATA_DIR": str(data)},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.integration
@pytest.mark.parametrize("running_before", [False, True], ids=["started-by-make-run", "running-before"])
def test_make_run_stops_the_embedded_database_only_if_it_started_it(tmp_path: Path, running_before: bool):
    """make run stopped the embedded database at its end even when it had found it running: a test
    run or a benchmark using it lost its database when make run stopped."""
    # The server's folder outside pytest's temp root (reset to 0700 by every pytest run): as root the
    # server runs as another user, who must keep reaching its data.
    folder = Path(tempfile.mkdtemp(prefix="colony-run-stop-"))
    folder.chmod(0o755)
    data = folder / "colony"
    log = tmp_path / "run.log"
    try:
        if running_before:
            assert _embedded(data, "start").returncode == 0
        env = _run_env(data, web_port=free_port(), database_port=0, connect_timeout=5)
        del env["DATABASE_URL"]
        run = _start_core_run(env, log)
        try:
            assert _wait_for(lambda: "[colony] database:" in log.read_text(), 90), log.read_text()
            run.send_signal(signal.SIGTERM)  # while it migrates; the same finally as after the supervisor
            assert run.wait(30) == 130, log.read_text()
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        status = _embedded(data, "status").stdout
        if running_before:
            assert "not running" not in status, log.read_text()
            assert "[colony] leaving the embedded PostgreSQL running" in log.read_text()
            assert "runtime.embedded_db stop" in log.read_text()
        else:
            assert "not running" in status, log.read_text()
            assert "[colony] stopping embedded PostgreSQL ..." in log.read_text()
    finally:
        _embedded(data, "stop")
        shutil.rmtree(folder, ignore_errors=True)


def test_sigterm_while_the_embedded_database_starts_stops_make_run_cleanly(tmp_path: Path):
    """SIGTERM while runtime.run read its settings (which start the embedded database) ended it with a
    KeyboardInterrupt traceback: that step was outside the try that says "stopped while starting"."""
    import fasteners

    data = tmp_path / "colony"
    data.mkdir()
    log = tmp_path / "run.log"
    env = _run_env(data, web_port=free_port(), database_port=0, connect_timeout=5)
    del env["DATABASE_URL"]
    # Another process starting the same server holds its start lock: runtime.run waits in that step.
    with fasteners.InterProcessLock(str(data / "pgdata.start.lock")):
        run = _start_core_run(env, log)
        try:
            assert _wait_for(lambda: "starting embedded PostgreSQL" in log.read_text(), 60), log.read_text()
            time.sleep(0.5)
            run.send_signal(signal.SIGTERM)
            assert run.wait(30) == 130, log.read_text()
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
    output = log.read_text()
    assert "[colony] stopped while starting." in output
    assert "Traceback" not in output
