"""The benchmark database: ``colony_bench`` next to Colony's own, created and migrated on demand.

Call :func:`setup` before anything imports Django models.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse, urlunparse

BENCH_DATABASE = "colony_bench"


def bench_url(database: str = BENCH_DATABASE, *, env: str = "BENCH_DATABASE_URL") -> str:
    """The URL in ``$env`` as given; else ``database`` on DATABASE_URL's server; else ``database`` on
    the embedded server (started if it is not running)."""
    if os.environ.get(env):
        return os.environ[env]
    if os.environ.get("DATABASE_URL"):
        parsed = urlparse(os.environ["DATABASE_URL"])
        return urlunparse(parsed._replace(path=f"/{database}"))
    from core import embedded_db

    embedded_db.ensure_running()
    return embedded_db.url(database)


def _admin_url(url: str) -> tuple[str, str]:
    """(the server's ``postgres`` database URL, the database name) for ``url``."""
    parsed = urlparse(url)
    return urlunparse(parsed._replace(path="/postgres")), parsed.path.lstrip("/")


def ensure_database(url: str, *, fresh: bool = False) -> None:
    """Create the database ``url`` names unless it exists; with ``fresh``, drop it first (closing
    whatever is connected to it). Every benchmark's database is made here."""
    import psycopg

    if fresh:
        drop_database(url)
    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def copy_database(url: str, copy: str) -> str:
    """Create ``copy`` from the database ``url`` names as its template (nothing may be connected to
    it); returns the copy's URL."""
    import psycopg

    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            raise SystemExit(f"There is no database {name}: make it first (e.g. `python -m benchmarks.compare`).")
        conn.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{name}"')
    return urlunparse(urlparse(url)._replace(path=f"/{copy}"))


def drop_database(url: str) -> None:
    """Drop the database ``url`` names, if it exists (closing whatever is connected to it)."""
    import psycopg

    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def use_database(url: str) -> None:
    """Point Django at ``url``, set it up and migrate. Call before anything imports Django models."""
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def setup() -> str:
    """Point Django at the benchmark database, create and migrate it; returns its URL."""
    url = bench_url()
    ensure_database(url)
    use_database(url)
    return url
