"""What every benchmark starts from: its database (created, migrated, dropped here) and a space with
agents that call the API with real tokens.

Call :func:`use_bench_database` (or :func:`use_database`) before anything imports Django models.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse, urlunparse

from runtime.databases import ensure_database
from runtime.embedded_db import running_url

BENCH_DATABASE = "colony_bench"


def bench_url(database: str = BENCH_DATABASE, *, env: str = "BENCH_DATABASE_URL") -> str:
    """The URL in ``$env`` as given; else ``database`` on DATABASE_URL's server; else ``database`` on
    the embedded server (started if it is not running)."""
    if os.environ.get(env):
        return os.environ[env]
    if os.environ.get("DATABASE_URL"):
        parsed = urlparse(os.environ["DATABASE_URL"])
        return urlunparse(parsed._replace(path=f"/{database}"))
    return running_url(database)


def server_url(database: str) -> str:
    """``database`` on the server of ``$BENCH_DATABASE_URL``, else on the embedded server (started if it
    is not running). The side-by-side benchmarks use it so that they never land on DATABASE_URL's server."""
    if os.environ.get("BENCH_DATABASE_URL"):
        parsed = urlparse(os.environ["BENCH_DATABASE_URL"])
        return urlunparse(parsed._replace(path=f"/{database}"))
    return running_url(database)


def recreate_database(name: str) -> str:
    """A fresh, empty database ``name`` on :func:`server_url`'s server; returns its URL."""
    url = server_url(name)
    ensure_database(url, fresh=True)
    return url


def use_database(url: str) -> None:
    """Point Django at ``url``, set it up and migrate. Call before anything imports Django models."""
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def use_bench_database() -> str:
    """Point Django at the benchmark database, create and migrate it; returns its URL."""
    url = bench_url()
    ensure_database(url)
    use_database(url)
    return url


def bench_space(slug: str = "bench", name: str = "Benchmarks"):
    """The space ``slug``, created on first use."""
    from core.models import Space

    return Space.objects.get_or_create(slug=slug, defaults={"name": name})[0]


def agent_client(*, space, name: str, role: str = "dev", label: str = "benchmark"):
    """``(agent, token, client)``: the agent ``name`` of ``space`` (created on first use, else given a new
    token) and a DRF test client that sends its token on every request."""
    from rest_framework.test import APIClient

    from core import services
    from core.models import Agent

    agent = Agent.objects.filter(space=space, name=name).first()
    if agent is None:
        agent, token = services.agent_create(name=name, role=role, space=space, label=label)
    else:
        token = services.token_create(agent=agent, label=label)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return agent, token, client
