#!/usr/bin/env python3
"""Post a coding agent's finished turn to Colony's quality loop (POST /api/v1/turns).

Made to be a Claude Code ``Stop`` hook, usable by any agent runner. Standard library only.

It never gets in the agent's way: whatever happens (Colony down, slow, bad input, a bug here) it
exits 0 within ``COLONY_HOOK_TIMEOUT`` seconds and writes nothing to stdout (a Stop hook's stdout
can steer the agent); problems go to stderr as one line.

Input, first match wins:

1. Command-line: ``--prompt TEXT --response TEXT [--session-id ID] [--turn-id ID]
   [--used UUID ...] [--contradicted UUID ...] [--injected UUID ...]``.
2. JSON on stdin with ``transcript_path`` (what Claude Code gives a Stop hook): the last user
   prompt of the transcript and everything the assistant did after it (text and tool calls).
3. JSON on stdin with ``user_prompt`` and ``assistant_response`` (and optionally ``session_id``,
   ``turn_id``, ``tool_calls``, ``used_ids``, ``contradicted_ids``, ``injected_ids``): posted as is.

Explicit feedback: besides ``--used``/``--contradicted``, the agent may write
``colony:used <uuid>`` or ``colony:contradicted <uuid>`` (several ids separated by commas or
spaces) in its response, outside code blocks and quoted ("> ") lines, where it shows what it read; those
ids are sent as ``used_ids``/``contradicted_ids`` (the first
100 of each list). An id Colony refuses (unknown, not returned by a memory call of this session, or named
in the text of a source returned there, so the feedback may be copied from it) is
dropped and the turn sent again without it, until Colony takes the turn: a response that quotes a
source full of planted ids still logs the turn and the agent's own feedback.

Environment: ``COLONY_URL`` (e.g. http://127.0.0.1:8000), ``COLONY_TOKEN`` (the agent's token),
optional ``COLONY_SESSION_ID`` (the session id the agent passes to /api/v1/memory; default: the
runner's session id from stdin), ``COLONY_HOOK_TIMEOUT`` (seconds, default 3).
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import os
import re
import socket
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_TIMEOUT = 3.0
MAX_TRANSCRIPT_BYTES = 8 * 1024 * 1024  # only the tail of a huge transcript is read
MAX_TOOL_INPUT_CHARS = 2000
MAX_TOOL_CALLS = 1000  # the turns API's limit on tool_calls; more are refused (400) and the turn is lost
MAX_FEEDBACK_IDS = 100  # the turns API's limit on each of used_ids, contradicted_ids, injected_ids
#: Colony keeps TURN_TEXT_MAX_CHARS (default 8,000) of each text and of the tool calls' JSON; the hook sends
#: a little more than that, so a long turn stays under the API's body limit (MAX_REQUEST_BODY_KB, 256 KB).
MAX_TURN_TEXT_CHARS = 16_000
MAX_TOOL_CALLS_CHARS = 64_000
#: A read or connect that timed out (socket.timeout is TimeoutError only from Python 3.10).
TIMEOUTS = (TimeoutError, socket.timeout)
UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
FEEDBACK = re.compile(rf"colony:(used|contradicted)\s+((?:{UUID}(?:\s*,\s*|\s+)?)+)", re.IGNORECASE)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Colony answers its API where it is asked, never with a redirect: followed, one would carry the bearer
    token to the host it names and relay that host's answer as Colony's. A 3xx is an error instead."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


# urllib sends every http(s) URL through HTTP_PROXY / HTTPS_PROXY unless NO_PROXY names its host, and a
# proxy (a company's, an agent sandbox's) can't reach this machine's 127.0.0.1: a loopback Colony is
# called directly (with a proxy set and no NO_PROXY, every call to it would fail as "unreachable"), any
# other through the environment's proxies.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
_PROXIED = urllib.request.build_opener(_NoRedirect())


def urlopen(request: urllib.request.Request, timeout: float):
    host = urllib.parse.urlsplit(request.full_url).hostname or ""
    try:
        loopback = host == "localhost" or host.endswith(".localhost") or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return (_DIRECT if loopback else _PROXIED).open(request, timeout=timeout)


def token_problem(token: str) -> str | None:
    """Why COLONY_TOKEN can't go into an Authorization header, or None. http.client would refuse it with an
    error quoting the whole header, token included, into what the agent reads."""
    if token.isascii() and token.isprintable() and " " not in token:
        return None
    return (
        "COLONY_TOKEN is not one token: it holds a space, a line break or a non-ASCII character. Set it to the "
        "token alone, as manage.py agent create prints it."
    )


def base_url(raw: str) -> str:
    """COLONY_URL without a trailing slash, and with ``http://`` in front when it names no scheme
    (``localhost:8000``, as curl reads it): urllib would refuse it as an "unknown url type" on every call."""
    raw = raw.strip().rstrip("/")
    return raw if "://" in raw or not raw else "http://" + raw


def note(message: str) -> None:
    try:
        sys.stderr.write(f"colony hook: {message}\n")
        sys.stderr.flush()
    except Exception:  # noqa: S110 - stderr is gone; the hook never fails a turn
        pass


def read_stdin(deadline_seconds: float) -> str:
    """stdin as UTF-8 text, or "" when nothing has been sent (and closed) within the deadline. Bytes on a
    thread, not select() on text: select() takes only sockets on Windows, and a text stdin there is decoded
    in the ANSI code page (cp1252), which mangled a non-ASCII prompt or transcript path."""
    if sys.stdin is None or sys.stdin.isatty():
        return ""
    chunks: list[bytes] = []
    stream = getattr(sys.stdin, "buffer", None)  # None: a stdin replaced by text (in-process use)

    def read() -> None:
        try:
            chunks.append(stream.read() if stream is not None else sys.stdin.read().encode())
        except (OSError, ValueError) as exc:
            note(f"could not read stdin: {exc}")

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(deadline_seconds)
    return chunks[0].decode("utf-8", errors="replace") if chunks else ""


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _is_prompt(entry: dict) -> bool:
    if entry.get("type") != "user" or entry.get("isSidechain") or entry.get("isMeta"):
        return False
    content = (entry.get("message") or {}).get("content")
    if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return False
    return bool(_text_of(content).strip())


def turn_from_transcript(path: str) -> dict | None:
    """The last prompt of a Claude Code transcript (JSON Lines) and the assistant's work after it."""
    with open(os.path.expanduser(path), "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - MAX_TRANSCRIPT_BYTES))
        raw = handle.read(MAX_TRANSCRIPT_BYTES).decode("utf-8", errors="replace")  # a FIFO's size reads 0
    entries = []
    # "\n" only: str.splitlines() also breaks at U+2028, U+2029 and U+0085, which Claude Code (Node's
    # JSON.stringify) writes as they are inside a message; that entry, a prompt with a pasted line separator,
    # would be dropped and the turn would start at the prompt before it.
    for line in raw.split("\n"):
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a partial first line of the tail, or a line being written
        if isinstance(entry, dict):
            entries.append(entry)
    start = next((i for i in range(len(entries) - 1, -1, -1) if _is_prompt(entries[i])), None)
    if start is None:
        return None
    prompt_entry = entries[start]
    texts, tool_calls = [], []
    for entry in entries[start + 1 :]:
        if entry.get("type") != "assistant" or entry.get("isSidechain"):
            continue
        content = (entry.get("message") or {}).get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for block in content or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and block.get("text"):
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                tool_input = json.dumps(block.get("input", {}), ensure_ascii=False)
                if len(tool_input) > MAX_TOOL_INPUT_CHARS:
                    tool_input = tool_input[:MAX_TOOL_INPUT_CHARS] + "…"
                    tool_calls.append({"name": block.get("name"), "input_truncated": tool_input})
                else:
                    tool_calls.append({"name": block.get("name"), "input": block.get("input", {})})
    return {
        "turn_id": prompt_entry.get("uuid") or "",
        "user_prompt": _text_of((prompt_entry.get("message") or {}).get("content")),
        "assistant_response": "\n\n".join(texts),
        "tool_calls": tool_calls,
    }


def tool_calls_capped(tool_calls: list) -> list:
    """At most MAX_TOOL_CALLS, and at most MAX_TOOL_CALLS_CHARS of compact JSON: the first ones, the last
    entry saying how many were left out (the shape Colony's own truncation uses)."""
    kept, size = [], 0
    for call in tool_calls[: MAX_TOOL_CALLS - 1]:
        size += len(json.dumps(call, separators=(",", ":"), default=str))
        if size > MAX_TOOL_CALLS_CHARS:
            break
        kept.append(call)
    if len(kept) == len(tool_calls):
        return tool_calls
    return [*kept, {"omitted_tool_calls": len(tool_calls) - len(kept)}]


def json_clean(value):
    """The turn as the API accepts it: no NUL in any string (refused with 400) and no lone surrogate
    (not UTF-8), so a turn that printed a binary file's bytes is still logged."""
    if isinstance(value, str):
        return value.replace("\x00", " ").encode("utf-8", errors="replace").decode("utf-8")
    if isinstance(value, list):
        return [json_clean(item) for item in value]
    if isinstance(value, dict):
        return {json_clean(key): json_clean(item) for key, item in value.items()}
    return value


#: A fenced code block (``` or ~~~ to the same fence) and a quoted line ("> ..."): what the agent shows
#: of what it read, not what it says itself.
QUOTED = re.compile(r"^ {0,3}(```|~~~).*?(^ {0,3}\1[^\n]*$|\Z)|^ {0,3}>[^\n]*$", re.MULTILINE | re.DOTALL)


def feedback_from_text(text: str) -> dict[str, list[str]]:
    """The agent's own markers in its response: not those inside a code block or a quoted line, where the
    agent shows a file, a page or a message it read (a planted marker there is someone else's feedback)."""
    found: dict[str, list[str]] = {"used": [], "contradicted": []}
    for kind, ids in FEEDBACK.findall(QUOTED.sub(" ", text or "")):
        for thought_id in re.findall(UUID, ids):
            if thought_id.lower() not in found[kind.lower()]:
                found[kind.lower()].append(thought_id.lower())
    return found


def build_turn(args: argparse.Namespace, stdin_text: str) -> dict | None:
    hook_input: dict = {}
    if stdin_text.strip():
        try:
            parsed = json.loads(stdin_text)
            hook_input = parsed if isinstance(parsed, dict) else {}
        except ValueError:
            note("stdin is not JSON; ignored")
    if args.prompt is not None or args.response is not None:
        turn = {"user_prompt": args.prompt or "", "assistant_response": args.response or "", "tool_calls": []}
    elif hook_input.get("transcript_path"):
        turn = turn_from_transcript(hook_input["transcript_path"])
        if turn is None:
            note("no user prompt found in the transcript")
            return None
    elif "user_prompt" in hook_input or "assistant_response" in hook_input:
        turn = {
            key: hook_input[key]
            for key in ("turn_id", "user_prompt", "assistant_response", "tool_calls")
            if key in hook_input
        }
    else:
        note("no turn given (arguments or JSON on stdin)")
        return None
    turn.setdefault("user_prompt", "")
    turn.setdefault("assistant_response", "")
    turn["session_id"] = (
        args.session_id or os.environ.get("COLONY_SESSION_ID") or hook_input.get("session_id") or "default"
    )
    turn_id = args.turn_id or turn.get("turn_id")
    if not turn_id:  # stable for the same turn, so a hook firing twice is counted once
        digest = hashlib.sha256((turn["user_prompt"] + "\0" + turn["assistant_response"]).encode()).hexdigest()
        turn_id = digest[:32]
    turn["turn_id"] = str(turn_id)[:200]
    marked = feedback_from_text(turn["assistant_response"])
    for key, given in (("used_ids", args.used), ("contradicted_ids", args.contradicted)):
        ids = list(hook_input.get(key) or []) + list(given or []) + marked[key.split("_")[0]]
        if ids:
            turn[key] = list(dict.fromkeys(ids))[:MAX_FEEDBACK_IDS]
    injected = args.injected or hook_input.get("injected_ids")
    if injected is not None:
        turn["injected_ids"] = list(injected)[:MAX_FEEDBACK_IDS]
    if isinstance(turn.get("tool_calls"), list):
        turn["tool_calls"] = tool_calls_capped(turn["tool_calls"])
    for key in ("user_prompt", "assistant_response"):  # after the feedback markers were read from the whole text
        if isinstance(turn[key], str):
            turn[key] = turn[key][:MAX_TURN_TEXT_CHARS]
    return json_clean(turn)


def error_text(error: urllib.error.HTTPError) -> str:
    """The body of an error answer, read once (a second read() of it gives b"")."""
    if not hasattr(error, "colony_text"):
        error.colony_text = error.read(100_000).decode("utf-8", errors="replace")
    return error.colony_text


#: Why Colony refused ids of a turn, by error code: unknown (or another space's) ids (404 UNKNOWN_THOUGHT),
#: and ids no memory call of this session returned or that a source returned there names in its text (400
#: VALIDATION_ERROR naming ``ids``).
REFUSED_IDS = {
    "UNKNOWN_THOUGHT": "Colony does not know",
    "VALIDATION_ERROR": "not shown to this session, or named by a source it read:",
}


def refused_ids(error: urllib.error.HTTPError) -> tuple[set[str], str]:
    """The ids a refusal names and why (an empty set for any other error)."""
    if error.code not in (400, 404):
        return set(), ""
    try:
        details = json.loads(error_text(error))["error"]
        why = REFUSED_IDS.get(details.get("code"), "")
        return ({str(i).lower() for i in details.get("ids", [])} if why else set()), why
    except (ValueError, KeyError, TypeError, AttributeError):
        return set(), ""


#: Sends of one turn at most: each retry drops the ids the last refusal named, and a refusal names up to
#: ten (the error envelope's bound), so three full lists of ids take at most 30 retries. The hook's
#: deadline (COLONY_HOOK_TIMEOUT) bounds them in time.
MAX_SENDS = 1 + 3 * MAX_FEEDBACK_IDS // 10


def post(url: str, token: str, turn: dict, timeout: float) -> int:
    request = urllib.request.Request(  # noqa: S310 - COLONY_URL, the operator's setting
        url.rstrip("/") + "/api/v1/turns",
        data=json.dumps(turn).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    with urlopen(request, timeout=timeout) as response:  # noqa: S310 - COLONY_URL, the operator's setting - URL from the operator
        return response.status


def run(argv: list[str], timeout: float, result: dict) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt")
    parser.add_argument("--response")
    parser.add_argument("--session-id")
    parser.add_argument("--turn-id")
    parser.add_argument("--used", action="append")
    parser.add_argument("--contradicted", action="append")
    parser.add_argument("--injected", action="append")
    args, _unknown = parser.parse_known_args(argv)
    url, token = base_url(os.environ.get("COLONY_URL", "")), os.environ.get("COLONY_TOKEN", "").strip()
    if not url or not token:
        note("COLONY_URL and COLONY_TOKEN must be set; turn not sent")
        return
    problem = token_problem(token)
    if problem:
        note(f"{problem} Turn not sent.")
        return
    stdin_text = "" if args.prompt is not None or args.response is not None else read_stdin(timeout / 3)
    turn = build_turn(args, stdin_text)
    if turn is None:
        return
    try:
        for attempt in range(1, MAX_SENDS + 1):
            try:
                result["status"] = post(url, token, turn, timeout)
                break
            except urllib.error.HTTPError as exc:
                refused, why = refused_ids(exc)
                if not refused or attempt == MAX_SENDS:
                    raise
                # A mistyped, foreign, never-shown or planted id in the feedback must not lose the whole turn.
                note(f"{why} {', '.join(sorted(refused))}; sending the turn without those ids")
                for key in ("used_ids", "contradicted_ids", "injected_ids"):
                    if key in turn:
                        turn[key] = [i for i in turn[key] if i.lower() not in refused]
    except urllib.error.HTTPError as exc:
        note(f"Colony answered {exc.code}: {error_text(exc)[:300]}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        if isinstance(exc, TIMEOUTS) or isinstance(getattr(exc, "reason", None), TIMEOUTS):
            # Reached but no answer in time: the same outcome as main's deadline, which this timeout
            # can beat by a hair on a loaded machine; say it the same way.
            note(f"gave up after {timeout:g}s; the agent continues")
        else:
            note(f"could not reach Colony at {url}: {exc}")


def main(argv: list[str] | None = None) -> int:
    try:
        timeout = float(os.environ.get("COLONY_HOOK_TIMEOUT", DEFAULT_TIMEOUT))
    except ValueError:
        timeout = DEFAULT_TIMEOUT
    result: dict = {}

    def guarded() -> None:
        try:
            run(sys.argv[1:] if argv is None else argv, timeout, result)
        except BaseException as exc:  # never fail the agent's turn
            note(f"error: {type(exc).__name__}: {exc}")

    worker = threading.Thread(target=guarded, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        note(f"gave up after {timeout:g}s; the agent continues")
    return 0


if __name__ == "__main__":
    try:
        main()
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(0)  # at once, even if a network call is still hanging in the worker thread
