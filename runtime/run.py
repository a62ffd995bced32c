"""`make run`: start Colony with its embedded defaults, in the foreground, until Ctrl-C.

Starts the embedded PostgreSQL (unless DATABASE_URL is set), migrates, runs the first-start
bootstrap, collects the static files, then runs the web server (uvicorn with several workers,
``runtime/serve.py``), a Celery worker and Celery beat under Colony's own supervisor
(``runtime/supervisor.py``, Procfile): a process that dies is restarted while the others keep running.
Ctrl-C, SIGTERM or the terminal closing (SIGHUP) stops them all, then the embedded database if this
make run started it.

One make run at a time per data folder (``run.lock`` in it): a second one, on another port, would start
a second Celery beat (every periodic job twice) and, when it stopped, stop the embedded database under
the first one's feet.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import IO

BASE_DIR = Path(__file__).resolve().parent.parent


def say(message: str) -> None:
    try:
        print(f"[colony] {message}", flush=True)
    except OSError:
        pass  # the terminal is gone (SIGHUP); stopping goes on without it


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on ``host:port``. Bound as uvicorn binds (SO_REUSEADDR), so
    a closed connection's TIME_WAIT does not count."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:  # another error (a privileged port, an unknown host) is uvicorn's to report
            return exc.errno == errno.EADDRINUSE
    return False


RUN_LOCK = "run.lock"


def hold_data_folder(data: Path, web_url: str) -> tuple[IO[str] | None, str]:
    """Take the data folder's make-run lock for this process's lifetime.

    Returns ``(handle, "")``: keep the handle open, closing it (or this process ending, however it
    ends) frees the lock; or ``(None, holder)`` when another make run holds it, ``holder`` saying which
    (its pid and web address). An advisory ``flock``, not a pid file: nothing stale is left behind by a
    make run that was killed.
    """
    data.mkdir(parents=True, exist_ok=True)
    handle = open(data / RUN_LOCK, "a+")  # not inherited by the children (Python's files are close-on-exec)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another make run"
        handle.close()
        return None, holder
    handle.seek(0)
    handle.truncate()
    handle.write(f"make run pid {os.getpid()}, web on {web_url}\n")
    handle.flush()
    return handle, ""


def address_from_environment() -> tuple[str, int | None]:
    """``HOST`` and ``PORT`` as make run will use them, read without importing Colony's configuration
    (``config``, whose import starts the embedded database). A ``PORT`` that is no port number gives
    None: the configuration, read next, says what is wrong with it."""
    host = os.environ.get("HOST", "").strip() or "127.0.0.1"
    try:
        port = int(os.environ.get("PORT", "").strip() or 8000)
    except ValueError:
        return host, None
    return host, port if 0 < port < 65536 else None


def metrics_of_earlier_runs_clear(data: Path) -> None:
    """Empty the metrics folder (``PROMETHEUS_MULTIPROC_DIR``) when it is in this data folder, as it is by
    default: a scrape adds up every process's file, and without this ``/metrics`` counted every request
    since the folder was made (earlier runs, test runs, commands). The data folder's lock, held here,
    means no other make run writes there; a folder elsewhere may be shared, and is left as it is."""
    from core.metrics import metrics_files_clear

    folder = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or data / "metrics")
    if folder.resolve().is_relative_to(data.resolve()):
        metrics_files_clear(folder)


def _interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt  # as Ctrl-C does: the running start-up step is killed, the database stopped


def main() -> int:
    # Until the supervisor takes over, SIGTERM and SIGHUP stop the start-up as Ctrl-C does; their default
    # action would end this process alone and leave the embedded database (and a step) running.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    os.chdir(BASE_DIR)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    env = dict(os.environ)
    embedded = not env.get("DATABASE_URL")
    python = sys.executable
    from django.core.exceptions import ImproperlyConfigured

    from runtime import embedded_db

    # The checks come before Colony's configuration is imported: importing it reads the settings, and
    # with them starts the embedded database.
    host, port = address_from_environment()
    data = embedded_db.data_dir()
    try:
        held, holder = hold_data_folder(data, f"http://{host}:{port}/")
    except OSError:  # a folder that can't be written: reading the settings below says what to fix
        held, holder = None, ""
    if holder:
        say(
            f"Colony is already running from the data folder {data} ({holder}). Stop that one first "
            "(Ctrl-C in its terminal), or give this one a data folder of its own: "
            "COLONY_DATA_DIR=<folder> PORT=<another port> make run."
        )
        return 1
    # Checked before anything starts: the web would otherwise fail to bind and be restarted forever.
    if port is not None and port_in_use(host, port):
        say(
            f"port {port} on {host} is already in use. Is Colony still running from an earlier make run "
            "(pgrep -af runtime.serve)? Stop it, or start this one with PORT=<another port>."
        )
        return 1
    if embedded:
        say(f"starting embedded PostgreSQL in {embedded_db.pgdata_dir()} ...")
    try:
        try:
            # Reading the settings validates every variable and starts the embedded database if needed.
            from django.conf import settings

            from config.env import env as setting

            host, port = setting("HOST", "127.0.0.1"), setting("PORT", 8000)
            say(f"database: {settings.DATABASES['default']['HOST']} / {settings.DATABASES['default']['NAME']}")
            if embedded:
                # The processes connect to this server; none of them starts or stops it themselves.
                env["DATABASE_URL"] = settings.DATABASE_URL
        except ImproperlyConfigured as exc:  # config.env.ImproperSetting: says what to fix
            say(str(exc))
            return 2
        except RuntimeError as exc:  # the embedded server could not start; its message says why
            say(str(exc))
            return 1
        # Decide the broker once, so web, worker and beat agree.
        probe = subprocess.run(  # noqa: S603 - fixed argv: this Python and manage.py
            [python, "-c", "from config.celery import app; print(app.colony_broker_description)"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        description = probe.stdout.strip().splitlines()[-1]
        env["COLONY_BROKER"] = "redis" if description.startswith("redis") else "filesystem"
        say(f"broker: {description}")
        metrics_of_earlier_runs_clear(data)
        subprocess.run([python, "manage.py", "migrate", "--no-input"], env=env, check=True)  # noqa: S603 - fixed argv: this Python and manage.py
        subprocess.run([python, "manage.py", "colony_bootstrap"], env=env, check=True)  # noqa: S603 - fixed argv: this Python and manage.py
        subprocess.run([python, "manage.py", "collectstatic", "--no-input", "-v", "0"], env=env, check=True)  # noqa: S603 - fixed argv: this Python and manage.py
        env["PORT"] = str(port)
        say(f"web: http://127.0.0.1:{port}/  admin: /admin/  API docs: /api/docs/  (Ctrl-C stops everything)")
        if not settings.DEBUG:
            say(
                "DEBUG is off (Django's debug pages show the settings); DEBUG=true make run turns it on for development"
            )
        from runtime.supervisor import STOP_SIGNALS, Supervisor, Watch, read_procfile

        watches = []
        if embedded:
            watches.append(
                Watch(
                    "embedded PostgreSQL", ended=embedded_db.ended_without_stopping, restart=embedded_db.ensure_running
                )
            )
        supervisor = Supervisor(read_procfile(BASE_DIR / "Procfile"), env=env, cwd=BASE_DIR, watches=watches)
        # Every process runs in its own session: Ctrl-C, or the terminal closing, reaches only us, and
        # we stop them in order.
        previous = {sig: signal.signal(sig, supervisor.request_stop) for sig in STOP_SIGNALS}
        try:
            return supervisor.run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    except subprocess.CalledProcessError as exc:
        say(f"start-up step failed: {' '.join(map(str, exc.cmd))} (exit {exc.returncode}); see the output above.")
        return exc.returncode or 1
    except KeyboardInterrupt:
        say("stopped while starting.")
        return 130
    finally:
        if embedded and embedded_db.started_here:
            say("stopping embedded PostgreSQL ...")
            embedded_db.stop()
            say("stopped.")
        elif embedded and embedded_db.is_running():
            # Someone else started it (a test run, a benchmark, `python -m runtime.embedded_db start`, or a
            # make run that was killed) and may still be using it.
            say(
                "leaving the embedded PostgreSQL running: it was running before this make run started. "
                f"Stop it with: {python} -m runtime.embedded_db stop"
            )
        if held is not None:
            held.close()  # only now may the next make run start: this one has stopped everything


if __name__ == "__main__":
    sys.exit(main())
