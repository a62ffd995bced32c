"""ASGI entry point (``config.asgi:application``): Django for every path, the MCP server at ``/mcp``.

Serve it with an ASGI server, e.g. ``uvicorn config.asgi:application`` or gunicorn with uvicorn
workers; see ``colony_mcp.asgi`` for how ``/mcp`` is served (stateless Streamable HTTP, bearer auth).
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402

from runtime.wsgi_bridge import FREEZE_AFTER, WsgiBridge  # noqa: E402

# Django's views are synchronous: they are served through runtime.wsgi_bridge (a fixed pool of
# WEB_THREADS threads), which costs 2-4 ms less CPU per request than Django's own ASGI handler
# (docs/performance.md).
#: Threads per web worker for Django's synchronous code: REST requests through the WSGI bridge, and the
#: MCP endpoint's token lookups and tool calls (colony_mcp.asgi), in one pool. More threads than
#: database connections (DATABASE_POOL_SIZE, 8): while the database is down each request waits up to
#: DATABASE_CONNECT_TIMEOUT before its 503, and the others must not queue behind them. Idle threads
#: cost nothing; the connection pool still bounds what reaches the database.
WEB_THREADS = int(os.environ.get("WEB_THREADS", "32"))
django_application = WsgiBridge(get_wsgi_application(), threads=WEB_THREADS, freeze_after=FREEZE_AFTER)

from api.body_limit import BodyLimit  # noqa: E402
from colony_mcp.asgi import ColonyAsgi  # noqa: E402  (needs Django set up)


def make_application(django_app: WsgiBridge) -> BodyLimit:
    """Django and ``/mcp`` behind one router, every body bounded by its route's limit before anything
    reads it (``api.body_limit``). ``/mcp``'s synchronous work runs in the WSGI bridge's threads."""
    return BodyLimit(ColonyAsgi(django_app, executor=django_app.executor))


application = make_application(django_application)
