"""A small process supervisor for ``make run`` (replaces honcho, which stops everything when one
process dies).

Each ``Procfile`` line is started in its own process group; its output is printed with a
``name |`` prefix. A process that exits while the supervisor is running is restarted after a
back-off (1 s, doubling up to 30 s; reset once it has stayed up 60 s), so a worker or beat killed
with SIGKILL comes back while the web keeps serving. SIGINT, SIGTERM and SIGHUP (the terminal closed)
stop every process and then return: SIGTERM to the process itself, whose own shutdown stops its
children (uvicorn's master its workers; Celery's worker finishes the jobs it is running, then stops
its pool), then SIGKILL to its whole group after ``STOP_TIMEOUT`` seconds, or at once to whatever it
left behind when it exits.
A SIGTERM to the whole group would reach Celery's pool processes too, which die of it mid-job.

A process that dies on its own (the OOM killer's SIGKILL, say) can leave its children behind:
uvicorn's workers go on serving on the port without a master, so the restarted master could not bind
it ("Address already in use"), make run would never recover, and the workers would outlive make run.
What a dead process leaves behind gets SIGTERM when the death is noticed and SIGKILL before the
restart (which waits up to ``LEFTOVER_WAIT`` seconds for it to be gone) or at the stop.

A ``Watch`` keeps up a service that is not a child: make run's embedded PostgreSQL, if killed, is
restarted with the same back-off instead of staying down (and the web answering 503) until the next
make run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
STABLE_AFTER = 60.0
STOP_TIMEOUT = 15.0
# Ctrl-C, kill, and the terminal closing (SIGHUP's default action would end the supervisor alone and
# leave every process running: the next make run found the port taken and a second beat).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
LEFTOVER_WAIT = 2.0


def running(process: psutil.Process | None) -> bool:
    """Whether ``process`` still runs. A zombie does not (psutil's ``is_running`` says it does): it has
    let go of everything it held, and where PID 1 does not reap orphans it stays a zombie."""
    try:
        return process is not None and process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def group_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that still run (see :func:`running`)."""
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and running(process):
                members.append(process.pid)
        except OSError:
            continue  # gone meanwhile
    return sorted(members)


def signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass  # nothing left in it


def read_procfile(path: Path) -> dict[str, str]:
    """``name: command`` lines, in order; blank lines and ``#`` comments are skipped."""
    entries: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, command = line.partition(":")
        if not sep or not name.strip() or not command.strip():
            raise ValueError(f"{path}:{number}: expected 'name: command', got {raw!r}")
        entries[name.strip()] = command.strip()
    return entries


@dataclass
class Backoff:
    """How long to wait before a restart: ``BACKOFF_FIRST`` doubling up to ``BACKOFF_MAX``, back to the
    first once what it restarts has stayed up ``STABLE_AFTER`` seconds."""

    delay: float = BACKOFF_FIRST

    def take(self) -> float:
        """The wait before this restart; the next one waits twice as long."""
        delay, self.delay = self.delay, min(BACKOFF_MAX, self.delay * 2)
        return delay

    def settle(self, up_for: float) -> None:
        if up_for > STABLE_AFTER:
            self.delay = BACKOFF_FIRST


@dataclass
class Child:
    name: str
    command: str
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    backoff: Backoff = field(default_factory=Backoff)
    restart_at: float | None = None
    threads: list[threading.Thread] = field(default_factory=list)


class Watch:
    """A service the supervisor did not start as a child but keeps up (make run's embedded PostgreSQL,
    which runs in a session of its own and outlives the helper that started it): ``ended()`` returns
    the pid of the service when it has ended without being stopped, else None; ``restart()`` starts it
    again (it may take seconds: it runs in a thread, the supervisor goes on meanwhile). The same
    back-off as a child's."""

    CHECK_EVERY = 1.0

    def __init__(self, name: str, *, ended: Callable[[], int | None], restart: Callable[[], None]):
        self.name, self.ended, self.restart = name, ended, restart
        self.backoff = Backoff()
        self.restart_at: float | None = None
        self.checked_at = 0.0
        self.up_since = time.monotonic()
        self.failed_pid: int | None = None
        self.thread: threading.Thread | None = None

    def poll(self, now: float, say: Callable[[str, str], None]) -> None:
        if self.thread is not None and self.thread.is_alive():
            return
        if self.restart_at is None and now - self.checked_at < self.CHECK_EVERY:
            return
        self.checked_at = now
        # After a failed restart the service is down whatever ended() says (PostgreSQL removes its pid
        # file when it fails to start): try again after the back-off until a restart succeeds.
        pid = self.failed_pid or self.ended()
        if pid is None:
            self.restart_at = None  # running (restarted by hand, perhaps), or stopped on purpose
            self.backoff.settle(now - self.up_since)
            return
        if self.restart_at is None:
            delay = self.backoff.take()
            self.restart_at = now + delay
            say("supervisor", f"{self.name} (pid {pid}) ended without being stopped; restarting in {delay:.0f} s")
        elif now >= self.restart_at:
            self.restart_at = None
            self.thread = threading.Thread(target=self._restart, args=(say, pid), daemon=True)
            self.thread.start()

    def _restart(self, say: Callable[[str, str], None], pid: int) -> None:
        try:
            self.restart()
        except Exception as exc:  # noqa: BLE001 - said, and tried again after the back-off
            self.failed_pid = pid
            say("supervisor", f"{self.name} could not be restarted: {str(exc).strip().splitlines()[0]}")
            return
        self.failed_pid = None
        self.up_since = time.monotonic()
        say("supervisor", f"{self.name} restarted")

    def join(self, timeout: float) -> None:
        """Wait for a restart under way, so that what stops the service afterwards finds it."""
        if self.thread is not None:
            self.thread.join(timeout)


class Supervisor:
    def __init__(
        self, procfile: dict[str, str], *, env: dict[str, str], cwd: Path, out=None, watches: Sequence[Watch] = ()
    ):
        self.children = [Child(name, command) for name, command in procfile.items()]
        self.watches = list(watches)
        self.env = env
        self.cwd = cwd
        self.out = out or sys.stdout
        self.width = max(len(name) for name in procfile) if procfile else 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def say(self, name: str, line: str) -> None:
        with self.lock:
            try:
                self.out.write(f"{time.strftime('%H:%M:%S')} {name:<{self.width}} | {line}\n")
                self.out.flush()
            except OSError:
                pass  # the terminal is gone (SIGHUP): keep supervising, keep draining the children's output

    def _pump(self, child: Child, stream) -> None:
        for raw in iter(stream.readline, b""):
            self.say(child.name, raw.decode(errors="replace").rstrip("\n"))
        stream.close()

    def start(self, child: Child) -> None:
        # `exec` so the shell is replaced and signals reach the program itself.
        child.process = subprocess.Popen(  # noqa: S603 - the commands of the project's Procfile
            ["/bin/sh", "-c", f"exec {child.command}"],
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        child.started_at = time.monotonic()
        child.restart_at = None
        thread = threading.Thread(target=self._pump, args=(child, child.process.stdout), daemon=True)
        thread.start()
        child.threads = [thread]
        self.say("supervisor", f"started {child.name} (pid {child.process.pid}): {child.command}")

    def poll(self) -> None:
        """One round: notice exits and schedule restarts, start what is due."""
        now = time.monotonic()
        if not self.stopping.is_set():
            for watch in self.watches:
                watch.poll(now, self.say)
        for child in self.children:
            if child.process is not None and child.restart_at is None:
                code = child.process.poll()
                if code is None:
                    child.backoff.settle(now - child.started_at)
                    continue
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                delay = child.backoff.take()
                child.restart_at = now + delay
                self.say(
                    "supervisor",
                    f"{child.name} (pid {child.process.pid}) ended with {how}; restarting in {delay:.0f} s",
                )
                self._stop_leftovers(child)
            if child.restart_at is not None and now >= child.restart_at and not self.stopping.is_set():
                self._kill_leftovers(child)
                self.start(child)

    def _stop_leftovers(self, child: Child) -> None:
        """SIGTERM to what a process that ended left running in its group (its group is named after its
        pid, which stays reserved while any member lives)."""
        if left := group_members(child.process.pid):
            self.say("supervisor", f"{child.name} left processes behind (pids {left}); stopping them")
            signal_group(child.process.pid, signal.SIGTERM)

    def _kill_leftovers(self, child: Child) -> None:
        """SIGKILL to what is still left of an ended process's group; wait up to ``LEFTOVER_WAIT`` s for
        it to be gone, so that what it held (a listening port) is free for the restart."""
        signal_group(child.process.pid, signal.SIGKILL)
        deadline = time.monotonic() + LEFTOVER_WAIT
        while (left := group_members(child.process.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if left:
            self.say("supervisor", f"{child.name}'s leftover processes {left} are still there; restarting anyway")

    def run(self) -> int:
        for child in self.children:
            self.start(child)
        while not self.stopping.is_set():
            self.poll()
            self.stopping.wait(0.2)
        return self.stop_all()

    def request_stop(self, *_args) -> None:
        self.stopping.set()

    def stop_all(self) -> int:
        running = [c for c in self.children if c.process is not None and c.process.poll() is None]
        for child in running:
            self.say("supervisor", f"stopping {child.name} (pid {child.process.pid})")
            child.process.send_signal(signal.SIGTERM)  # the process, not its group: see the docstring
        deadline = time.monotonic() + STOP_TIMEOUT
        for child in running:
            try:
                child.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say("supervisor", f"{child.name} did not stop in {STOP_TIMEOUT:.0f} s; killing it")
        # What each left behind, those that had ended before the stop (awaiting a restart) included.
        for child in self.children:
            if child.process is not None:
                signal_group(child.process.pid, signal.SIGKILL)
                child.process.wait()
        for child in self.children:
            for thread in child.threads:
                thread.join(2)
        for watch in self.watches:
            watch.join(STOP_TIMEOUT)
        return 0


def main(argv: list[str]) -> int:
    """``python -m runtime.supervisor [Procfile]``: supervise the Procfile's processes until one of
    ``STOP_SIGNALS``."""
    path = Path(argv[1] if len(argv) > 1 else "Procfile")
    supervisor = Supervisor(read_procfile(path), env=dict(os.environ), cwd=Path.cwd())
    for signum in STOP_SIGNALS:
        signal.signal(signum, supervisor.request_stop)
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
