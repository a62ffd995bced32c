"""How `make run`'s supervisor (core/supervisor.py) stops what it started.

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
import sys
import threading
import time
from pathlib import Path

from core import supervisor as supervisor_module
from core.supervisor import Supervisor

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


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie waits only for its reaper


def _gone(*pids: int, within: float = 5.0) -> bool:
    """True once none of ``pids`` runs (a SIGKILL takes effect a moment after it is sent)."""
    deadline = time.monotonic() + within
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _supervise(tmp_path: Path, parent_source: str, *, job_source: str = JOB):
    """Start one Procfile process under a Supervisor in a thread; return it once its job runs."""
    (tmp_path / "job.py").write_text(job_source)
    (tmp_path / "parent.py").write_text(parent_source)
    out = io.StringIO()
    supervisor = Supervisor(
        {"proc": f"{sys.executable} {tmp_path / 'parent.py'} {tmp_path / 'job.py'} {tmp_path}"},
        env=dict(os.environ),
        cwd=tmp_path,
        out=out,
    )
    thread = threading.Thread(target=supervisor.run, daemon=True)
    thread.start()
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
    assert _gone(job_pid)


def test_what_a_stopped_process_leaves_behind_is_killed(tmp_path):
    supervisor, thread, out, job_pid = _supervise(
        tmp_path, PARENT_LEAVES_ITS_JOB, job_source=JOB.replace("time.sleep(1.5)", "time.sleep(60)")
    )
    took = _stop(supervisor, thread)
    assert _gone(job_pid), f"the job outlived the stop:\n{out.getvalue()}"
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
    assert _gone(parent_pid, job_pid)
    assert took < 10
