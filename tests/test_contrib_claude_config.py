"""contrib/claude: the Claude Code configuration the agents' guide hands out works as Claude Code reads it.

Claude Code reads hooks from settings.json and MCP servers from a project's ``.mcp.json`` (or
``claude mcp add``), not from settings.json: the snippet carried the MCP server in settings.json, where
an agent set up from it got the hooks and no tools.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from contrib import colony_hooks
from tests.test_mcp_server import in_session

pytestmark = pytest.mark.django_db(transaction=True)

CONTRIB = Path(__file__).resolve().parent.parent / "contrib"
HOOK_EVENTS = {"SessionStart", "UserPromptSubmit", "PreCompact", "Stop"}


def expand(text: str, env: dict[str, str]) -> str:
    """Claude Code's expansion in .mcp.json: ``${VAR}`` and ``${VAR:-default}``."""

    def value(match: re.Match) -> str:
        name, default = match.group(1), match.group(3)
        if name in env:
            return env[name]
        assert default is not None, f"${{{name}}} is not set and has no default"
        return default

    return re.sub(r"\$\{([A-Z_]+)(:-([^}]*))?\}", value, text)


def test_settings_holds_the_four_hooks_each_naming_a_script_and_an_argument_it_takes():
    settings = json.loads((CONTRIB / "claude" / "settings.json").read_text())
    assert "mcpServers" not in settings  # Claude Code does not read MCP servers from settings.json
    assert set(settings["env"]) == {"COLONY_URL", "COLONY_TOKEN"}
    assert set(settings["hooks"]) == HOOK_EVENTS
    for event, groups in settings["hooks"].items():
        (group,) = groups
        (hook,) = group["hooks"]
        argv = shlex.split(hook["command"])
        assert argv[0] == "python3" and hook["type"] == "command"
        script = CONTRIB / Path(argv[1]).name
        assert script.is_file(), hook["command"]
        if script.name == "colony_hooks.py":
            assert colony_hooks.HOOKS[argv[2]][0] == event
        else:
            assert (script.name, event) == ("colony_stop_hook.py", "Stop")


def test_the_mcp_file_connects_claude_codes_way(asgi_server, agent_factory):
    agent = agent_factory("dev")
    text = (CONTRIB / "claude" / "mcp.json").read_text()
    server = json.loads(expand(text, {"COLONY_URL": asgi_server.url, "COLONY_TOKEN": agent.token}))["mcpServers"][
        "colony"
    ]
    assert server["type"] == "http"
    assert server["url"] == f"{asgi_server.url}/mcp"
    assert json.loads(expand(text, {"COLONY_TOKEN": "t"}))["mcpServers"]["colony"]["url"] == "http://127.0.0.1:8000/mcp"

    async def body(session):
        return [tool.name for tool in (await session.list_tools()).tools]

    token = server["headers"]["Authorization"].removeprefix("Bearer ")
    assert "memory_search" in in_session(server["url"].removesuffix("/mcp"), token, body)
