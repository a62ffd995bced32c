"""Identifiers of another space, swept over every REST endpoint and MCP tool that takes one from the caller
(SPEC 6: "Spaces isolate tenants: no query, lineage walk or transition crosses a space"; "Bad input gets a
4xx with the error envelope, never a 500, and changes nothing").

An agent of space B (``other_space``) holding a real identifier of space A (the default ``space``) must get
exactly the answer it gets for an identifier that names nothing: same status, same code, same message once
the identifier itself is blanked out. A difference (a 403 where the unknown id is a 404, "was not contributed
by you" where the unknown id is "not a thought", a longer message) tells B that A holds the object: an
existence oracle over every thought id, suggestion id, task slug, session id and agent name of every other
tenant. And nothing of A may change: no reinforcement, no suggestion, no feedback counted, no lineage or
dependency link, no gate opened.

The sweep is a table (``REST_CASES``, ``MCP_CASES``) of (endpoint, body) with the identifier as a
placeholder; each row is sent twice, with A's identifiers and with fresh unknown ones, and the two answers
compared. ``tests/test_space_isolation.py`` checks the path parameters answer 404; here every body field
that names an object is in the table too, and the answers must be indistinguishable.

The list cursors are identifiers as well: opaque to clients, but a client can paste one from another list,
another space's list, or its own hands.
"""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from django.db.models import Q

from brain.models import CorrectionSuggestion, ImportReceipt, QueryLog, Thought
from quality.models import ConfidenceChange, SessionOwner, TurnItem, TurnLog
from tasks.models import HumanConfirmation, Project, Task, TransitionLog
from tests.conftest import make_agent_client
from tests.security.support import import_post
from tests.tasks_helpers import make_project, make_task
from tests.test_mcp_server import Tools, in_session

pytestmark = pytest.mark.django_db

HOME_FACT = "The billing export job runs at 02:00 UTC and writes its files to the finance bucket in eu-west-1."
HOME_FACT_2 = "The billing export job retries three times before it pages the on-call engineer of the finance team."
AWAY_FACT = "The billing export job runs at 04:00 UTC and writes its files to the reporting bucket in us-east-2."
STATEMENT = "The billing export job now runs at 05:00 UTC and writes its files to the archive bucket in eu-west-1."


# --- space A: what B must not be able to name --------------------------------------------------------


@pytest.fixture
def home(space, agent_factory, thought_factory, fake_embedder):
    """Space A's objects, each with a real identifier: two thoughts of its agent, a correction, a pending
    suggestion on the first (addressed to its agent and session), a session in which its agent queried the
    brain, a project with a ready task and a dependency."""
    owner = agent_factory("dev", name="home-owner")
    by_owner = {"agent": owner.agent, "contributor_id": str(owner.agent.pk), "contributor_name": owner.agent.name}
    first = thought_factory(HOME_FACT, topic="billing", **by_owner)
    second = thought_factory(HOME_FACT_2, topic="billing", **by_owner)
    correction = thought_factory(
        "CORRECTION: the billing export bucket is in eu-central-1, not eu-west-1.",
        thought_category="correction",
        topic="billing",
        corrected_fact="The billing export bucket is in eu-west-1.",
        correct_fact="The billing export bucket is in eu-central-1.",
        **by_owner,
    )
    suggestion = CorrectionSuggestion.objects.create(
        space=space,
        thought=first,
        statement="The export runs at 03:00 now.",
        origin="quality_judge",
        agent=owner.agent,
        session_id="home-session",
    )
    QueryLog.objects.create(
        space=space,
        agent=owner.agent,
        agent_ref=str(owner.agent.pk),
        session_id="home-session",
        query_text="billing export",
        results=[{"id": str(first.id), "score": 0.9}, {"id": str(second.id), "score": 0.8}],
    )
    project = make_project(space, "home-proj")
    task = make_task(project, slug="home-task", status="ready", role="dev")
    make_task(project, slug="home-dep", status="complete", role="dev")
    return {
        "owner": owner,
        "refs": {
            "thought": str(first.id),
            "thought2": str(second.id),
            "correction": str(correction.id),
            "suggestion": str(suggestion.id),
            "task_slug": task.slug,
            "task_slug_upper": task.slug.upper(),
            "task_id": str(task.id),
            "project": project.slug,
            "session": "home-session",
            "agent_name": owner.agent.name,
        },
    }


def unknown_refs() -> dict[str, str]:
    """Identifiers of the same shapes that name nothing anywhere."""
    return {
        "thought": str(uuid.uuid4()),
        "thought2": str(uuid.uuid4()),
        "correction": str(uuid.uuid4()),
        "suggestion": str(uuid.uuid4()),
        "task_slug": "gone-task",
        "task_slug_upper": "GONE-TASK",
        "task_id": str(uuid.uuid4()),
        "project": "gone-proj",
        "session": "gone-session",
        "agent_name": "gone-owner",
    }


# --- space B: the caller -------------------------------------------------------------------------------


@pytest.fixture
def away(other_space, thought_factory, fake_embedder):
    """Space B's callers (a dev, a liaison, a read-only URL token of the dev) and their own objects: a thought
    of the dev, a project, a ready task (pdsa_ref set, so only the memory gate decides a claim) and an active
    one (only the contribution gate decides its hand-off)."""
    from core import services

    dev = make_agent_client(space=other_space, name="away-dev", role="dev")
    liaison = make_agent_client(space=other_space, name="away-liaison", role="liaison")
    _, url_token = services.url_token_create(agent=dev.agent, days=7, label="chat", created_by="test")
    own = thought_factory(
        AWAY_FACT,
        in_space=other_space,
        topic="billing",
        agent=dev.agent,
        contributor_id=str(dev.agent.pk),
        contributor_name=dev.agent.name,
    )
    project = make_project(other_space, "away-proj")
    make_task(project, slug="away-ready", status="ready", role="dev", dna={"pdsa_ref": "docs/away.md"})
    make_task(project, slug="away-active", status="active", role="dev", dna={"pdsa_ref": "docs/away.md"})
    return {"dev": dev, "liaison": liaison, "url_token": url_token, "own": str(own.id)}


# --- what A holds ------------------------------------------------------------------------------------


def _columns(model) -> list[str]:
    """A model's stored columns that compare as plain values (vectors and generated text left out)."""
    return [
        f.attname
        for f in model._meta.concrete_fields
        if "Vector" not in type(f).__name__ and not getattr(f, "generated", False)
    ]


def space_state(space) -> dict:
    """Every row of ``space`` that a caller's identifier could reach, and every link row touching one."""
    state = {}
    for model in (
        Thought,
        CorrectionSuggestion,
        QueryLog,
        ImportReceipt,
        Project,
        Task,
        TransitionLog,
        TurnLog,
        SessionOwner,
        ConfidenceChange,
    ):
        field = "space" if any(f.name == "space" for f in model._meta.fields) else "task__space"
        state[model.__name__] = list(model.objects.filter(**{field: space}).order_by("pk").values(*_columns(model)))
    related = Thought.related_thoughts.through.objects
    state["related"] = sorted(
        related.filter(Q(from_thought__space=space) | Q(to_thought__space=space)).values_list(
            "from_thought_id", "to_thought_id"
        )
    )
    for name in ("parents", "depends_on"):
        through = getattr(Task, name).through.objects
        state[name] = sorted(
            through.filter(Q(from_task__space=space) | Q(to_task__space=space)).values_list(
                "from_task_id", "to_task_id"
            )
        )
    state["turn_items"] = sorted(TurnItem.objects.filter(thought__space=space).values_list("turn_id", "thought_id"))
    state["confirmations"] = list(HumanConfirmation.objects.filter(task__space=space).values_list("pk", flat=True))
    return state


# --- the sweep -----------------------------------------------------------------------------------------


def blanked(text: str, refs: dict[str, str]) -> str:
    """``text`` with every identifier of ``refs`` replaced by its name (longest first: "home-proj" is in no
    other value, but a slug may be a prefix of another)."""
    for key, value in sorted(refs.items(), key=lambda item: -len(item[1])):
        text = text.replace(value, f"<{key}>")
    return text


#: (name, caller, [(method, path, body or query)]). The identifier placeholders are ``refs``' keys, ``own``
#: is the caller's own thought. A row's last answers are compared (earlier steps by status); the last must refuse.
REST_CASES = [
    # thoughts by path
    ("thought_get", "dev", [("get", "/api/v1/thoughts/{thought}", None)]),
    ("thought_lineage", "dev", [("get", "/api/v1/thoughts/{thought}/lineage", {"max_depth": 5})]),
    ("thought_retract", "dev", [("post", "/api/v1/thoughts/{thought}/retract", {"reason": "mine to withdraw"})]),
    (
        "thought_retract_redact",
        "dev",
        [("post", "/api/v1/thoughts/{thought}/retract", {"reason": "leaked", "redact": True})],
    ),
    ("thought_correct", "dev", [("post", "/api/v1/thoughts/{thought}/correct", {"correct_fact": STATEMENT})]),
    ("correction_correct", "dev", [("post", "/api/v1/thoughts/{correction}/correct", {"correct_fact": STATEMENT})]),
    # thoughts named in bodies
    (
        "correct_own_supersedes",
        "dev",
        [("post", "/api/v1/thoughts/{own}/correct", {"correct_fact": STATEMENT, "supersedes": ["{thought}"]})],
    ),
    ("memory_refines", "dev", [("post", "/api/v1/memory", {"prompt": STATEMENT, "refines": "{thought}"})]),
    (
        "memory_consolidates_both_foreign",
        "dev",
        [("post", "/api/v1/memory", {"prompt": STATEMENT, "consolidates": ["{thought}", "{thought2}"]})],
    ),
    (
        "memory_consolidates_with_own",
        "dev",
        [("post", "/api/v1/memory", {"prompt": STATEMENT, "consolidates": ["{own}", "{thought}"]})],
    ),
    ("memory_supersedes", "dev", [("post", "/api/v1/memory", {"prompt": STATEMENT, "supersedes": ["{thought}"]})]),
    (
        "memory_correction_supersedes",
        "dev",
        [
            (
                "post",
                "/api/v1/memory",
                {
                    "prompt": STATEMENT,
                    "thought_category": "correction",
                    "topic": "billing",
                    "corrected_fact": "The billing export job runs at 02:00 UTC.",
                    "correct_fact": "The billing export job runs at 05:00 UTC.",
                    "supersedes": ["{thought}"],
                },
            )
        ],
    ),
    (
        "memory_related_thoughts",
        "dev",
        [("post", "/api/v1/memory", {"prompt": STATEMENT, "related_thoughts": ["{thought}"]})],
    ),
    ("memory_get_refines", "dev", [("get", "/api/v1/memory", {"prompt": STATEMENT, "refines": "{thought}"})]),
    (
        "url_token_memory_refines",
        "url",
        [("get", "/api/v1/memory", {"prompt": STATEMENT, "refines": "{thought}"})],
    ),
    # suggestions
    ("suggestion_accept", "liaison", [("post", "/api/v1/corrections/{suggestion}/accept", {})]),
    ("suggestion_dismiss", "liaison", [("post", "/api/v1/corrections/{suggestion}/dismiss", {"reason": "stands"})]),
    # tasks by path (slug and id)
    ("task_get_slug", "dev", [("get", "/api/v1/tasks/{task_slug}", None)]),
    ("task_get_slug_in_capitals", "dev", [("get", "/api/v1/tasks/{task_slug_upper}", None)]),
    ("task_get_id", "dev", [("get", "/api/v1/tasks/{task_id}", None)]),
    ("task_moves", "dev", [("get", "/api/v1/tasks/{task_slug}/transitions", None)]),
    ("task_dna", "dev", [("patch", "/api/v1/tasks/{task_slug}/dna", {"pdsa_ref": "docs/x.md"})]),
    ("task_dna_by_id", "dev", [("patch", "/api/v1/tasks/{task_id}/dna", {"pdsa_ref": "docs/x.md"})]),
    ("task_transition", "dev", [("post", "/api/v1/tasks/{task_slug}/transition", {"to": "active"})]),
    ("task_transition_by_id", "dev", [("post", "/api/v1/tasks/{task_id}/transition", {"to": "blocked"})]),
    ("task_restore", "liaison", [("post", "/api/v1/tasks/{task_slug}/transition", {"to": "restore"})]),
    # tasks named in bodies
    (
        "task_create_depends_on_slug",
        "liaison",
        [
            (
                "post",
                "/api/v1/tasks",
                {"project": "away-proj", "slug": "new-a", "title": "t", "depends_on": ["{task_slug}"]},
            )
        ],
    ),
    (
        "task_create_depends_on_id",
        "liaison",
        [
            (
                "post",
                "/api/v1/tasks",
                {"project": "away-proj", "slug": "new-b", "title": "t", "depends_on": ["{task_id}"]},
            )
        ],
    ),
    (
        "bug_create_parent_ids",
        "liaison",
        [
            (
                "post",
                "/api/v1/tasks",
                {"project": "away-proj", "slug": "new-c", "title": "t", "type": "bug", "parent_ids": ["{task_id}"]},
            )
        ],
    ),
    (
        "task_create_in_project",
        "liaison",
        [("post", "/api/v1/tasks", {"project": "{project}", "slug": "new-d", "title": "t"})],
    ),
    # DNA references the gates verify
    (
        "gate_memory_query_session",
        "dev",
        [
            ("patch", "/api/v1/tasks/away-ready/dna", {"memory_query_session": "{session}"}),
            ("post", "/api/v1/tasks/away-ready/transition", {"to": "active"}),
        ],
    ),
    (
        "gate_memory_contribution_id",
        "dev",
        [
            ("patch", "/api/v1/tasks/away-active/dna", {"memory_contribution_id": "{thought}"}),
            ("post", "/api/v1/tasks/away-active/transition", {"to": "review"}),
        ],
    ),
    # the quality loop
    (
        "turn_used_ids",
        "dev",
        [
            (
                "post",
                "/api/v1/turns",
                {
                    "session_id": "away-s",
                    "turn_id": "1",
                    "user_prompt": "q",
                    "assistant_response": "a",
                    "used_ids": ["{thought}"],
                },
            )
        ],
    ),
    (
        "turn_contradicted_ids",
        "dev",
        [
            (
                "post",
                "/api/v1/turns",
                {
                    "session_id": "away-s",
                    "turn_id": "1",
                    "user_prompt": "q",
                    "assistant_response": "a",
                    "contradicted_ids": ["{thought}"],
                },
            )
        ],
    ),
    (
        "turn_injected_ids",
        "dev",
        [
            (
                "post",
                "/api/v1/turns",
                {
                    "session_id": "away-s",
                    "turn_id": "1",
                    "user_prompt": "q",
                    "assistant_response": "a",
                    "injected_ids": ["{thought}"],
                },
            )
        ],
    ),
    ("quality_metrics_agent", "dev", [("get", "/api/v1/quality/metrics", {"agent": "{agent_name}"})]),
]

#: Import items naming a thought in each reference field an import item has (brain.transfer.serializers
#: ARRAY_REFS, FK_REFS, related_thoughts).
IMPORT_CASES = [
    ("import_source_ids", {"content": STATEMENT, "thought_type": "refinement", "source_ids": ["{thought}"]}),
    (
        "import_supersedes",
        {
            "content": STATEMENT,
            "thought_category": "correction",
            "topic": "billing",
            "corrected_fact": "a",
            "correct_fact": "b",
            "supersedes": ["{thought}"],
        },
    ),
    ("import_related_thoughts", {"content": STATEMENT, "related_thoughts": ["{thought}"]}),
    ("import_refined_by", {"content": STATEMENT, "refined_by": "{thought}"}),
    ("import_superseded_by", {"content": STATEMENT, "superseded_by": "{correction}"}),
    ("import_contradicted_by", {"content": STATEMENT, "contradicted_by": "{correction}"}),
]


def filled(template, refs: dict[str, str]):
    """``template`` (a JSON value) with each "{key}" string replaced by ``refs[key]``."""
    if isinstance(template, str):
        return template.format(**refs)
    if isinstance(template, list):
        return [filled(item, refs) for item in template]
    if isinstance(template, dict):
        return {key: filled(value, refs) for key, value in template.items()}
    return template


def send(caller, method: str, path: str, data, url_token: str | None = None):
    if url_token is not None:
        return caller.get(path, {**(data or {}), "token": url_token})
    if method == "get":
        return caller.get(path, data or {})
    return getattr(caller, method)(path, data, format="json")


def run_rest_case(steps, who: str, refs: dict, away: dict) -> list[tuple[int, str]]:
    from rest_framework.test import APIClient

    values = {**refs, "own": away["own"]}
    answers = []
    for method, path, body in steps:
        if who == "url":
            response = send(APIClient(), method, path.format(**values), filled(body, values), away["url_token"])
        else:
            response = send(away[who], method, path.format(**values), filled(body, values))
        answers.append((response.status_code, blanked(response.content.decode(), refs)))
    return answers


@pytest.mark.parametrize("name,who,steps", REST_CASES, ids=[case[0] for case in REST_CASES])
def test_another_spaces_id_is_answered_as_an_unknown_one_and_changes_nothing(name, who, steps, space, home, away):
    """Attack: an agent of space B sends, in a path or a body field, a real identifier of space A (a thought,
    a correction, a suggestion, a task by slug or id, a project, a session in which A's agent queried, A's
    agent's name), then the same request with an identifier that names nothing. Without the rule, the two
    answers differ (a 403 NOT_CONTRIBUTOR or "was not contributed by you" for A's thought where an unknown id
    is a 404, a conflict for A's slug) and B learns what A holds; or the call reaches A's row (a link, a
    dependency, a reinforced weight, a dismissed suggestion, a gate opened by A's session). Expected: the same
    refusal (status, code, message with the identifier blanked) and A's rows exactly as before."""
    before = space_state(space)
    foreign = run_rest_case(steps, who, home["refs"], away)
    unknown = run_rest_case(steps, who, unknown_refs(), away)
    status, body = foreign[-1]
    assert 400 <= status < 500, (status, body[:400])
    assert "error" in json.loads(body), body[:400]
    # Steps before the last set the caller's own DNA (their answers carry times): their statuses must match.
    assert [answer[0] for answer in foreign] == [answer[0] for answer in unknown], (foreign, unknown)
    assert foreign[-1] == unknown[-1], f"A's id answered differently from an unknown one:\n{foreign[-1]}\n{unknown[-1]}"
    assert space_state(space) == before


@pytest.mark.parametrize("name,item", IMPORT_CASES, ids=[case[0] for case in IMPORT_CASES])
def test_an_import_reference_to_another_spaces_thought_is_answered_as_an_unknown_one(name, item, space, home, away):
    """Attack: ``POST /api/v1/thoughts/import`` by an agent of space B with one item whose reference field
    (source_ids, supersedes, related_thoughts, refined_by, superseded_by, contradicted_by) names a thought of
    space A, then the same item naming an unknown id. Without the rule, the import looks the reference up on
    the whole server: A's thought is "not a correction" / "does not supersede this item" where an unknown id
    is "no thought", or worse, B's item is stored superseding, linked to or flagged against A's thought.
    Expected: the same 400 IMPORT_INVALID line for both, nothing stored, A unchanged."""
    before = space_state(space)
    answers = []
    for refs in (home["refs"], unknown_refs()):
        response = import_post(away["dev"], [filled(item, refs)])
        answers.append((response.status_code, blanked(response.content.decode(), refs)))
    assert answers[0][0] == 400, answers[0]
    assert answers[0] == answers[1], answers
    assert space_state(space) == before
    assert not Thought.objects.filter(content=STATEMENT).exists()


def test_filters_and_sessions_naming_another_spaces_objects_reach_nothing_there(space, home, away):
    """Attack: B's reads name A's objects: ``GET /api/v1/thoughts?contributor=<A's agent>``, ``GET
    /api/v1/tasks?project=<A's project>``, ``GET /api/v1/memory?session_id=<A's session>`` (A's pending
    suggestion is addressed to that session); then B contributes with ``session_id`` = A's session, where A's
    agent was shown two thoughts. Without the rule, a filter joins across spaces (A's rows or their count in
    B's answer, A's pending correction in B's memory answer), or the contribution's implicit feedback (+0.02
    to what "this session" was shown) rewards A's thoughts. Expected: the answers of unknown names (empty
    lists, no pending correction), and A's rows exactly as before."""
    before = space_state(space)
    dev = away["dev"]
    for refs in (home["refs"], unknown_refs()):
        thoughts = dev.get("/api/v1/thoughts", {"contributor": refs["agent_name"]})
        tasks = dev.get("/api/v1/tasks", {"project": refs["project"]})
        assert (thoughts.status_code, thoughts.json()["count"], thoughts.json()["results"]) == (200, 0, [])
        assert (tasks.status_code, tasks.json()["count"], tasks.json()["results"]) == (200, 0, [])
        memory = dev.get("/api/v1/memory", {"prompt": HOME_FACT, "contribute": "false", "session_id": refs["session"]})
        assert memory.status_code == 200, memory.content[:300]
        assert memory.json()["result"]["pending_corrections"] == []
        leaked = [key for key, value in home["refs"].items() if key != "session" and value in memory.content.decode()]
        assert not leaked, (leaked, memory.content[:300])
    contribution = dev.post(
        "/api/v1/memory", {"prompt": STATEMENT, "session_id": home["refs"]["session"]}, format="json"
    )
    assert contribution.status_code == 200, contribution.content[:300]
    assert contribution.json()["trace"]["thought_id"]
    assert space_state(space) == before


def test_names_and_sessions_taken_in_another_space_are_free_in_this_one(space, home, away, enqueued):
    """Attack: B creates a project and a task with A's slugs, and logs a turn in A's session id under A's
    turn id. Without per-space uniqueness, B gets a 409 (TASK_EXISTS / a taken session) that tells it the
    name is used elsewhere, or, worse, B's turn claims the session for B's agent, and A's owner is then refused
    403 SESSION_NOT_YOURS in its own session, or its first turn is answered as a replay of B's. Expected: B's
    writes succeed in B, and A's owner then logs its turn in its session as if B never had."""
    liaison, dev = away["liaison"], away["dev"]
    refs = home["refs"]
    project = liaison.post("/api/v1/projects", {"slug": refs["project"], "name": "mine"}, format="json")
    assert project.status_code == 201, project.content[:300]
    task = liaison.post(
        "/api/v1/tasks", {"project": refs["project"], "slug": refs["task_slug"], "title": "mine"}, format="json"
    )
    assert task.status_code == 201, task.content[:300]
    turn = {"session_id": refs["session"], "turn_id": "t1", "user_prompt": "q", "assistant_response": "a"}
    squat = dev.post("/api/v1/turns", turn, format="json")
    assert squat.status_code == 202, squat.content[:300]
    assert TurnLog.objects.get(session_id=refs["session"]).space_id == dev.agent.space_id

    own_turn = home["owner"].post("/api/v1/turns", turn, format="json")
    assert own_turn.status_code == 202, own_turn.content[:300]
    logged = TurnLog.objects.get(space=space, session_id=refs["session"], turn_id="t1")
    assert logged.agent_id == home["owner"].agent.pk
    assert logged.items.count() == 2  # the two sources of the owner's query in that session


# --- MCP: the same identifiers through the tools ---------------------------------------------------------

#: (tool, arguments). Each tool runs REST's view (colony_mcp.rest), so its answer must hold the same.
MCP_CASES = [
    ("thought_get", {"thought_id": "{thought}"}),
    ("thought_lineage", {"thought_id": "{thought}"}),
    ("thought_retract", {"thought_id": "{thought}", "reason": "mine to withdraw"}),
    ("memory_correct", {"thought_id": "{thought}", "correct_fact": STATEMENT}),
    ("memory_correct", {"thought_id": "{own}", "correct_fact": STATEMENT, "supersedes": ["{thought}"]}),
    ("memory_contribute", {"content": STATEMENT, "refines": "{thought}"}),
    ("memory_contribute", {"content": STATEMENT, "consolidates": ["{own}", "{thought}"]}),
    ("memory_contribute", {"content": STATEMENT, "related_thoughts": ["{thought}"]}),
    ("correction_accept", {"suggestion_id": "{suggestion}"}),
    ("correction_dismiss", {"suggestion_id": "{suggestion}", "reason": "stands"}),
    ("task_get", {"task": "{task_slug}"}),
    ("task_get", {"task": "{task_id}"}),
    ("task_moves", {"task": "{task_slug}"}),
    ("task_transition", {"task": "{task_slug}", "to": "active"}),
    ("task_update_dna", {"task": "{task_id}", "dna": {"pdsa_ref": "docs/x.md"}}),
    (
        "turn_log",
        {
            "session_id": "away-s",
            "turn_id": "1",
            "user_prompt": "q",
            "assistant_response": "a",
            "contradicted_ids": ["{thought}"],
        },
    ),
    (
        "turn_log",
        {
            "session_id": "away-s",
            "turn_id": "1",
            "user_prompt": "q",
            "assistant_response": "a",
            "injected_ids": ["{thought}"],
        },
    ),
]


@pytest.mark.django_db(transaction=True)
def test_every_mcp_tool_answers_another_spaces_id_as_an_unknown_one(asgi_server, space, home, away):
    """Attack over MCP: B's agent calls every tool that takes an identifier (``MCP_CASES``: thought_get,
    thought_lineage, thought_retract, memory_correct and its supersedes, memory_contribute's refines,
    consolidates and related_thoughts, correction_accept / _dismiss, task_get by slug and id, task_moves,
    task_transition, task_update_dna, turn_log's contradicted_ids and injected_ids) with A's identifiers,
    then with unknown ones. Without the rule a tool answers A's id with another error than an unknown id's
    (an existence oracle through the agent's own tool belt). Expected: each pair of error results identical
    once the identifier is blanked, and A unchanged."""
    before = space_state(space)

    def sweep(refs):
        values = {**refs, "own": away["own"]}

        async def body(session):
            tools = Tools(session)
            return [await tools.raw(tool, **filled(arguments, values)) for tool, arguments in MCP_CASES]

        return [
            (is_error, blanked(json.dumps(answer), refs))
            for is_error, answer in in_session(asgi_server.url, away["dev"].token, body)
        ]

    foreign, unknown = sweep(home["refs"]), sweep(unknown_refs())
    for (tool, _), (is_error, answer), other in zip(MCP_CASES, foreign, unknown, strict=True):
        assert is_error, (tool, answer[:300])
        assert (is_error, answer) == other, (tool, answer[:300], other[1][:300])
    assert space_state(space) == before


# --- list cursors ----------------------------------------------------------------------------------------

#: Every list that pages by cursor, with the query that gives it a next page at limit 1.
LISTS = {
    "thoughts": ("/api/v1/thoughts", {"limit": 1}),
    "tasks": ("/api/v1/tasks", {"limit": 1}),
    "corrections": ("/api/v1/corrections", {"limit": 1, "status": "all"}),
    "in_flight": ("/api/v1/agents/dev/in-flight", {"limit": 1}),
    "projects": ("/api/v1/projects", {"limit": 1}),
}


def cursor_of(values: list) -> str:
    """A cursor as api.paging.encode writes one (base64url of a JSON array, padding stripped)."""
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


@pytest.fixture
def two_of_everything(space, agent_factory, thought_factory):
    """Two rows in every list of space A, so each gives a real next_cursor."""
    dev = agent_factory("dev", name="lister")
    first = thought_factory(HOME_FACT)
    thought_factory(HOME_FACT_2)
    for n in range(2):
        CorrectionSuggestion.objects.create(space=space, thought=first, statement=f"s{n}", origin="quality_judge")
        make_task(make_project(space, f"proj-{n}"), slug=f"work-{n}", status="active", role="dev")
    cursors = {}
    for name, (path, query) in LISTS.items():
        response = dev.get(path, query)
        assert response.status_code == 200, (name, response.content[:300])
        cursors[name] = response.json()["next_cursor"]
        assert cursors[name], (name, response.json())
    return dev, cursors


def test_a_cursor_copied_from_another_list_is_a_400(two_of_everything):
    """Attack: ``GET <list>?cursor=<the next_cursor another list endpoint gave>`` for each of the 20 ordered
    pairs of the five paged lists (thoughts, tasks, corrections, in-flight, projects): an agent (or a steered
    one) pastes the wrong list's cursor. Without the rule (a cursor read as whatever it holds) a value of one
    list's order lands in another's keyset filter as another type: a 500, or a page that starts anywhere.
    Expected: 400 VALIDATION_ERROR naming the cursor ("not a cursor this list gave") for every pair."""
    dev, cursors = two_of_everything
    wrong = {}
    for target, (path, query) in LISTS.items():
        for source, cursor in cursors.items():
            if source == target:
                continue
            response = dev.get(path, {**query, "cursor": cursor})
            error = response.json().get("error", {}) if response.status_code >= 400 else {}
            if (
                response.status_code != 400
                or error.get("code") != "VALIDATION_ERROR"
                or "cursor" not in error["message"]
            ):
                wrong[f"{source}->{target}"] = (response.status_code, response.content[:200])
    assert not wrong, wrong


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


#: Cursors no list ever gave: not base64, too long, not JSON, not a list, the wrong arity or types, nesting,
#: text PostgreSQL can't hold.
GARBAGE_CURSORS = {
    "not_base64": "not a cursor!",
    "huge": "A" * 5000,
    "not_json": _b64("not json at all"),
    "an_object": _b64('{"created_at": "2026-01-01T00:00:00+00:00"}'),
    "empty_list": _b64("[]"),
    **{f"{n}_numbers": _b64(json.dumps([1] * n)) for n in range(1, 6)},
    "nested": _b64("[" * 370 + "]" * 370),  # 987 characters: within the field's 1,000
    "nul_in_text": _b64(json.dumps(["a\u0000b"])),
    "lone_surrogate": _b64('["\\ud800"]'),
}


def test_garbage_and_huge_cursors_are_a_400_on_every_list(agent_factory):
    """Attack: each paged list (thoughts, tasks, corrections, in-flight, projects) sent each cursor of
    ``GARBAGE_CURSORS``: not base64, 5,000 characters, base64 of text that is not JSON, of an object, of an
    empty list, of lists of numbers of every arity, of 370 nested lists, of text with a NUL or a lone
    surrogate. Without the rule, a decoder that trusts the shape raises (IndexError, TypeError,
    RecursionError) or hands PostgreSQL what it can't store: a 500. Expected: 400 VALIDATION_ERROR naming the
    cursor, on every list, for every one."""
    dev = agent_factory("dev", name="garbage")
    wrong = {}
    for target, (path, query) in LISTS.items():
        for name, cursor in GARBAGE_CURSORS.items():
            response = dev.get(path, {**query, "cursor": cursor})
            error = response.json().get("error", {}) if response.status_code >= 400 else {}
            if (
                response.status_code != 400
                or error.get("code") != "VALIDATION_ERROR"
                or "cursor" not in error["message"]
            ):
                wrong[f"{name}->{target}"] = (response.status_code, response.content[:200])
    assert not wrong, wrong


TAMPERED_CORRECTION_CURSORS = {
    "not_a_number": ["x", "2026-01-01T00:00:00+00:00", str(uuid.UUID(int=1))],
    "a_fraction": ["0.5", "2026-01-01T00:00:00+00:00", str(uuid.UUID(int=1))],
    "nan": ["NaN", "2026-01-01T00:00:00+00:00", str(uuid.UUID(int=1))],
}


@pytest.mark.parametrize("values", TAMPERED_CORRECTION_CURSORS.values(), ids=TAMPERED_CORRECTION_CURSORS.keys())
def test_a_hand_written_corrections_cursor_is_a_400(dev, space, values):
    """Attack: ``GET /api/v1/corrections?cursor=<base64 of ["x", "<time>", "<uuid>"]>``: a hand-written cursor
    whose first key (the list's ``own_first``, an integer) is not a number. ``api.paging._read`` reads every
    type it has no branch for as text, and the keyset filter hands "x" to an IntegerField: ValueError in the
    view, a 500 INTERNAL_ERROR and an ERROR in the log per call. Expected (SPEC 6): 400 VALIDATION_ERROR naming
    the cursor, as for the other lists."""
    response = dev.get("/api/v1/corrections", {"cursor": cursor_of(values)})
    assert response.status_code == 400, (response.status_code, response.content[:300])
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and "cursor" in error["message"], error


def test_a_cursor_from_another_spaces_list_pages_only_this_spaces_rows(two_of_everything, away):
    """Attack: B's agent pastes the next_cursor of each of A's lists into its own list. A cursor is a
    position, not a grant: without the rule (a cursor read as "continue that list"), B would page on through
    A's rows. Expected: 200 with B's own rows only (the same page B gets for its own list at that position:
    here, B's rows older than A's second row: none of A's)."""
    _, cursors = two_of_everything
    dev = away["dev"]
    home_ids = {str(pk) for pk in Thought.objects.exclude(space=dev.agent.space).values_list("pk", flat=True)}
    home_ids |= {str(pk) for pk in Task.objects.exclude(space=dev.agent.space).values_list("pk", flat=True)}
    home_ids |= {str(pk) for pk in CorrectionSuggestion.objects.values_list("pk", flat=True)}
    for name, (path, query) in LISTS.items():
        response = dev.get(path, {**query, "limit": 50, "cursor": cursors[name]})
        assert response.status_code == 200, (name, response.content[:300])
        text = response.content.decode()
        assert not [pk for pk in home_ids if pk in text], (name, text[:300])
        assert "work-0" not in text and "proj-0" not in text, (name, text[:300])


@pytest.mark.django_db(transaction=True)
def test_the_corrections_pending_tool_with_a_hand_written_cursor_is_a_validation_error(asgi_server, space):
    """The same attack over MCP: ``corrections_pending`` with ``cursor`` = base64 of ``["x", "<time>",
    "<uuid>"]`` (the tool takes any string up to 1,000 characters). The tool runs REST's view, so it gets
    REST's 500: an error result ``{"error": {"code": "INTERNAL_ERROR"}, "status": 500}``. Expected (SPEC 5:
    tool errors carry REST's codes; SPEC 6): a VALIDATION_ERROR result with status 400."""
    dev = make_agent_client(space=space, name="mcp-lister", role="dev")

    async def body(session):
        return await Tools(session).raw(
            "corrections_pending", cursor=cursor_of(TAMPERED_CORRECTION_CURSORS["not_a_number"])
        )

    is_error, answer = in_session(asgi_server.url, dev.token, body)
    assert is_error
    assert (answer.get("status"), answer["error"]["code"]) == (400, "VALIDATION_ERROR"), answer
