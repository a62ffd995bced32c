"""``make production-check``: Colony in its production shape, checked end to end.

    python -m benchmarks.production_check [--soak-duration 90] [--rate 50] [--skip-tests] [--skip-soak]

1. A PostgreSQL started as its own server over TCP (the embedded wheel on 127.0.0.1:5441) and a
   redis-server of its own (6391): the suite's integration tests (real Celery workers, the supervisor,
   uvicorn, the database outage) run against them with ``DATABASE_URL``/``REDIS_URL`` set and
   ``COLONY_BROKER=redis``.
2. ``benchmarks.soak`` at a short duration with every fault against the full stack it starts
   (PostgreSQL :5440 over TCP, Redis :6390, uvicorn with several workers, two Celery workers, beat).
Exit code 0 only when both pass.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from tests.standalone import PgServer, RedisServer

BASE_DIR = Path(__file__).resolve().parent.parent


def say(message: str) -> None:
    print(f"[production-check] {message}", flush=True)


def integration_tests(folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    pg = PgServer(folder / "pg", 5441)
    redis = RedisServer(folder / "redis", 6391)
    say("starting PostgreSQL on 127.0.0.1:5441 (TCP) and redis-server on 6391 ...")
    pg.start()
    redis.start()
    try:
        env = {
            **os.environ,
            "DATABASE_URL": pg.url(),
            "REDIS_URL": redis.url(),
            "COLONY_BROKER": "redis",
            "COLONY_DATA_DIR": str(folder / "data"),
            "DEBUG": "false",
            "SECRET_KEY": "production-check-" + "x" * 40,
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        }
        command = [sys.executable, "-m", "pytest", "tests/integration", "-q", "-p", "no:randomly", "--create-db"]
        say(f"integration tests against it: DATABASE_URL={pg.url()} REDIS_URL={redis.url()} {' '.join(command[1:])}")
        return subprocess.run(command, cwd=BASE_DIR, env=env).returncode
    finally:
        redis.stop()
        pg.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Colony's production shape, checked end to end.")
    parser.add_argument("--soak-duration", type=float, default=90)
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--skip-soak", action="store_true")
    parser.add_argument("--folder", default=str(BASE_DIR / "var" / "production-check"))
    args = parser.parse_args(argv)
    results = {}
    if not args.skip_tests:
        results["integration tests"] = integration_tests(Path(args.folder))
    if not args.skip_soak:
        command = [
            sys.executable,
            "-m",
            "benchmarks.soak",
            "--duration",
            str(args.soak_duration),
            "--rate",
            str(args.rate),
            "--fault-worker",
            "--fault-postgres",
            "--fault-redis",
            "--redis-down",
            str(min(30, args.soak_duration / 4)),
        ]
        say(f"soak with faults: {' '.join(command[1:])}")
        results["soak with faults"] = subprocess.run(command, cwd=BASE_DIR).returncode
    for name, code in results.items():
        say(f"{name}: {'passed' if code == 0 else f'FAILED (exit {code})'}")
    return 0 if all(code == 0 for code in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
