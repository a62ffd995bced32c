"""Attacks on the stdio MCP bridge (contrib/colony_mcp_stdio.py) and the management commands, the
transfer import of a hostile dump included. Each test names the hole and what should happen instead."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from brain.models import QueryLog, Thought
from core import services
from core.models import Agent, AgentToken, UrlToken
from tests.test_brain_transfer_cli import SEED_QUERY_LOG_TABLE

BRIDGE = Path(settings.BASE_DIR) / "contrib" / "colony_mcp_stdio.py"
LONG_STATEMENT = "The deploy pipeline runs database migrations before it restarts the workers."


# --- the stdio bridge -----------------------------------------------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    seen: list[dict] = []
    location = ""

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        type(self).seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers)})
        if self.location:
            self.send_response(302)
            self.send_header("Location", self.location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": "from another host"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args):  # quiet
        pass


def _serve(host: str, location: str = ""):
    handler = type("Handler", (_Recorder,), {"seen": [], "location": location})
    server = ThreadingHTTPServer((host, 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler


def test_stdio_bridge_does_not_send_the_token_to_the_host_a_redirect_names():
    """Attack: COLONY_URL answers /mcp with ``302 Location: http://<another host>/...`` (a hijacked or
    misconfigured front proxy, an http->https hop on a shared host). urllib follows it and copies every
    header, ``Authorization: Bearer col_...`` included, to the other host, which also gets to answer
    the agent as if it were Colony. SPEC 6: the token fixes the agent's identity, so it must go to
    COLONY_URL only; Colony's /mcp never redirects, so the bridge should not follow (or at least drop
    Authorization on a change of origin) and answer the call with a JSON-RPC error."""
    thief, stolen = _serve("127.0.0.2")
    colony, _ = _serve("127.0.0.1", location=f"http://127.0.0.2:{thief.server_port}/mcp")
    token = "col_" + "s3cr3tTokenValue" * 2
    process = subprocess.Popen(
        [sys.executable, str(BRIDGE)],
        env={"COLONY_URL": f"http://127.0.0.1:{colony.server_port}", "COLONY_TOKEN": token, "PATH": "/usr/bin:/bin"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, _err = process.communicate(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + "\n", timeout=30)
    finally:
        thief.shutdown()
        colony.shutdown()
    leaked = [seen for seen in stolen.seen if token in json.dumps(seen["headers"])]
    assert leaked == [], "the bridge sent the agent's bearer token to the host the redirect named"
    answer = json.loads(out.splitlines()[0])
    assert "error" in answer, answer  # another host's answer is not relayed as Colony's


# --- agent tokens -----------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("given", ["bobs-prefix", "colr_"])
def test_agent_revoke_name_only_revokes_that_agents_url_tokens(space, dev, given):
    """Attack: ``manage.py agent revoke dev-1 --token colr_...`` (the help: "revoke one token (--token
    PREFIX) or all tokens of an agent"). For a URL token the NAME is ignored: any agent's URL token of
    the space matching the prefix is revoked, and the bare prefix ``colr_`` revokes every URL token of
    every agent in the space (core/management/commands/agent.py _revoke -> url_token_revoke). It should
    revoke only NAME's URL tokens and refuse (CommandError) when none of NAME's matches."""
    bob, _ = services.agent_create(name="bob", role="dev", space=space)
    bobs, raw = services.url_token_create(agent=bob, days=7, label="chat", created_by="test")
    prefix = raw[:12] if given == "bobs-prefix" else given
    try:
        call_command("agent", "revoke", "dev-1", "--token", prefix)
    except CommandError:
        pass
    bobs.refresh_from_db()
    assert bobs.revoked_at is None, "revoking dev-1's URL token revoked bob's"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args",
    [
        ("agent", "create", "a" * 101, "--role", "dev"),
        ("agent", "token", "dev-1", "--label", "l" * 101),
        ("agent", "url-token", "dev-1", "--label", "l" * 101),
    ],
    ids=["create-long-name", "token-long-label", "url-token-long-label"],
)
def test_agent_values_past_their_columns_are_a_command_error(dev, args):
    """Attack: a name or label longer than its column (Agent.name, *Token.label: 100 characters). The
    database refuses it and the operator gets a DataError traceback (SPEC 6: bad input never a
    traceback). It should be a CommandError naming the limit, with nothing created."""
    before = (Agent.objects.count(), AgentToken.objects.count(), UrlToken.objects.count())
    with pytest.raises(CommandError):
        call_command(*args)
    assert (Agent.objects.count(), AgentToken.objects.count(), UrlToken.objects.count()) == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args",
    [
        ("agent", "create", "dev-\udcff", "--role", "dev"),
        ("brain", "query", "what about deploys", "--agent", "dev-\udcff"),
        ("task", "get", "slug-\udcff"),
        ("quality", "report", "--agent", "dev-\udcff"),
    ],
    ids=["agent-create", "brain-query-agent", "task-get", "quality-report-agent"],
)
def test_an_argument_that_is_not_utf8_is_a_command_error(dev, args):
    """Attack: an argument with a byte that is not UTF-8 (``$'\\xff'``, a Latin-1 terminal); Python hands
    it over as a lone surrogate (surrogateescape) and psycopg's UnicodeEncodeError ends the command in a
    traceback. SPEC 6: bad input never a traceback; it should be a CommandError ("not UTF-8")."""
    with pytest.raises(CommandError):
        call_command(*args)


# --- brain / task commands --------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("limit", ["-1", "99999999999999999999"])
def test_brain_highways_with_an_impossible_limit_is_a_command_error(space, limit):
    """Attack: ``manage.py brain highways --limit -1`` (ValueError "Negative indexing is not supported")
    or ``--limit 99999999999999999999`` (DataError: bigint out of range): a traceback. SPEC 6: bad input
    never a traceback; it should be a CommandError saying the limit's range."""
    with pytest.raises(CommandError):
        call_command("brain", "highways", "--limit", limit)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args",
    [
        ("brain", "contribute", LONG_STATEMENT, "--agent", "dev-1", "--source-ref", "[" * 5000),
        ("task", "create", "--project", "p", "--slug", "s", "--title", "t", "--dna", "[" * 5000),
    ],
    ids=["brain-contribute-source-ref", "task-create-dna"],
)
def test_json_arguments_nested_too_deep_are_a_command_error(dev, fake_embedder, args):
    """Attack: a JSON argument nested past Python's recursion limit (``--dna '[[[[...'``). json.loads
    raises RecursionError, which neither _json_object (tasks/management/commands/task.py) nor _source_ref
    (brain/management/commands/brain.py) catches: a traceback. SPEC 6: bad input never a traceback; it
    should be the CommandError "Not valid JSON" (api.parsers.json_loads_bounded reads it as JSONTooDeep)."""
    with pytest.raises(CommandError):
        call_command(*args)


@pytest.mark.django_db
@pytest.mark.parametrize("checkpoint", ['{"after": "0f0e', "[1, 2]"], ids=["cut-short", "not-an-object"])
def test_reembed_all_survives_a_broken_checkpoint(settings, tmp_path, checkpoint):
    """Attack: the checkpoint ``$COLONY_DATA_DIR/reembed-all.json`` is cut short (write_text is not atomic:
    a kill mid-write) or is not an object. ``reembed --all`` then dies with JSONDecodeError /
    AttributeError on every run until someone finds and deletes the file. It should start over (or say
    so in a CommandError), never a traceback (SPEC 6)."""
    from brain.management.commands.reembed import checkpoint_path

    settings.COLONY_DATA_DIR = tmp_path
    checkpoint_path().write_text(checkpoint)
    try:
        call_command("reembed", "--all")
    except CommandError:
        pass


# --- brain export / import --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_brain_export_does_not_write_through_a_planted_partial_symlink(space, thought_factory, tmp_path):
    """Attack: whoever can write to the export directory (an agent's workspace the operator exports into)
    plants ``out.jsonl.partial`` as a symlink to a file of the operator's (~/.bashrc, authorized_keys).
    ``brain export out.jsonl`` opens the .partial with open("w"), follows the link and overwrites the
    target with the brain (brain/transfer/cli.py Export.run). The partial file should be created anew
    (O_CREAT|O_EXCL / tempfile.mkstemp in the directory), never through an existing link."""
    thought_factory("Exports are written beside the file and renamed when complete.")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "out.jsonl.partial").symlink_to(victim)
    try:
        call_command("brain", "export", str(tmp_path / "out.jsonl"), "--no-progress")
    except CommandError:
        pass
    assert victim.read_text() == "precious"


def _seed_query_log(db: Path) -> None:
    connection = sqlite3.connect(db)
    connection.execute(SEED_QUERY_LOG_TABLE)
    connection.execute(
        "INSERT INTO query_log VALUES "
        "('q1', 'dev-1', 'status?', NULL, NULL, '[]', 's9', '2026-02-26 10:00:00', 0, NULL)"
    )
    connection.commit()
    connection.close()


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["seed.db?x=1", "seed.db#1"])
def test_brain_import_query_log_reads_the_file_named_and_creates_none(space, tmp_path, fake_embedder, name):
    """Attack: a --query-log file whose name holds ``?`` or ``#`` (as the agent named the file it handed
    over). read_seed_query_log pastes the path into an SQLite URI (``file:{path}?mode=ro``,
    brain/transfer/readers.py): SQLite opens the file named by the part before the ``?``/``#``, and the
    ``mode=ro`` falls into the ignored tail, so a different file is opened read-write-create (an empty
    ``seed.db`` appears; an existing one is read instead of the named file). The file named should be
    read, read-only (``Path.resolve().as_uri() + "?mode=ro"`` percent-encodes the path)."""
    points = tmp_path / "points.json"
    points.write_text(json.dumps([{"id": str(uuid.uuid4()), "payload": {"content": "Status is monitored."}}]))
    db = tmp_path / name
    _seed_query_log(db)
    try:
        call_command("brain", "import", str(points), "--query-log", str(db), "--no-progress")
    except CommandError as exc:
        pytest.fail(f"the named query log was not read: {exc}")
    finally:
        created = sorted(p.name for p in tmp_path.iterdir() if p.name not in (name, "points.json"))
    assert created == [], f"the import created {created}"
    assert QueryLog.objects.filter(space=space, session_id="s9").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("metadata", [[1, 2], 5, True], ids=["list", "number", "bool"])
def test_a_seed_point_whose_context_metadata_is_not_an_object_is_reported_by_item(space, tmp_path, metadata):
    """Attack: a seed-brain dump (an agent hands the operator "its Qdrant points") whose payload's
    context_metadata is a list or a number. _seed_points does ``dict(metadata or {})``
    (brain/transfer/readers.py) and the import ends in a TypeError traceback instead of naming the item.
    SPEC 6: bad input never a traceback, and changes nothing; it should be a CommandError naming item 1
    (or the value kept under context_metadata), with no thought stored from a refused file."""
    points = tmp_path / "points.json"
    point = {"id": str(uuid.uuid4()), "payload": {"content": "Status is monitored.", "context_metadata": metadata}}
    points.write_text(json.dumps([point]))
    try:
        call_command("brain", "import", str(points), "--no-progress")
    except CommandError as exc:
        assert "item 1" in str(exc)
        assert not Thought.objects.filter(space=space).exists()
