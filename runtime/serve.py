"""The web process: uvicorn serving ``config.asgi`` (the Django app, through ``runtime.wsgi_bridge``'s
thread pool, and the MCP endpoint beside it) with several worker processes. ``make run`` starts it
(Procfile ``web``); in production run ``python -m runtime.serve`` behind a TLS proxy.

Settings: ``HOST`` (127.0.0.1), ``PORT`` (8000), ``WEB_WORKERS`` (2 x cores, at most 4, at least 2),
``WEB_TIMEOUT_KEEP_ALIVE`` (100 s). uvicorn's master process restarts a worker that dies.

The keep-alive timeout is longer than the idle expiry of common HTTP clients (httpx 5 s, aiohttp
15 s, Go 90 s), so an idle connection is closed by the client, never by the server under a request
the client is just sending: with uvicorn's default 5 s, a client reusing a connection (httpx: also
5 s) just as the server closes it gets "connection reset by peer". An idle connection costs the
server a socket only.

The access log goes through Python logging (logger ``uvicorn.access``, propagating to the root
handler Django's ``LOGGING`` configures in each worker), so the same filters apply to it as to
every other log line (e.g. the masking of ``token=`` query values).

Why uvicorn (``python -m benchmarks.memory_profile --servers`` prints the comparison;
docs/performance.md, "Web server and workers"): Django's views are synchronous, and under both ASGI
servers measured (uvicorn with uvloop + httptools, and granian) a memory GET costs the same within
noise, because the time is spent in Django and the embedding, not in the server. uvicorn is already
installed with the MCP SDK, logs through Python logging without an extra bridge, and its worker
supervisor restarts a killed worker.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
# uvicorn's httptools protocol with its own refusals (a URL over 64 KB, bytes that aren't HTTP) in the
# API's error envelope instead of plain text (runtime/http_protocol.py).
HTTP_PROTOCOL = "runtime.http_protocol:EnvelopeHttpToolsProtocol"


def default_workers() -> int:
    return max(2, min(4, 2 * (os.cpu_count() or 1)))


def batch_threads(workers: int) -> int:
    """Embedding threads per batch in a web worker: the cores shared out among the workers.

    A bulk client sends one import batch per worker at once; each batch on all cores would run twice as
    many ONNX threads as there are cores, beside PostgreSQL's inserts, and import fewer notes a second
    (docs/performance.md, "Embedding")."""
    return max(1, (os.cpu_count() or 1) // workers)


def server_options() -> dict:
    """uvicorn.run keyword arguments from the environment (read with Colony's typed reader)."""
    from config.env import env

    workers = env("WEB_WORKERS", default_workers(), min=1, max=256)
    forwarded = env("FORWARDED_ALLOW_IPS", "")
    return {
        "host": env("HOST", "127.0.0.1"),
        "port": env("PORT", 8000, min=0, max=65535),
        "workers": workers,
        "loop": "uvloop",
        "http": HTTP_PROTOCOL,
        # Django's ASGI handler answers http only; the lifespan protocol is used when the app
        # mounted in config.asgi supports it (e.g. the MCP session manager), skipped otherwise.
        "lifespan": "auto",
        # No uvicorn logging config: its loggers propagate to the root handler that Django's
        # LOGGING sets up in every worker, filters included.
        "log_config": None,
        "access_log": True,
        "timeout_keep_alive": env("WEB_TIMEOUT_KEEP_ALIVE", 100, min=1, max=3600),
        "timeout_graceful_shutdown": 10,
        # X-Forwarded-For and -Proto are read only from the proxies the operator names: trusted from
        # 127.0.0.1 by default, any process on this host (every agent under make run) could pick the
        # address the login throttle counts by.
        "proxy_headers": bool(forwarded),
        "forwarded_allow_ips": forwarded or None,
    }


def main() -> int:
    os.chdir(BASE_DIR)
    sys.path.insert(0, str(BASE_DIR))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # ASGI: a connection pool per worker, never persistent per-request connections (config/settings.py).
    os.environ.setdefault("DATABASE_POOL", "true")
    os.environ["COLONY_WEB_PROCESS"] = "1"  # config/celery.py: send jobs, never read results
    import logging

    import uvicorn
    from django.core.exceptions import ImproperlyConfigured

    try:
        options = server_options()
    except ImproperlyConfigured as exc:
        print(f"[colony] {exc}", file=sys.stderr, flush=True)
        return 2
    # Inherited by the workers (config.settings reads it); an explicit setting wins.
    os.environ.setdefault("EMBEDDING_BATCH_THREADS", str(batch_threads(options["workers"])))
    # The master process does not load Django; give its own messages (started, worker died,
    # restarting) a plain handler until the workers configure theirs.
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO"), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    uvicorn.run("config.asgi:application", **options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
