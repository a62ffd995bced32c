"""Create and drop whole databases on a PostgreSQL server (benchmarks, scratch databases in tests).

Each takes a database URL; the statements run on that server's ``postgres`` database.
"""

from __future__ import annotations

from urllib.parse import urlparse, urlunparse


def _admin_url(url: str) -> tuple[str, str]:
    """(the server's ``postgres`` database URL, the database name) for ``url``."""
    parsed = urlparse(url)
    return urlunparse(parsed._replace(path="/postgres")), parsed.path.lstrip("/")


def ensure_database(url: str, *, fresh: bool = False) -> None:
    """Create the database ``url`` names unless it exists; with ``fresh``, drop it first (closing
    whatever is connected to it)."""
    import psycopg

    if fresh:
        drop_database(url)
    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    """Drop the database ``url`` names, if it exists (closing whatever is connected to it)."""
    import psycopg

    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
