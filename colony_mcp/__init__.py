"""Colony's MCP server: the agent API as MCP tools over Streamable HTTP at ``/mcp`` (SPEC 5).

``server`` declares the tools, ``rest`` runs each tool call through the same DRF view the REST path
runs (so validation, services, selectors and error codes are one code path), ``asgi`` authenticates
``/mcp`` with the agent's bearer token and owns the session manager's lifespan.
"""
