"""The benchmark database: ``colony_bench`` next to Colony's own, created and migrated on demand.

Call :func:`setup` before anything imports Django models.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse, urlunparse

BENCH_DATABASE = "colony_bench"


def _bench_url() -> str:
    """``BENCH_DATABASE_URL``, else the embedded server's (or DATABASE_URL's) server with colony_bench."""
    if os.environ.get("BENCH_DATABASE_URL"):
        return os.environ["BENCH_DATABASE_URL"]
    if os.environ.get("DATABASE_URL"):
        parsed = urlparse(os.environ["DATABASE_URL"])
        return urlunparse(parsed._replace(path=f"/{BENCH_DATABASE}"))
    from core import embedded_db

    embedded_db.ensure_running()
    return embedded_db.url(BENCH_DATABASE)


def _create_database(url: str) -> None:
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = urlunparse(parsed._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def setup() -> str:
    """Point Django at the benchmark database, create and migrate it; returns its URL."""
    url = _bench_url()
    _create_database(url)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return url
