"""The MCP tools. Each one is a REST operation of SPEC 5 with a JSON schema and a description an LLM
can act on; it runs the same DRF view (``colony_mcp.rest``), so a refusal carries REST's HTTP status,
``code`` and ``message``.

A tool result is the REST response body as JSON text (and as structured content when it is an
object). A refused call is an error result (``isError``) whose text is REST's envelope plus the HTTP
status: ``{"error": {"code": "...", "message": "..."}, "status": 404}``.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import json
import re
from typing import Annotated, Any, Literal, get_args

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from mcp_types.jsonrpc import INVALID_PARAMS
from pydantic import Field, ValidationError

from api.errors import did_you_mean, error_body, name_hint
from api.fields import UNKNOWN_NAMED
from api.paging import OFFSET_MAX
from brain.choices import TOPIC_MAX_CHARS
from brain.inputs import PROMPT_MAX_CHARS
from brain.services.receipts import KEY_MAX_LENGTH
from colony_mcp.rest import RestResult, rest_call, segment
from tasks.models import SUMMARY_MAX_CHARS

INSTRUCTIONS = """\
Colony is the shared brain and task workflow of your team of agents. Your token fixes who you are
(name, role, space). The protocol:
1. At task start call memory_search with what the task is about; keep trace.session_id.
2. Put that session id into the task's DNA (task_update_dna {"memory_query_session": ...}), then
   claim the task with task_transition to "active". task_moves says what you may do and why not.
3. When you learned something, call memory_contribute with a self-contained statement (a category
   such as state_snapshot or decision_record when it fits); put trace.thought_id into the DNA as
   memory_contribution_id, then hand off with task_transition.
4. After a crash or a new session, call in_flight: your active and blocked tasks with their markers.
Wrong facts are corrected (memory_correct), never deleted; thought_retract withdraws your own mistake.
"""

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)

Uuid = Annotated[str, Field(description="A thought id (UUID) as returned in sources[].thought_id or trace.thought_id.")]
TaskRef = Annotated[str, Field(description="The task's slug (or its UUID).", min_length=1, max_length=150)]
Category = Literal["state_snapshot", "decision_record", "operational_learning", "task_outcome", "uncategorized"]
AnyCategory = Literal[
    "state_snapshot",
    "decision_record",
    "operational_learning",
    "task_outcome",
    "correction",
    "transition_marker",
    "uncategorized",
]
Role = Literal["pdsa", "dev", "qa", "liaison", "orchestrator"]
Status = Literal[
    "backlog",
    "pending",
    "ready",
    "active",
    "approval",
    "approved",
    "testing",
    "review",
    "rework",
    "complete",
    "blocked",
    "cancelled",
]


SourceRefArg = Annotated[
    dict[str, str] | None,
    Field(
        description='Where the knowledge comes from: {"type": "task"|"file"|"commit"|"url", "value": "...", '
        '"project": "..."}. Required for state_snapshot, decision_record and task_outcome.'
    ),
]
CURSOR_DESCRIPTION = (
    "next_cursor of the page before (omit it for the first page): unlike offset, it neither repeats nor "
    "skips rows that change between the pages."
)
IdempotencyKeyArg = Annotated[
    str | None,
    Field(
        description="Your own unique string for this call (a UUID), to retry it safely after a timeout: the same "
        "arguments with the same key are answered with the first answer and stored once (REST's Idempotency-Key).",
        min_length=1,
        max_length=KEY_MAX_LENGTH,
        pattern="^[!-~]+$",  # visible ASCII, as brain.services.receipts.key_clean takes it
    ),
]
SessionArg = Annotated[
    str | None,
    Field(
        description="Session id to continue (trace.session_id of an earlier call); omit to start a new one.",
        max_length=100,
    ),
]

#: (tool, argument) -> what to say when a call names an argument the tool does not have: the REST
#: names agents bring along (REST's memory endpoint takes the text as "prompt"; a transition's status
#: is "to" on both).
ARGUMENT_HINTS = {
    "memory_search": {"prompt": "The question goes in 'query'."},
    "memory_contribute": {"prompt": "The statement goes in 'content'."},
    "memory_correct": {"prompt": "The correcting statement goes in 'content'."},
    "task_transition": dict.fromkeys(("status", "state", "to_status"), "The status to move to goes in 'to'."),
}


class ColonyMCPServer(MCPServer):
    """The SDK's server, with a tool's arguments held to its schema as REST holds a body to its serializer:
    an argument the tool does not have is refused (the SDK alone drops it: ``limt: 3`` would answer ten
    sources, and ``prompt`` for ``query`` would get pydantic's "Field required" with a link), naming the
    argument meant. The refusal is REST's envelope, as every other refused call (status 400)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None):
        tool = self._tool_manager.get_tool(name)
        if tool is None:  # the SDK answered "Unknown tool: search_memory" in plain text
            names = sorted(t.name for t in self._tool_manager.list_tools())
            message = f"No tool {name!r}.{did_you_mean(name, names, cutoff=0.6)} Colony's tools: {', '.join(names)}."
            return await self._counted(context, _refused(error_body("UNKNOWN_TOOL", message), 404))
        if isinstance(arguments, dict):
            refused = _arguments_refused(name, tool.parameters, arguments)
            if refused is not None:
                return await self._counted(context, refused)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            # An argument of the wrong type or value (pydantic's validation, before the tool runs): REST's
            # envelope like every other refusal, not pydantic's text with its documentation links.
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            return await self._counted(context, _validation_refused(exc.__cause__))

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, context: Context | None = None):
        """An unknown prompt is an invalid-params error (the SDK's is a crash, logged with its traceback)."""
        if self._prompt_manager.get_prompt(name) is not None:
            return await super().get_prompt(name, arguments, context)
        prompts = ", ".join(sorted(p.name for p in self._prompt_manager.list_prompts())) or "none"
        raise MCPError(INVALID_PARAMS, f"No prompt {name[:100]!r}. Colony's prompts: {prompts}.")

    async def _counted(self, context: Context | None, refusal: CallToolResult) -> CallToolResult:
        """A call refused before its REST view ran counts against the token's rate as a refused REST request
        does (past it: REST's 429 THROTTLED): one authenticated ``GET /agents/me`` through the throttle."""
        counted = await _rest(context or self.get_context(), "GET", "agents/me")
        return _result(counted) if counted.status == 429 else refusal


def _arguments_refused(name: str, schema: dict, arguments: dict[str, Any]) -> CallToolResult | None:
    """Unknown arguments (the first UNKNOWN_NAMED, sorted, by name with a hint, the others counted: a
    call of 20,000 unknown keys is one short refusal, not 20,000 look-ups) and missing required ones."""
    known = sorted(schema.get("properties", {}))
    fields: dict[str, list[str]] = {}
    unknown = [key for key in arguments if key not in schema.get("properties", {})]
    for key in heapq.nsmallest(UNKNOWN_NAMED, unknown):
        hint = name_hint(key, known, ARGUMENT_HINTS.get(name))
        fields[key] = [f"Unknown argument.{hint} Arguments of {name}: {', '.join(known)}."]
    if len(unknown) > UNKNOWN_NAMED:
        fields["arguments"] = [f"{len(unknown)} unknown arguments; {len(unknown) - UNKNOWN_NAMED} more not named."]
    for key in schema.get("required", []):
        if key not in arguments:
            fields[key] = ["This argument is required."]
    return _refusal(fields) if fields else None


def _validation_refused(error: ValidationError) -> CallToolResult:
    """The first UNKNOWN_NAMED problems of pydantic's validation, each under its argument, and how many more."""
    fields: dict[str, list[str]] = {}
    problems = error.errors(include_url=False)
    if len(problems) > UNKNOWN_NAMED:
        fields["arguments"] = [f"{len(problems)} problems; {len(problems) - UNKNOWN_NAMED} more not listed."]
    for problem in problems[:UNKNOWN_NAMED]:
        key = ".".join(str(part) for part in problem["loc"]) or "arguments"
        message = problem["msg"] + "."
        if problem["type"] == "literal_error" and isinstance(problem.get("input"), str):
            choices = re.findall(r"'([^']*)'", problem.get("ctx", {}).get("expected", ""))
            message += did_you_mean(problem["input"], choices, cutoff=0.6)
        fields.setdefault(key, []).append(message)
    return _refusal(fields)


def _refusal(fields: dict[str, list[str]]) -> CallToolResult:
    summary = "; ".join(f"{key}: {' '.join(messages)}" for key, messages in fields.items())
    return _refused(error_body("VALIDATION_ERROR", f"Invalid arguments. {summary}", fields=fields), 400)


def _refused(body: dict, status: int) -> CallToolResult:
    """An error result as every refused call is: REST's envelope plus the HTTP status it stands for."""
    text = json.dumps({**body, "status": status}, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


mcp = ColonyMCPServer(
    name="colony",
    title="Colony shared brain and task workflow",
    instructions=INSTRUCTIONS,
    warn_on_duplicate_tools=True,
)


def _request_of(ctx: Context):
    request = ctx.request_context.request
    if request is None:  # pragma: no cover - only HTTP transports reach the tools (stdio goes through the bridge)
        raise RuntimeError("Colony's MCP tools are served over HTTP only; use contrib/colony_mcp_stdio.py for stdio.")
    return request


def _agent_of(ctx: Context) -> dict[str, str]:
    return _request_of(ctx).scope["colony.agent"]


def _result(result: RestResult) -> CallToolResult:
    if result.ok:
        text = json.dumps(result.body, ensure_ascii=False)
        structured = result.body if isinstance(result.body, dict) else None
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)
    if 300 <= result.status < 400:  # SECURE_SSL_REDIRECT and a plain-http /mcp: the view never ran
        message = (
            f"Colony answered this call with a redirect ({result.status}) and did nothing: connect to its MCP "
            "endpoint over https."
        )
        return _refused(error_body("REDIRECTED", message), result.status)
    body = result.body if isinstance(result.body, dict) and "error" in result.body else {"error": result.body}
    return _refused(body, result.status)


async def _call(ctx: Context, method: str, path: str, **request: Any) -> CallToolResult:
    """A tool's REST call (:func:`_rest`) as the tool's result."""
    return _result(await _rest(ctx, method, path, **request))


async def _rest(
    ctx: Context,
    method: str,
    path: str,
    *,
    query: dict | None = None,
    body: dict | None = None,
    headers: dict[str, str] | None = None,
) -> RestResult:
    request = _request_of(ctx)
    call = functools.partial(
        rest_call,
        method=method,
        path=path,
        authorization=request.headers.get("authorization", ""),
        host=request.headers.get("host", "127.0.0.1"),
        secure=request.url.scheme == "https",
        headers={**forwarded_headers(request.headers), **(headers or {})},
        query=query,
        body=body,
        defer_close=True,
    )
    # In the worker's pool of request threads (colony_mcp.asgi puts it in the scope), beside REST's requests.
    executor = request.scope.get("colony.executor")
    loop = asyncio.get_running_loop()
    result = await loop.run_in_executor(executor, call)
    if result.finish is not None:
        # The work after the answer (the memory call's reinforcement) runs while the answer is sent, as
        # on REST; not awaited. rest._close logs its failures.
        loop.run_in_executor(executor, result.finish)
    return result


#: Request headers a tool call carries on to its REST call, so the middleware decides as for REST (the
#: proxy's scheme for SECURE_PROXY_SSL_HEADER, the client's address for the logs).
FORWARDED_HEADERS = ("X-Forwarded-Proto", "X-Forwarded-For", "User-Agent")


def forwarded_headers(headers) -> dict[str, str]:
    return {name: headers[name] for name in FORWARDED_HEADERS if name in headers}


def _key_header(key: str | None) -> dict[str, str] | None:
    return None if key is None else {"Idempotency-Key": key}


def _given(**values: Any) -> dict[str, Any]:
    """The arguments the caller gave (None = not given), as a REST body."""
    return {key: value for key, value in values.items() if value is not None}


# --- brain --------------------------------------------------------------------------------------------


@mcp.tool(
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
)
async def memory_search(
    ctx: Context,
    query: Annotated[
        str, Field(description="What you want to know, in plain words.", min_length=1, max_length=PROMPT_MAX_CHARS)
    ],
    session_id: SessionArg = None,
    filter_topic: Annotated[
        str | None,
        Field(description="Only thoughts of this topic (e.g. 'billing-pipeline').", max_length=TOPIC_MAX_CHARS),
    ] = None,
    filter_category: Annotated[AnyCategory | None, Field(description="Only thoughts of this category.")] = None,
    limit: Annotated[
        int | None, Field(strict=True, description="How many sources (1-50, default 10).", ge=1, le=50)
    ] = None,
    min_relevance: Annotated[
        float | None,
        Field(
            strict=True,
            description="Drop sources whose relevance (0-1, on every source) is below this.",
            ge=0.0,
            le=1.0,
        ),
    ] = None,
    inject: Annotated[
        bool | None,
        Field(
            description="true: only sources relevant enough to put into a prompt unasked (the server's default "
            "threshold, or min_relevance); no sources at all when none is."
        ),
    ] = None,
) -> CallToolResult:
    """Search the shared brain. Retrieve-only: this never stores anything, whatever the query says.

    Call it at the start of every task (the workflow's memory_query_session gate needs the
    trace.session_id it returns) and whenever you need what other agents know. Returns result.sources
    (thought_id, contributor, score, relevance, content_preview, superseded, thought_category, topic,
    matching_reason), result.guidance (what to do next, e.g. a ready consolidates call when a topic
    is fragments without a current state snapshot), highways and pending_corrections. Read a full
    thought with thought_get. The search is logged and reinforces what it returns."""
    return await _call(
        ctx,
        "GET",
        "memory",
        query=_given(
            prompt=query,
            contribute=False,
            session_id=session_id,
            filter_topic=filter_topic,
            filter_category=filter_category,
            limit=limit,
            min_relevance=min_relevance,
            inject=inject,
        ),
    )


@mcp.tool(annotations=WRITES)
async def memory_contribute(
    ctx: Context,
    content: Annotated[
        str,
        Field(
            description="One self-contained statement a colleague can act on without any other context "
            "(more than 50 characters, not a question). Templates: state snapshot '{topic} state {date}: "
            "{status}. {decisions}. Next: {next}.'; decision record 'Decision ({date}, {project}): {what}. "
            "Context: {why now}. Chose {option} over {alternatives} because {reasoning}. Source: {ref}.'",
            min_length=1,
            max_length=PROMPT_MAX_CHARS,
        ),
    ],
    session_id: SessionArg = None,
    thought_category: Annotated[
        Category | None,
        Field(
            description="state_snapshot needs topic, temporal_scope, source_ref; decision_record needs topic, "
            "alternatives_considered, source_ref; operational_learning needs topic; task_outcome needs source_ref."
        ),
    ] = None,
    topic: Annotated[
        str | None, Field(description="Topic id, e.g. 'billing-pipeline'.", max_length=TOPIC_MAX_CHARS)
    ] = None,
    temporal_scope: Annotated[
        str | None,
        Field(description="ISO date (YYYY-MM-DD) the knowledge was current: today or earlier.", max_length=10),
    ] = None,
    source_ref: SourceRefArg = None,
    alternatives_considered: Annotated[
        str | None, Field(description="For a decision_record: what else was considered.", max_length=5000)
    ] = None,
    refines: Annotated[
        str | None,
        Field(
            description="Id of a thought this one updates; the old one becomes superseded. Not a correction "
            "(409 CORRECTION_NEEDS_CORRECTION): a correction is replaced by another, with memory_correct."
        ),
    ] = None,
    consolidates: Annotated[
        list[str] | None,
        Field(
            description="Ids (2 or more) of fragments this one merges into one map; they become superseded. "
            "No correction among them (409 CORRECTION_NEEDS_CORRECTION)."
        ),
    ] = None,
    related_thoughts: Annotated[list[str] | None, Field(description="Ids of thoughts to link both ways.")] = None,
    tags: Annotated[list[str] | None, Field(description="Free tags.", max_length=20)] = None,
    context: Annotated[str | None, Field(description="Where you are working (free text).", max_length=2000)] = None,
    idempotency_key: IdempotencyKeyArg = None,
) -> CallToolResult:
    """Contribute knowledge to the shared brain and get the nearest existing thoughts back.

    Returns trace.thought_id (the stored thought's id; with trace.already_known, the id of the live
    thought that already holds the same text, which is reinforced instead; null when the statement was
    too short or a question: nothing was stored), result.guidance (near-duplicates to refine or consolidate instead,
    a warning when it repeats a corrected fact) and result.sources. Put trace.thought_id into the
    task DNA as memory_contribution_id before handing off. Use refines to update a thought,
    consolidates to merge fragments into one state snapshot, memory_correct for a wrong fact.
    A missing category field is a 400 MISSING_CATEGORY_FIELDS naming it."""
    return await _call(
        ctx,
        "POST",
        "memory",
        body=_given(
            prompt=content,
            session_id=session_id,
            thought_category=thought_category,
            topic=topic,
            temporal_scope=temporal_scope,
            source_ref=source_ref,
            alternatives_considered=alternatives_considered,
            refines=refines,
            consolidates=consolidates,
            related_thoughts=related_thoughts,
            tags=tags,
            context=context,
        ),
        headers=_key_header(idempotency_key),
    )


@mcp.tool(annotations=WRITES)
async def memory_correct(
    ctx: Context,
    thought_id: Uuid,
    correct_fact: Annotated[
        str, Field(description="What is actually true.", min_length=1, max_length=PROMPT_MAX_CHARS)
    ],
    corrected_fact: Annotated[
        str | None,
        Field(
            description="What was wrong (default: the thought's content; a correction's: its correct_fact).",
            max_length=PROMPT_MAX_CHARS,
        ),
    ] = None,
    supersedes: Annotated[
        list[str] | None,
        Field(description="Other thought ids that repeat the same wrong fact: find them all with memory_search."),
    ] = None,
    topic: Annotated[str | None, Field(description="Default: the thought's topic.", max_length=TOPIC_MAX_CHARS)] = None,
    content: Annotated[
        str | None, Field(description="Text of the correction thought.", max_length=PROMPT_MAX_CHARS)
    ] = None,
    source_ref: SourceRefArg = None,
    idempotency_key: IdempotencyKeyArg = None,
) -> CallToolResult:
    """Correct a wrong fact: stores a correction that supersedes the thought (and every id in
    supersedes) in one transaction. Superseded thoughts stay for audit but rank below the
    correction, and later contributions repeating the wrong fact are flagged. A correction that
    superseded the thought before is superseded too, so one stays live. Before calling it,
    search for every thought that repeats the wrong fact and pass their ids in supersedes.
    Returns the correction, superseded_count and guidance."""
    return await _call(
        ctx,
        "POST",
        f"thoughts/{segment(thought_id)}/correct",
        body=_given(
            correct_fact=correct_fact,
            corrected_fact=corrected_fact,
            supersedes=supersedes,
            topic=topic,
            content=content,
            source_ref=source_ref,
        ),
        headers=_key_header(idempotency_key),
    )


@mcp.tool(annotations=READ_ONLY)
async def thought_get(ctx: Context, thought_id: Uuid) -> CallToolResult:
    """Read one thought in full: content, category fields, quality flags, superseded/superseded_by,
    corrected_by (corrections of it), related thoughts. Use it after a search to read a source whose
    content_preview is cut. Unknown or other-space ids: 404 THOUGHT_NOT_FOUND."""
    return await _call(ctx, "GET", f"thoughts/{segment(thought_id)}")


@mcp.tool(annotations=READ_ONLY)
async def thought_lineage(
    ctx: Context,
    thought_id: Uuid,
    max_depth: Annotated[
        int | None, Field(strict=True, description="How far to walk (default 10).", ge=0, le=50)
    ] = None,
) -> CallToolResult:
    """The lineage chain of a thought: what it refines or consolidates (negative depth) and what
    refined or consolidated it (positive depth), with truncated when max_depth cut it. Use it to
    find the newest version of a superseded thought."""
    return await _call(ctx, "GET", f"thoughts/{segment(thought_id)}/lineage", query=_given(max_depth=max_depth))


@mcp.tool(annotations=READ_ONLY)
async def thought_list(
    ctx: Context,
    topic: Annotated[str | None, Field(description="Only this topic.", max_length=TOPIC_MAX_CHARS)] = None,
    category: Annotated[AnyCategory | None, Field(description="Only this category.")] = None,
    contributor: Annotated[str | None, Field(description="Only thoughts of this agent (its name).")] = None,
    since: Annotated[str | None, Field(description="Only thoughts created at or after this ISO date/time.")] = None,
    superseded: Annotated[
        bool | None, Field(description="true: only superseded (incl. retracted); false: only live.")
    ] = None,
    limit: Annotated[int | None, Field(strict=True, description="Page size (1-200, default 50).", ge=1, le=200)] = None,
    cursor: Annotated[str | None, Field(description=CURSOR_DESCRIPTION, max_length=1000)] = None,
    offset: Annotated[
        int | None, Field(strict=True, description="Skip this many (paging; prefer cursor).", ge=0, le=OFFSET_MAX)
    ] = None,
) -> CallToolResult:
    """List thoughts of your space, newest first, with filters and paging ({count, next_cursor,
    results}; pass next_cursor back as cursor for the next page). Use it to see everything on a
    topic (e.g. the fragments to consolidate into a state snapshot) or your own contributions; use
    memory_search to rank by meaning instead."""
    return await _call(
        ctx,
        "GET",
        "thoughts",
        query=_given(
            topic=topic,
            category=category,
            contributor=contributor,
            since=since,
            superseded=superseded,
            limit=limit,
            cursor=cursor,
            offset=offset,
        ),
    )


@mcp.tool(annotations=WRITES)
async def thought_retract(
    ctx: Context,
    thought_id: Uuid,
    reason: Annotated[str, Field(description="Why it is withdrawn.", min_length=1, max_length=2000)],
    redact: Annotated[
        bool | None,
        Field(description="true for a leaked secret or personal data: also erase its text (default false: kept)."),
    ] = None,
) -> CallToolResult:
    """Withdraw a thought that should not have been stored (a mistake, a leaked secret, noise) when
    there is nothing to replace it with. It is marked superseded without a replacement, flagged
    retracted and no memory search returns it; with redact (a leaked secret) its text is erased,
    otherwise it is kept for audit; what it superseded (as a
    refinement, consolidation or correction) is live again (live_again). For a wrong fact with a
    right one, use memory_correct; for an outdated fact, memory_contribute with refines."""
    return await _call(
        ctx, "POST", f"thoughts/{segment(thought_id)}/retract", body=_given(reason=reason, redact=redact)
    )


@mcp.tool(annotations=READ_ONLY)
async def corrections_pending(
    ctx: Context,
    mine: Annotated[bool, Field(description="Only suggestions addressed to you.")] = False,
    limit: Annotated[
        int | None, Field(strict=True, description="At most this many (1-200, default 50).", ge=1, le=200)
    ] = None,
    cursor: Annotated[str | None, Field(description=CURSOR_DESCRIPTION, max_length=1000)] = None,
) -> CallToolResult:
    """Pending correction suggestions of your space (yours first): a thought that something
    contradicts, the contradicting statement and a draft correction. Resolve each with
    correction_accept (creates the correction) or correction_dismiss (the thought stands). count says how
    many are pending; next_cursor, sent back as cursor, gives the next page."""
    query = _given(status="pending", mine=mine, limit=limit, cursor=cursor)
    return await _call(ctx, "GET", "corrections", query=query)


@mcp.tool(annotations=WRITES)
async def correction_accept(
    ctx: Context,
    suggestion_id: Annotated[str, Field(description="suggestion_id from corrections_pending.")],
    correct_fact: Annotated[
        str | None, Field(description="Override the draft's correct fact.", max_length=PROMPT_MAX_CHARS)
    ] = None,
    content: Annotated[
        str | None, Field(description="Override the correction's text.", max_length=PROMPT_MAX_CHARS)
    ] = None,
) -> CallToolResult:
    """Accept a pending correction suggestion: one call creates the correction, which supersedes
    the contradicted thought. Returns the suggestion, the correction and superseded_count."""
    return await _call(
        ctx,
        "POST",
        f"corrections/{segment(suggestion_id)}/accept",
        body=_given(correct_fact=correct_fact, content=content),
    )


@mcp.tool(annotations=WRITES)
async def correction_dismiss(
    ctx: Context,
    suggestion_id: Annotated[str, Field(description="suggestion_id from corrections_pending.")],
    reason: Annotated[str | None, Field(description="Why the thought stands.", max_length=2000)] = None,
) -> CallToolResult:
    """Dismiss a pending correction suggestion: the thought stands, nothing else changes. Not for a
    contradiction of a thought you contributed (OWN_THOUGHT): accept it if your thought is wrong."""
    return await _call(ctx, "POST", f"corrections/{segment(suggestion_id)}/dismiss", body=_given(reason=reason))


# --- tasks --------------------------------------------------------------------------------------------


@mcp.tool(annotations=READ_ONLY)
async def task_list(
    ctx: Context,
    status: Annotated[Status | None, Field(description="Only tasks in this status.")] = None,
    role: Annotated[Role | None, Field(description="Only tasks whose current role is this.")] = None,
    project: Annotated[str | None, Field(description="Only this project (slug).", max_length=100)] = None,
    type: Annotated[Literal["task", "bug"] | None, Field(description="task or bug.")] = None,
    limit: Annotated[
        int | None, Field(strict=True, description="Page size (1-500, default 100).", ge=1, le=500)
    ] = None,
    cursor: Annotated[str | None, Field(description=CURSOR_DESCRIPTION, max_length=1000)] = None,
    offset: Annotated[
        int | None, Field(strict=True, description="Skip this many (prefer cursor).", ge=0, le=OFFSET_MAX)
    ] = None,
) -> CallToolResult:
    """List tasks of your space, the latest change first ({count, next_cursor, results}; pass
    next_cursor back as cursor for the next page), e.g. status=ready and role=<your role> to find
    work to claim."""
    return await _call(
        ctx,
        "GET",
        "tasks",
        query=_given(status=status, role=role, project=project, type=type, limit=limit, cursor=cursor, offset=offset),
    )


@mcp.tool(annotations=READ_ONLY)
async def task_get(ctx: Context, task: TaskRef) -> CallToolResult:
    """One task: title, description, status, role, DNA (the gate fields live here) and its last
    transitions with their brain markers."""
    return await _call(ctx, "GET", f"tasks/{segment(task)}")


@mcp.tool(annotations=READ_ONLY)
async def task_moves(ctx: Context, task: TaskRef) -> CallToolResult:
    """What you may do with this task now: allowed target statuses, and for every other rule the
    reasons it refuses (wrong role, a missing DNA field such as memory_query_session, a human
    confirmation still needed). Call it before task_transition."""
    return await _call(ctx, "GET", f"tasks/{segment(task)}/transitions")


@mcp.tool(annotations=WRITES)
async def task_transition(
    ctx: Context,
    task: TaskRef,
    to: Annotated[
        str, Field(description="Target status (e.g. 'active', 'review'), or 'restore' to leave blocked.", max_length=20)
    ],
    summary: Annotated[
        str | None,
        Field(description="One sentence: the outcome; it goes into the brain marker.", max_length=SUMMARY_MAX_CHARS),
    ] = None,
) -> CallToolResult:
    """Move a task (claim it with to='active', hand off with 'review'/'approval', block it with
    'blocked' after setting blocked_reason in DNA). The workflow checks your role and the DNA gates
    and writes the brain marker 'TASK from→to: ROLE slug (project) — summary' in the same
    transaction. Refusals name what is missing (e.g. 409 MISSING_DNA with the DNA field to set)."""
    return await _call(ctx, "POST", f"tasks/{segment(task)}/transition", body=_given(to=to, summary=summary))


@mcp.tool(annotations=WRITES)
async def task_update_dna(
    ctx: Context,
    task: TaskRef,
    dna: Annotated[
        dict[str, Any],
        Field(
            description='Fields to merge into the DNA, e.g. {"memory_query_session": "<trace.session_id>"} or '
            '{"memory_contribution_id": "<trace.thought_id>"}; null removes a field. human_* fields are '
            "for humans only."
        ),
    ],
) -> CallToolResult:
    """Shallow-merge fields into a task's DNA and return the task. This is how you satisfy the
    memory gates before a transition."""
    return await _call(ctx, "PATCH", f"tasks/{segment(task)}/dna", body=dna)


@mcp.tool(annotations=READ_ONLY)
async def in_flight(
    ctx: Context,
    role: Annotated[Role | None, Field(description="Default: your own role.")] = None,
    markers: Annotated[
        int | None, Field(strict=True, description="Markers per task (1-20, default 3).", ge=1, le=20)
    ] = None,
    limit: Annotated[
        int | None, Field(strict=True, description="Tasks per page (1-500, default 100).", ge=1, le=500)
    ] = None,
    cursor: Annotated[str | None, Field(description=CURSOR_DESCRIPTION, max_length=1000)] = None,
) -> CallToolResult:
    """Recovery after a crash, a compaction or a new session: the active and blocked tasks of your
    role with their last brain markers, yours first (you moved them last), then the role's active
    ones, then blocked ({role, count, next_cursor, tasks}; pass next_cursor back as cursor for the
    next page). Call it first thing in a new session; then search the brain for the task and
    continue where the markers say you stopped."""
    role = role or _agent_of(ctx)["role"]
    return await _call(
        ctx, "GET", f"agents/{segment(role)}/in-flight", query=_given(markers=markers, limit=limit, cursor=cursor)
    )


@mcp.tool(annotations=WRITES)
async def turn_log(
    ctx: Context,
    session_id: Annotated[str, Field(description="The session whose memory call injected the sources.")],
    turn_id: Annotated[str, Field(description="Unique per turn; a repeated (session, turn) is a no-op.")],
    user_prompt: Annotated[str, Field(description="The turn's prompt.")],
    assistant_response: Annotated[str, Field(description="What you answered and did.")],
    tool_calls: Annotated[list[Any] | None, Field(description="The turn's tool calls (any JSON).")] = None,
    used_ids: Annotated[list[str] | None, Field(description="Thought ids you actually used.")] = None,
    contradicted_ids: Annotated[list[str] | None, Field(description="Thought ids you found wrong.")] = None,
    injected_ids: Annotated[
        list[str] | None,
        Field(
            description="Default: the sources of this session's last memory call; only ids your memory calls "
            "in this session returned."
        ),
    ] = None,
) -> CallToolResult:
    """Report a finished turn to the quality loop (scored in the background; 202 at once). Explicit
    used_ids / contradicted_ids feed ranking directly: a contradicted thought drops and becomes a
    correction suggestion."""
    return await _call(
        ctx,
        "POST",
        "turns",
        body=_given(
            session_id=session_id,
            turn_id=turn_id,
            user_prompt=user_prompt,
            assistant_response=assistant_response,
            tool_calls=tool_calls,
            used_ids=used_ids,
            contradicted_ids=contradicted_ids,
            injected_ids=injected_ids,
        ),
    )


class _TextStaysText(FuncMetadata):
    """The SDK reads a string argument as JSON unless its type is exactly ``str``, so for an optional
    text ("str | None") it would read "null" as None (dropping an Idempotency-Key spelt "null") and
    '["a"]' as a list (refused as "not a string"): a text argument keeps the text sent, as REST does."""

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        fields = self.arg_model.model_fields
        texts = {
            name
            for name in data
            if name in fields and str in (fields[name].annotation, *get_args(fields[name].annotation))
        }
        parsed = super().pre_parse_json({name: value for name, value in data.items() if name not in texts})
        return {name: data[name] if name in texts else parsed[name] for name in data}


# Every tool's input schema says what call_tool holds it to: no arguments but its own; its text
# arguments stay text (_TextStaysText).
for _tool in mcp._tool_manager.list_tools():
    _tool.parameters["additionalProperties"] = False
    _tool.fn_metadata = _TextStaysText.model_construct(**dict(_tool.fn_metadata))
