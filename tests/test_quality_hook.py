"""contrib/colony_stop_hook.py: posts the turn, reads Claude Code transcripts, never blocks or fails."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from tests.asgi_support import proxy_env, recording_proxy

HOOK = Path(django_settings.BASE_DIR) / "contrib" / "colony_stop_hook.py"
# Python's own start-up and shutdown on a busy 2-core machine; a hook waiting for a hanging server
# would take its 30 seconds instead.
SLACK = 5.0
USED = str(uuid.uuid4())
CONTRA = str(uuid.uuid4())


class FakeColony:
    """A local HTTP server that records what the hook posts; ``mode`` chooses how it answers."""

    def __init__(self, mode: str = "accept"):
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
                if mode == "hang":
                    time.sleep(30)
                status = {"error": 500, "refuse": 400}.get(mode, 202)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                if mode == "refuse":
                    self.wfile.write(
                        b'{"error": {"code": "VALIDATION_ERROR", "message": "Invalid request. turn_id: no."}}'
                    )
                else:
                    self.wfile.write(b'{"status": "pending"}')

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    servers = []

    def start(mode: str = "accept") -> FakeColony:
        servers.append(FakeColony(mode))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def run_hook(*args: str, stdin: str = "", env: dict | None = None, timeout: float = 20):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("COLONY_")}
    full_env.update(env or {})
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(HOOK), *args], input=stdin, capture_output=True, text=True, env=full_env, timeout=timeout
    )
    return done, time.monotonic() - started


def write_transcript(path: Path, used: str = USED, contradicted: str = CONTRA) -> Path:
    entries = [
        {"type": "user", "uuid": "u-old", "message": {"role": "user", "content": "an earlier prompt"}},
        {"type": "assistant", "uuid": "a-old", "message": {"content": [{"type": "text", "text": "earlier answer"}]}},
        {"type": "user", "uuid": "u-meta", "isMeta": True, "message": {"content": "<command caveat>"}},
        {"type": "user", "uuid": "u-last", "message": {"content": [{"type": "text", "text": "Fix the CI job"}]}},
        {
            "type": "assistant",
            "uuid": "a1",
            "message": {
                "content": [
                    {"type": "text", "text": "Looking at the pipeline."},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": ".ci/run"}},
                ]
            },
        },
        {
            "type": "user",
            "uuid": "u-tool",
            "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "make test"}]},
        },
        {"type": "assistant", "uuid": "side", "isSidechain": True, "message": {"content": "subagent chatter"}},
        {
            "type": "assistant",
            "uuid": "a2",
            "message": {
                "content": [
                    {
                        "type": "text",
                        "text": f"CI uses Python 3.12, not 3.10. colony:used {used} colony:contradicted {contradicted}",
                    }
                ]
            },
        },
    ]
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n{partial line")
    return path


def test_claude_code_stop_hook_posts_the_last_turn(fake, tmp_path):
    server = fake()
    transcript = write_transcript(tmp_path / "transcript.jsonl")
    stdin = json.dumps({"session_id": "cc-session-1", "transcript_path": str(transcript), "hook_event_name": "Stop"})
    done, _ = run_hook(stdin=stdin, env={"COLONY_URL": server.url + "/", "COLONY_TOKEN": "col_secret"})
    assert done.returncode == 0 and done.stdout == ""
    [request] = server.requests
    assert request["path"] == "/api/v1/turns"
    assert request["headers"]["Authorization"] == "Bearer col_secret"
    assert request["body"] == {
        "session_id": "cc-session-1",
        "turn_id": "u-last",
        "user_prompt": "Fix the CI job",
        "assistant_response": "Looking at the pipeline.\n\n"
        f"CI uses Python 3.12, not 3.10. colony:used {USED} colony:contradicted {CONTRA}",
        "tool_calls": [{"name": "Read", "input": {"file_path": ".ci/run"}}],
        "used_ids": [USED],
        "contradicted_ids": [CONTRA],
    }


def test_a_proxy_in_the_environment_does_not_cut_off_a_local_colony(fake, tmp_path):
    """With HTTP_PROXY set (an agent sandbox, a company machine) and no NO_PROXY, urllib sent the turn for
    127.0.0.1 through the proxy, which can't reach the agent's machine: every turn was lost."""
    server = fake()
    stdin = json.dumps({"session_id": "cc", "transcript_path": str(write_transcript(tmp_path / "t.jsonl"))})
    with recording_proxy() as (proxy_url, seen):
        done, _ = run_hook(stdin=stdin, env={"COLONY_URL": server.url, "COLONY_TOKEN": "t", **proxy_env(proxy_url)})
    assert done.stderr == "" and seen == []
    assert [r["path"] for r in server.requests] == ["/api/v1/turns"]


def test_a_colony_url_without_a_scheme_is_read_as_http(fake, tmp_path):
    """COLONY_URL=127.0.0.1:8000 (as curl takes it): urllib refused it as an "unknown url type"; the turn was lost."""
    server = fake()
    stdin = json.dumps({"session_id": "cc", "transcript_path": str(write_transcript(tmp_path / "t.jsonl"))})
    done, _ = run_hook(stdin=stdin, env={"COLONY_URL": server.url.removeprefix("http://"), "COLONY_TOKEN": "t"})
    assert done.stderr == ""
    assert [r["path"] for r in server.requests] == ["/api/v1/turns"]


def test_a_token_read_with_its_line_end_works_and_a_broken_one_is_never_echoed(fake, tmp_path):
    """COLONY_TOKEN from a file with CRLF line ends kept its "\\r": http.client refused the header, the turn
    was lost and the hook's note quoted the whole token."""
    server = fake()
    stdin = json.dumps({"session_id": "cc", "transcript_path": str(write_transcript(tmp_path / "t.jsonl"))})
    done, _ = run_hook(stdin=stdin, env={"COLONY_URL": server.url, "COLONY_TOKEN": "col_secret\r\n"})
    assert done.stderr == ""
    assert server.requests[0]["headers"]["Authorization"] == "Bearer col_secret"
    done, _ = run_hook(stdin=stdin, env={"COLONY_URL": server.url, "COLONY_TOKEN": "col_se\ncret"})
    assert done.returncode == 0 and len(server.requests) == 1
    assert "COLONY_TOKEN is not one token" in done.stderr and "cret" not in done.stderr, done.stderr


def test_session_id_from_the_environment_wins(fake, tmp_path):
    server = fake()
    stdin = json.dumps({"session_id": "cc", "transcript_path": str(write_transcript(tmp_path / "t.jsonl"))})
    run_hook(stdin=stdin, env={"COLONY_URL": server.url, "COLONY_TOKEN": "t", "COLONY_SESSION_ID": "colony-s"})
    assert server.requests[0]["body"]["session_id"] == "colony-s"


def test_generic_json_and_arguments(fake):
    server = fake()
    generic = {
        "session_id": "s1",
        "turn_id": "42",
        "user_prompt": "p",
        "assistant_response": "r",
        "tool_calls": [{"name": "Bash"}],
        "used_ids": [USED],
        "injected_ids": [USED, CONTRA],
    }
    env = {"COLONY_URL": server.url, "COLONY_TOKEN": "t"}
    assert run_hook(stdin=json.dumps(generic), env=env)[0].returncode == 0
    assert server.requests[0]["body"] == generic
    done, _ = run_hook("--prompt", "p2", "--response", "r2", "--session-id", "s2", "--contradicted", CONTRA, env=env)
    assert done.returncode == 0
    body = server.requests[1]["body"]
    assert (body["session_id"], body["user_prompt"], body["contradicted_ids"]) == ("s2", "p2", [CONTRA])
    assert len(body["turn_id"]) == 32  # derived from the text: the same turn posted twice has the same id
    run_hook("--prompt", "p2", "--response", "r2", "--session-id", "s2", env=env)
    assert server.requests[2]["body"]["turn_id"] == body["turn_id"]


def test_unreachable_colony_exits_0_fast():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done, elapsed = run_hook(
        "--prompt", "p", "--response", "r", env={"COLONY_URL": f"http://127.0.0.1:{port}", "COLONY_TOKEN": "t"}
    )
    assert done.returncode == 0 and done.stdout == ""
    assert "could not reach Colony" in done.stderr
    assert "gave up" not in done.stderr  # refused at once, not abandoned at the timeout
    assert elapsed < 3 + SLACK


def test_a_hanging_colony_is_abandoned_at_the_timeout(fake):
    server = fake("hang")
    done, elapsed = run_hook(
        "--prompt",
        "p",
        "--response",
        "r",
        env={"COLONY_URL": server.url, "COLONY_TOKEN": "t", "COLONY_HOOK_TIMEOUT": "1"},
    )
    # The server thread records the request on its own schedule; on a loaded machine that can
    # come after the hook has already given up, so wait for it rather than race it.
    deadline = time.monotonic() + 10
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert done.returncode == 0 and len(server.requests) == 1
    assert "gave up after 1s" in done.stderr
    assert elapsed < 1 + SLACK


def test_a_hanging_colony_reads_as_given_up_when_the_request_times_out_first(fake, monkeypatch, capsys):
    """The request's own timeout can fire just before the hook's deadline (a loaded machine): the
    hook must still say it gave up, not that Colony was unreachable (it was reached)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("colony_stop_hook_under_test", HOOK)
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    server = fake("hang")
    monkeypatch.setenv("COLONY_URL", server.url)
    monkeypatch.setenv("COLONY_TOKEN", "t")
    result: dict = {}
    hook.run(["--prompt", "p", "--response", "r"], 0.5, result)  # in this thread: the timeout always fires
    err = capsys.readouterr().err
    assert result == {} and "gave up after 0.5s" in err and "could not reach" not in err


@pytest.mark.parametrize(
    ("args", "stdin", "env", "message"),
    [
        ((), "{}", {}, "COLONY_URL and COLONY_TOKEN must be set"),
        ((), "not json at all", {"COLONY_URL": "http://x", "COLONY_TOKEN": "t"}, "stdin is not JSON"),
        ((), '{"transcript_path": "/nonexistent/t.jsonl"}', {"COLONY_URL": "http://x", "COLONY_TOKEN": "t"}, "error"),
        (("--used",), "", {"COLONY_URL": "http://x", "COLONY_TOKEN": "t"}, "error"),
    ],
)
def test_bad_input_never_fails_the_agent(args, stdin, env, message):
    done, elapsed = run_hook(*args, stdin=stdin, env=env)
    assert done.returncode == 0 and done.stdout == ""
    assert message in done.stderr
    assert elapsed < 3 + SLACK


def test_server_error_is_reported_not_raised(fake):
    server = fake("error")
    done, _ = run_hook("--prompt", "p", "--response", "r", env={"COLONY_URL": server.url, "COLONY_TOKEN": "t"})
    assert done.returncode == 0 and "Colony answered 500" in done.stderr


def test_a_refusal_is_reported_with_colonys_message(fake):
    """The body of a 400 was read once to look for unknown ids, and the note read it again: empty."""
    server = fake("refuse")
    done, _ = run_hook("--prompt", "p", "--response", "r", env={"COLONY_URL": server.url, "COLONY_TOKEN": "t"})
    assert done.returncode == 0 and done.stdout == ""
    assert "Colony answered 400: " in done.stderr and "turn_id: no." in done.stderr


def write_long_transcript(path: Path, prompt: str, answer: str, tool_calls: int = 1500) -> Path:
    """A turn of ``tool_calls`` Bash calls (the turns API takes 1,000), then ``answer``."""
    entries = [{"type": "user", "uuid": "u-long", "message": {"content": prompt}}]
    entries += [
        {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Bash", "input": {"n": i}}]}}
        for i in range(tool_calls)
    ]
    entries.append({"type": "assistant", "message": {"content": [{"type": "text", "text": answer}]}})
    path.write_text("\n".join(json.dumps(e) for e in entries))
    return path


def test_more_tool_calls_than_the_api_takes_are_capped(fake, tmp_path):
    server = fake()
    transcript = write_long_transcript(tmp_path / "long.jsonl", "run the whole migration", "done")
    stdin = json.dumps({"session_id": "s", "transcript_path": str(transcript)})
    run_hook(stdin=stdin, env={"COLONY_URL": server.url, "COLONY_TOKEN": "t"})
    calls = server.requests[0]["body"]["tool_calls"]
    assert len(calls) == 1000
    assert calls[:2] == [{"name": "Bash", "input": {"n": 0}}, {"name": "Bash", "input": {"n": 1}}]
    assert calls[-1] == {"omitted_tool_calls": 501}


def test_a_long_turn_is_sent_within_the_apis_body_limit(fake, tmp_path):
    """A 1 MB answer and a thousand 2,000-character tool inputs: the hook cuts them to what Colony keeps
    (TURN_TEXT_MAX_CHARS) with room to spare, so the turn fits MAX_REQUEST_BODY_KB instead of a 413."""
    server = fake()
    entries = [{"type": "user", "uuid": "u-big", "message": {"content": "p" * 100_000}}]
    entries += [
        {
            "type": "assistant",
            "message": {"content": [{"type": "tool_use", "name": "Edit", "input": {"s": "x" * 5000}}]},
        }
        for _ in range(1000)
    ]
    entries.append({"type": "assistant", "message": {"content": [{"type": "text", "text": "a" * 1_000_000}]}})
    transcript = tmp_path / "big.jsonl"
    transcript.write_text("\n".join(json.dumps(e) for e in entries))
    run_hook(
        stdin=json.dumps({"session_id": "s", "transcript_path": str(transcript)}),
        env={"COLONY_URL": server.url, "COLONY_TOKEN": "t"},
    )
    body = server.requests[0]["body"]
    assert len(json.dumps(body)) < 200 * 1024
    assert body["assistant_response"] == "a" * 16_000 and body["user_prompt"] == "p" * 16_000
    assert body["tool_calls"][-1]["omitted_tool_calls"] > 0 and body["tool_calls"][0]["name"] == "Edit"


@pytest.mark.django_db(transaction=True)
def test_a_long_turn_with_odd_bytes_is_logged_by_a_live_colony(live_server, agent_factory, settings, tmp_path):
    """1,500 tool calls (the API takes 1,000), a NUL and a lone surrogate: each was a 400, the turn lost."""
    from quality.models import TurnLog

    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.lexical_judge_factory"  # eager scoring in-process
    client = agent_factory("dev", name="long-runner")
    transcript = write_long_transcript(tmp_path / "long.jsonl", "migrate every table\u0000 \ud800now", "done\u0000.")
    stdin = json.dumps({"session_id": "long-session", "transcript_path": str(transcript)})
    done, _ = run_hook(stdin=stdin, env={"COLONY_URL": live_server.url, "COLONY_TOKEN": client.token})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    turn = TurnLog.objects.get()
    assert (turn.agent_name, turn.turn_id, turn.user_prompt, turn.assistant_response) == (
        "long-runner",
        "u-long",
        "migrate every table  ?now",
        "done .",
    )
    assert turn.tool_calls[0] == {"name": "Bash", "input": {"n": 0}}


@pytest.mark.django_db(transaction=True)
def test_against_a_live_colony(live_server, agent_factory, settings, tmp_path):
    """The real endpoint: the turn is logged with the agent of the token, then scored."""
    from brain.models import Thought
    from quality.models import TurnLog
    from tests.quality_support import make_query_log, make_thought

    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.lexical_judge_factory"  # eager scoring in-process
    client = agent_factory("dev", name="hooked")
    thought = make_thought(client.agent.space, "CI runs Python 3.10.")
    make_query_log(client.agent.space, "cc-session-1", [thought], agent=client.agent)
    # USED names no thought of this space: the hook sends the turn again without it
    transcript = write_transcript(tmp_path / "t.jsonl", used=USED, contradicted=str(thought.id))
    stdin = json.dumps({"session_id": "cc-session-1", "transcript_path": str(transcript)})
    done, _ = run_hook(stdin=stdin, env={"COLONY_URL": live_server.url, "COLONY_TOKEN": client.token})
    assert done.returncode == 0, done.stderr
    assert f"Colony does not know {USED}" in done.stderr
    turn = TurnLog.objects.get()
    assert (turn.agent_name, turn.turn_id, turn.user_prompt, turn.status) == (
        "hooked",
        "u-last",
        "Fix the CI job",
        "scored",
    )
    item = turn.items.get(thought=thought)
    assert item.explicit_contradicted is True and item.contradicted is True
    assert Thought.objects.get(pk=thought.pk).effective_confidence == pytest.approx(
        0.5
    )  # one agent: the single-agent floor


@pytest.mark.django_db(transaction=True)
def test_an_id_this_session_was_not_shown_does_not_lose_the_turn(live_server, agent_factory, settings, tmp_path):
    """Feedback may only name what a memory call of the session returned; an id the agent got elsewhere
    (another session, a listing) is dropped and the turn sent again, as for an unknown id."""
    from quality.models import TurnLog
    from tests.quality_support import make_query_log, make_thought

    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.lexical_judge_factory"
    client = agent_factory("dev", name="hooked")
    shown = make_thought(client.agent.space, "CI runs Python 3.10.")
    unseen = make_thought(client.agent.space, "The release branch is cut on Thursdays.")
    make_query_log(client.agent.space, "cc-session-2", [shown], agent=client.agent)
    transcript = write_transcript(tmp_path / "t.jsonl", used=str(unseen.id), contradicted=str(shown.id))
    stdin = json.dumps({"session_id": "cc-session-2", "transcript_path": str(transcript)})
    done, _ = run_hook(stdin=stdin, env={"COLONY_URL": live_server.url, "COLONY_TOKEN": client.token})
    assert done.returncode == 0, done.stderr
    assert f"not shown to this session, or named by a source it read: {unseen.id}" in done.stderr
    turn = TurnLog.objects.get()
    assert [item.thought_id for item in turn.items.all()] == [shown.id]


def test_a_prompt_holding_a_line_separator_is_the_turns_prompt(fake, tmp_path):
    """Claude Code writes U+2028 / U+2029 / U+0085 unescaped inside a transcript line (Node's JSON.stringify):
    str.splitlines() broke that line, the prompt was dropped, and the turn began at the prompt before it."""
    server = fake()
    transcript = tmp_path / "transcript.jsonl"
    prompt = "Apply the runbook step\u2028pasted from the PDF\u0085and report back"
    entries = [
        {"type": "user", "uuid": "u-old", "message": {"role": "user", "content": "an earlier prompt"}},
        {"type": "assistant", "uuid": "a-old", "message": {"content": [{"type": "text", "text": "earlier answer"}]}},
        {"type": "user", "uuid": "u-last", "message": {"content": [{"type": "text", "text": prompt}]}},
        {"type": "assistant", "uuid": "a1", "message": {"content": [{"type": "text", "text": "Done\u2029twice."}]}},
    ]
    transcript.write_text("\n".join(json.dumps(e, ensure_ascii=False) for e in entries) + "\n", encoding="utf-8")
    stdin = json.dumps({"session_id": "cc-session-1", "transcript_path": str(transcript), "hook_event_name": "Stop"})
    done, _ = run_hook(stdin=stdin, env={"COLONY_URL": server.url, "COLONY_TOKEN": "col_secret"})
    assert done.returncode == 0, done.stderr
    [request] = server.requests
    assert (request["body"]["turn_id"], request["body"]["user_prompt"]) == ("u-last", prompt)
    assert request["body"]["assistant_response"] == "Done\u2029twice."


def test_a_non_ascii_turn_survives_a_windows_code_page(fake, tmp_path):
    """On Windows a text stdin is decoded in the ANSI code page (cp1252; PYTHONIOENCODING stands in for it)
    and select() takes only sockets: the turn's prompt arrived mangled, or the hook failed before sending."""
    server = fake()
    folder = tmp_path / "Јосиф 项目"  # a user's folder name in the transcript path
    folder.mkdir()
    transcript = write_transcript(folder / "transcript.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLONY_")}
    env.update(COLONY_URL=server.url, COLONY_TOKEN="col_secret", PYTHONIOENCODING="cp1252")
    for stdin, prompt in (
        ({"session_id": "s1", "transcript_path": str(transcript)}, "Fix the CI job"),
        (
            {"session_id": "s2", "user_prompt": "Что сломалось в CI? 为什么", "assistant_response": "Шаг миграции."},
            None,
        ),
    ):
        done = subprocess.run(
            [sys.executable, str(HOOK)],
            input=json.dumps(stdin, ensure_ascii=False).encode(),
            capture_output=True,
            env=env,
            timeout=30,
        )
        assert done.returncode == 0 and done.stderr == b"", done.stderr
        assert server.requests[-1]["body"]["user_prompt"] == (prompt or stdin["user_prompt"])
    assert server.requests[-1]["body"]["assistant_response"] == "Шаг миграции."
