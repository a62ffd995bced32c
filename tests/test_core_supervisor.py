"""How `make run`'s supervisor (runtime/supervisor.py) stops what it started.

SIGTERM goes to each Procfile process itself, whose own shutdown stops its children: Celery's worker
finishes the jobs its pool processes are running. A SIGTERM to the whole group reached those pool
processes too, which died of it mid-job (and, with the filesystem broker, left the worker's warm
shutdown past the 15 s limit, so the supervisor SIGKILLed it). Whatever a process leaves behind, or a
process that ignores SIGTERM, is SIGKILLed with its group.

Plain Python processes stand in for the servers: a "job" process started the way a pool process is
(same process group, SIGTERM's default action), under a parent that waits for it when told to stop.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from runtime import supervisor as supervisor_module
from runtime.supervisor import Supervisor
from tests.process_support import gone
from tests.standalone import free_port

BASE_DIR = Path(__file__).resolve().parents[1]

JOB = """
import sys, time
from pathlib import Path
folder = Path(sys.argv[1])
(folder / "job.pid").write_text(str(__import__("os").getpid()))
time.sleep(1.5)  # the job; SIGTERM's default action would end it here
(folder / "job.done").write_text("done")
"""

PARENT_WAITS_FOR_ITS_JOB = """
import signal, subprocess, sys
def stop(*_):
    job.wait()  # a warm shutdown: let the running job finish
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
job = subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2]])
signal.pause()
"""

PARENT_LEAVES_ITS_JOB = """
import signal, subprocess, sys
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
job = subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2]])
signal.pause()
"""

PARENT_IGNORES_SIGTERM = """
import signal, subprocess, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
job = subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2]])
signal.pause()
"""


def _start(tmp_path: Path, name: str, command: str):
    """A Supervisor of one Procfile process, running in a thread; its output goes to ``out``."""
    out = io.StringIO()
    supervisor = Supervisor({name: command}, env=dict(os.environ), cwd=tmp_path, out=out)
    thread = threading.Thread(target=supervisor.run, daemon=True)
    thread.start()
    return supervisor, thread, out


def _supervise(tmp_path: Path, parent_source: str, *, job_source: str = JOB):
    """Start one Procfile process under a Supervisor in a thread; return it once its job runs."""
    (tmp_path / "job.py").write_text(job_source)
    (tmp_path / "parent.py").write_text(parent_source)
    supervisor, thread, out = _start(
        tmp_path, "proc", f"{sys.executable} {tmp_path / 'parent.py'} {tmp_path / 'job.py'} {tmp_path}"
    )
    deadline = time.monotonic() + 20
    while not (tmp_path / "job.pid").exists():
        assert time.monotonic() < deadline, f"the job did not start:\n{out.getvalue()}"
        time.sleep(0.05)
    return supervisor, thread, out, int((tmp_path / "job.pid").read_text())


def _stop(supervisor: Supervisor, thread: threading.Thread) -> float:
    began = time.monotonic()
    supervisor.request_stop()
    thread.join(30)
    assert not thread.is_alive(), "the supervisor did not return"
    return time.monotonic() - began


def test_sigterm_goes_to_the_process_which_lets_its_running_job_finish(tmp_path):
    supervisor, thread, out, job_pid = _supervise(tmp_path, PARENT_WAITS_FOR_ITS_JOB)
    _stop(supervisor, thread)
    assert (tmp_path / "job.done").exists(), f"the running job was killed:\n{out.getvalue()}"
    assert "did not stop" not in out.getvalue()
    assert gone(job_pid)


def test_what_a_stopped_process_leaves_behind_is_killed(tmp_path):
    supervisor, thread, out, job_pid = _supervise(
        tmp_path, PARENT_LEAVES_ITS_JOB, job_source=JOB.replace("time.sleep(1.5)", "time.sleep(60)")
    )
    took = _stop(supervisor, thread)
    assert gone(job_pid), f"the job outlived the stop:\n{out.getvalue()}"
    assert took < 10
    assert not (tmp_path / "job.done").exists()


def test_a_process_ignoring_sigterm_is_killed_with_its_group_after_the_timeout(tmp_path, monkeypatch):
    monkeypatch.setattr(supervisor_module, "STOP_TIMEOUT", 1.0)
    supervisor, thread, out, job_pid = _supervise(
        tmp_path, PARENT_IGNORES_SIGTERM, job_source=JOB.replace("time.sleep(1.5)", "time.sleep(60)")
    )
    parent_pid = supervisor.children[0].process.pid
    took = _stop(supervisor, thread)
    assert "proc did not stop in 1 s; killing it" in out.getvalue()
    assert gone(parent_pid, job_pid)
    assert took < 10


SERVER = """
import os, signal, socket, subprocess, sys
from pathlib import Path
folder, port = Path(sys.argv[2]), int(sys.argv[3])
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    listener.bind(("127.0.0.1", port))
except OSError as exc:
    print(f"cannot bind: {exc}", flush=True)
    sys.exit(3)  # as uvicorn does
listener.listen()
# A worker that shares the listening socket, as uvicorn's workers do.
job = subprocess.Popen([sys.executable, sys.argv[1], str(folder)], pass_fds=[listener.fileno()])
# Written whole, then renamed: the test polls for these files and read one still empty once.
(folder / f".bound.{os.getpid()}").write_text(str(job.pid))
(folder / f".bound.{os.getpid()}").rename(folder / f"bound.{os.getpid()}")
signal.pause()
"""


def _servers(folder: Path) -> dict[int, int]:
    """Server pid -> its worker's pid, for every server that bound the port."""
    return {int(path.suffix[1:]): int(path.read_text()) for path in folder.glob("bound.*")}


def test_a_dead_servers_workers_are_stopped_so_its_restart_gets_the_port(tmp_path):
    """uvicorn's master SIGKILLed (the OOM killer): its workers kept the port, and every restart of the
    master failed with "Address already in use"."""
    port = free_port()
    (tmp_path / "job.py").write_text(JOB.replace("time.sleep(1.5)", "time.sleep(60)"))
    (tmp_path / "server.py").write_text(SERVER)
    supervisor, thread, out = _start(
        tmp_path, "web", f"{sys.executable} {tmp_path / 'server.py'} {tmp_path / 'job.py'} {tmp_path} {port}"
    )
    try:
        deadline = time.monotonic() + 20
        while not _servers(tmp_path):
            assert time.monotonic() < deadline, f"the server did not start:\n{out.getvalue()}"
            time.sleep(0.05)
        [(first, first_worker)] = _servers(tmp_path).items()
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while len(_servers(tmp_path)) < 2:
            assert time.monotonic() < deadline, f"the restarted server did not get the port:\n{out.getvalue()}"
            time.sleep(0.05)
        assert gone(first_worker)
        assert f"web left processes behind (pids [{first_worker}]); stopping them" in out.getvalue()
        assert "cannot bind" not in out.getvalue()
    finally:
        _stop(supervisor, thread)
    assert gone(*_servers(tmp_path).values())


def test_what_a_dead_process_left_is_killed_at_the_stop_before_its_restart(tmp_path):
    stubborn_job = JOB.replace(
        "import sys, time", "import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)"
    )
    supervisor, thread, out, job_pid = _supervise(
        tmp_path, PARENT_IGNORES_SIGTERM, job_source=stubborn_job.replace("time.sleep(1.5)", "time.sleep(60)")
    )
    try:
        supervisor.children[0].backoff.delay = 60.0  # the restart is still pending at the stop
        os.kill(supervisor.children[0].process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while "restarting in 60 s" not in out.getvalue():
            assert time.monotonic() < deadline, out.getvalue()
            time.sleep(0.05)
        assert not gone(job_pid, within=0.5)  # it ignores the SIGTERM sent when its parent's death was noticed
    finally:
        took = _stop(supervisor, thread)  # a failure above must not leave the processes behind either
    assert gone(job_pid), f"the job outlived the stop:\n{out.getvalue()}"
    assert took < 10


SERVICE = """
import os, sys, time
from pathlib import Path
for i in range(4):
    print(f"line {i}", flush=True)
(Path(sys.argv[1]) / "service.pid").write_text(str(os.getpid()))
time.sleep(60)  # quiet, as a server between requests: nothing tells it its supervisor is gone
"""


def test_a_closed_terminal_stops_the_supervisor_and_everything_it_started(tmp_path):
    """SIGHUP's default action ended the supervisor (and make run) alone: its processes, each in a
    session of its own, ran on, so the next make run found the port taken and started a second beat."""
    (tmp_path / "service.py").write_text(SERVICE)
    (tmp_path / "Procfile").write_text(f"service: {sys.executable} {tmp_path / 'service.py'} {tmp_path}\n")
    terminal, its_device = os.openpty()
    # setsid -c: a session of its own whose controlling terminal is the pty, as a shell's command has.
    supervisor = subprocess.Popen(
        ["setsid", "-c", sys.executable, "-m", "runtime.supervisor", str(tmp_path / "Procfile")],
        cwd=BASE_DIR,
        stdin=its_device,
        stdout=its_device,
        stderr=its_device,
        env={**os.environ, "PYTHONPATH": str(BASE_DIR)},
    )
    os.close(its_device)
    os.set_blocking(terminal, False)
    shown = b""
    try:
        deadline = time.monotonic() + 20
        while b"service | line 3" not in shown:
            assert time.monotonic() < deadline, f"the process did not start:\n{shown.decode()}"
            try:
                shown += os.read(terminal, 65536)
            except BlockingIOError:
                time.sleep(0.05)
        service = int((tmp_path / "service.pid").read_text())
    finally:
        os.close(terminal)  # the terminal goes away: SIGHUP to its session's leader, the supervisor
    try:
        supervisor.wait(20)
    except subprocess.TimeoutExpired:
        supervisor.kill()
        raise AssertionError("the supervisor did not stop when its terminal closed") from None
    try:
        assert gone(service), "a process outlived the supervisor whose terminal closed"
    finally:
        if not gone(service, within=0):
            os.kill(service, signal.SIGKILL)
    assert supervisor.returncode == 0, supervisor.returncode


def test_a_watched_service_that_ends_unstopped_is_restarted_with_back_off():
    """The Watch behind make run's embedded PostgreSQL: restarted when it ended without being
    stopped, and again after a longer back-off when a restart fails (even though the failed start
    left no pid file behind to say so)."""
    state = {"ended": None, "fail": 0, "restarts": 0}
    said = []

    def restart():
        state["restarts"] += 1
        if state["fail"]:
            state["fail"] -= 1
            state["ended"] = None  # PostgreSQL removes its pid file when it fails to start
            raise RuntimeError("Could not start the embedded PostgreSQL.\nServer log: ...")
        state["ended"] = None

    watch = supervisor_module.Watch("database", ended=lambda: state["ended"], restart=restart)
    say = lambda name, line: said.append(line)  # noqa: E731

    def poll_at(now):
        watch.poll(now, say)
        watch.join(5)

    poll_at(10.0)
    assert state["restarts"] == 0 and said == []  # running: nothing to do
    state["ended"], state["fail"] = 4321, 1
    poll_at(11.0)
    assert said == ["database (pid 4321) ended without being stopped; restarting in 1 s"]
    poll_at(11.5)
    assert state["restarts"] == 0  # the back-off has not passed
    poll_at(12.0)
    assert (
        state["restarts"] == 1
        and said[-1] == "database could not be restarted: Could not start the embedded PostgreSQL."
    )
    poll_at(12.5)
    assert said[-1].startswith("database could not")  # checked once a second (Watch.CHECK_EVERY)
    poll_at(13.0)
    assert said[-1] == "database (pid 4321) ended without being stopped; restarting in 2 s"
    poll_at(14.9)
    assert state["restarts"] == 1
    poll_at(15.0)
    assert state["restarts"] == 2 and said[-1] == "database restarted" and state["ended"] is None
    poll_at(20.0)
    assert state["restarts"] == 2  # it runs again

    # The supervisor's round polls its watches, and stops doing so once it is stopping.
    out = io.StringIO()
    supervisor = Supervisor({}, env={}, cwd=BASE_DIR, out=out, watches=[watch])
    state["ended"], watch.checked_at = 99, 0.0
    supervisor.stopping.set()
    supervisor.poll()
    assert out.getvalue() == ""
    supervisor.stopping.clear()
    supervisor.poll()
    assert "supervisor | database (pid 99) ended without being stopped; restarting in" in out.getvalue()
