"""ASGI entry point (``config.asgi:application``): Django for every path, the MCP server at ``/mcp``.

Serve it with an ASGI server, e.g. ``uvicorn config.asgi:application`` or gunicorn with uvicorn
workers; see ``colony_mcp.asgi`` for how ``/mcp`` is served (stateless Streamable HTTP, bearer auth).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_asgi_application()

from colony_mcp.asgi import ColonyAsgi  # noqa: E402  (needs Django set up)

application = ColonyAsgi(django_application)
