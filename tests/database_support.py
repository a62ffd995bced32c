"""Scratch databases on the embedded PostgreSQL server, for tests that need a database without
Colony's tables (the test database itself always has them)."""

from __future__ import annotations

from urllib.parse import urlparse, urlunparse

import psycopg


def server_url(database: str) -> str:
    """``database`` on the embedded server (started if it is not running)."""
    from runtime import embedded_db

    embedded_db.ensure_running()
    return embedded_db.url(database)


def _admin(url: str) -> tuple[str, str]:
    parsed = urlparse(url)
    return urlunparse(parsed._replace(path="/postgres")), parsed.path.lstrip("/")


def drop_database(url: str) -> None:
    """Drop the database ``url`` names, if it exists, closing whatever is connected to it."""
    admin, name = _admin(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def ensure_database(url: str, *, fresh: bool = False) -> None:
    """Create the database ``url`` names unless it exists; with ``fresh``, drop it first."""
    if fresh:
        drop_database(url)
    admin, name = _admin(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
