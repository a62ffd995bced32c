"""ASGI entry point (``config.asgi:application``): Django for every path, the MCP server at ``/mcp``.

Serve it with an ASGI server, e.g. ``uvicorn config.asgi:application`` or gunicorn with uvicorn
workers; see ``colony_mcp.asgi`` for how ``/mcp`` is served (stateless Streamable HTTP, bearer auth).
"""

import os
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Django's views are synchronous: by default they are served through runtime.wsgi_bridge (a fixed pool
# of WEB_THREADS threads), which costs 2-4 ms less CPU per request than Django's own ASGI handler
# (docs/performance.md). WEB_DJANGO_ADAPTER=asgi switches back to that handler (for comparison).
#: Threads per web worker for Django's synchronous code: REST requests through the WSGI bridge, and the
#: MCP endpoint's token lookups and tool calls (colony_mcp.asgi), in one pool.
WEB_THREADS = int(os.environ.get("WEB_THREADS", "32"))
if os.environ.get("WEB_DJANGO_ADAPTER", "wsgi") == "asgi":
    from django.core.asgi import get_asgi_application

    django_application = get_asgi_application()
else:
    from django.core.wsgi import get_wsgi_application

    from runtime.wsgi_bridge import FREEZE_AFTER, WsgiBridge

    # More threads than database connections (DATABASE_POOL_SIZE, 8): while the database is down each
    # request waits up to DATABASE_CONNECT_TIMEOUT before its 503, and with only 8 threads the others
    # queued behind them (the fault soak's 503s took up to 8.4 s at 20 requests/s). Idle threads cost
    # nothing; the pool still bounds what reaches the database.
    django_application = WsgiBridge(get_wsgi_application(), threads=WEB_THREADS, freeze_after=FREEZE_AFTER)

from api.body_limit import BodyLimit  # noqa: E402
from colony_mcp.asgi import ColonyAsgi  # noqa: E402  (needs Django set up)


def make_application(django_app) -> BodyLimit:
    """Django and ``/mcp`` behind one router, every body bounded by its route's limit before anything
    reads it (``api.body_limit``). ``/mcp``'s synchronous work runs in the WSGI bridge's threads, or in a
    pool of as many when Django is served by its own ASGI handler."""
    executor = getattr(django_app, "executor", None) or ThreadPoolExecutor(WEB_THREADS, thread_name_prefix="mcp")
    return BodyLimit(ColonyAsgi(django_app, executor=executor))


application = make_application(django_application)
