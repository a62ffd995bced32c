"""What a human sees of the text agents write: the pages and the admin show it as the agents wrote it,
as text, and nothing an agent writes changes what the page says about the rest.

SPEC 6: "Text shown in the UI is escaped." SPEC 3.4: a human confirms a task as they saw it (the task
page's forms carry the digest of the DNA the page showed, tests/security/test_tasks_hold_what_a_human_saw).

Escaping holds everywhere (the last test walks every admin list and form and the pages not covered by
tests/security/test_web_pages_query_strings_hold with markup in every text field). What escaping
can't stop is a Django template gotcha: ``{{ some_dict.items }}`` looks the *key* ``"items"`` up
before it calls the method, so a page that looped over a dict of an agent's DNA keys that way would
let a DNA key named ``items`` decide what the DNA list shows (the task page gets the DNA as pairs).
"""

from __future__ import annotations

import html
import re

import pytest

from tasks.models import Task, TransitionLog
from tests.tasks_helpers import make_project, make_task
from tests.web_support import ada  # noqa: F401 - a fixture (pytest finds it by name)

pytestmark = pytest.mark.django_db

#: Markup in every shape a template slip would let through: an element, an attribute break, an SVG
#: handler, a javascript: URL.
MARKUP = "<x-pwn a=1>\"'><svg/onload=alert(1)>javascript:alert(1)"
RAW = re.compile(r"<x-pwn|<svg/onload|(?:href|src|action)=\"javascript:", re.I)


# --- helpers --------------------------------------------------------------------------------------
def _dna_shown(page: str) -> list[tuple[str, str]]:
    """The (key, value) pairs of the task page's DNA list, as a human reads them."""
    match = re.search(r'<dl class="meta dna">(.*?)</dl>', page, re.S)
    assert match, "the task page has no DNA list"
    pairs = re.findall(r"<dt>(.*?)</dt><dd><pre>(.*?)</pre></dd>", match.group(1), re.S)
    return [(html.unescape(re.sub(r"<[^>]+>.*?</[^>]+>", "", k)).strip(), html.unescape(v)) for k, v in pairs]


# --- 1. a DNA key named "items" forges the DNA list a human approves on -----------------------------
def test_the_task_pages_dna_list_shows_the_tasks_own_dna_whatever_its_keys(client, ada, space, agent_factory):  # noqa: F811
    """Attack: the liaison agent points a task awaiting approval at an unreviewed design
    (``pdsa_ref`` docs/unreviewed.md) and adds one more DNA key, ``items``, whose value is a list of
    pairs: ``[["pdsa_ref", "docs/design.md"], ["qa_review", "approved"]]``. The task page's DNA list is
    ``{% for key, value in dna_editable.items %}``; Django's template engine looks ``items`` up as a
    dict key first, so the list shows the agent's pairs instead of the DNA: "pdsa_ref docs/design.md,
    qa_review approved", and neither the real ``pdsa_ref`` nor the ``items`` key. Ada reads the
    reviewed design and clicks "Move to approved"; the page's form carries the digest of the real DNA,
    so the move goes through and approves docs/unreviewed.md, with a marker naming her.

    Expected (SPEC 3.4: a human confirms the task as they saw it; SPEC 6: text shown as written): the
    DNA list shows every key of the task's DNA with its own value, ``items`` included, and nothing
    else; Ada sees docs/unreviewed.md before she moves it."""
    liaison = agent_factory("liaison")
    task = make_task(
        make_project(space), slug="design-x", status="approval", role="liaison", dna={"pdsa_ref": "docs/design.md"}
    )
    forged = [["pdsa_ref", "docs/design.md"], ["qa_review", "approved"]]
    patched = liaison.patch(
        f"/api/v1/tasks/{task.slug}/dna", {"pdsa_ref": "docs/unreviewed.md", "items": forged}, format="json"
    )
    assert patched.status_code == 200, patched.content

    page = client.get(f"/tasks/{task.slug}/").content.decode()
    shown = dict(_dna_shown(page))
    assert set(shown) == {"pdsa_ref", "items"}, shown
    assert shown["pdsa_ref"] == "docs/unreviewed.md", shown


@pytest.mark.parametrize("value", ["see docs/spec.md", 3, {"a": 1, "b": 2, "c": 3}], ids=["text", "number", "object"])
def test_a_dna_key_named_items_does_not_break_the_task_page(client, ada, space, agent_factory, value):  # noqa: F811
    """Attack: an agent writes the DNA key ``items`` (a text, a number, an object of three keys) through
    PATCH /api/v1/tasks/{ref}/dna, which takes it. The task page's ``dna_editable.items`` then resolves to
    that value; the ``{% for key, value in ... %}`` loop can't unpack it (ValueError, TypeError) and the
    page is a 500 for every human, so nobody can read the task, edit its DNA or give its human
    confirmation there.

    Expected (SPEC 6: bad input never makes a 500; text shown as written): the page answers 200 and
    lists ``items`` with its value like any other key."""
    dev = agent_factory("dev")
    task = make_task(make_project(space), slug="notes", status="active", role="dev", dna={"branch": "fix/ci"})
    patched = dev.patch(f"/api/v1/tasks/{task.slug}/dna", {"items": value}, format="json")
    assert patched.status_code == 200, patched.content

    client.raise_request_exception = False
    response = client.get(f"/tasks/{task.slug}/")
    assert response.status_code == 200, response.status_code
    assert {key for key, _ in _dna_shown(response.content.decode())} == {"branch", "items"}


# --- 2. a DNA key that reads as the reserved human_ namespace -----------------------------------------
@pytest.mark.parametrize(
    "key",
    [" human_confirmed_by", "Human_confirmed_by", "hum\u0430n_confirmed_by", "\uff48uman_confirmed_by"],
    ids=["leading space", "capital", "cyrillic a", "full-width h"],
)
def test_an_agent_can_not_write_a_dna_key_that_reads_as_a_reserved_human_key(client, ada, space, agent_factory, key):  # noqa: F811
    """Attack: DNA keys starting with ``human_`` are refused to agents (PROTECTED_DNA_PREFIXES: "written
    by the workflow engine or by a human, never through DNA"). The check is ``key.startswith("human_")``
    on the key as sent, so ``" human_confirmed_by"`` (a leading space) and ``"Human_confirmed_by"`` are
    stored (a trailing space is already refused: that key still starts with ``human_``). The task page
    prints the key in a ``<dt>``, where HTML drops the leading space: the human reads
    "human_confirmed_by: boss" in the DNA of a task nobody confirmed.

    Expected (SPEC 6; tasks.services.tasks.dna_validate): a key that reads as a protected one once
    surrounding space and case are set aside is refused like the key itself (400 PROTECTED_DNA_KEY or
    INVALID_DNA) and the DNA is unchanged."""
    liaison = agent_factory("liaison")
    task = make_task(make_project(space), slug="gated", status="approval", role="liaison", dna={"x": 1})
    response = liaison.patch(f"/api/v1/tasks/{task.slug}/dna", {key: "boss"}, format="json")
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert Task.objects.get(pk=task.pk).dna == {"x": 1}
    page = client.get(f"/tasks/{task.slug}/").content.decode()
    assert not any(k.strip().lower().startswith("human_") for k, _ in _dna_shown(page))


# --- 3. what holds: markup in every text field, on every admin list and form -------------------------
def _fill_text_fields(obj) -> None:
    from django.db import models

    for field in obj._meta.concrete_fields:
        if isinstance(field, (models.CharField, models.TextField)) and not field.choices:
            if field.name in {"key_hash", "prefix", "slug", "source_sha256", "password", "username", "email"}:
                continue
            setattr(obj, field.name, f"{MARKUP} {field.name}"[: field.max_length or 10_000])


def test_markup_in_every_text_field_is_text_on_the_admin_and_the_other_pages(client, space, agent_factory):
    """Holds (a guard). Attack: markup (an element, an attribute break, an SVG handler, a
    ``javascript:`` URL) in every text and JSON field an agent's calls reach: a thought's content,
    contributor, tags, facts, metadata and source, a query log, a correction suggestion's statement,
    reason and draft, a task's title, description and DNA, a transition's summary and DNA change, a turn
    log's prompt, response, tool calls and session, a turn item's excerpt and judge details, a
    confidence change, a rollup's agent name, a judge validation, a URL token's label. Expected (SPEC 6:
    text shown in the UI is escaped): no admin list, change form or confirmation page, and neither the
    quality dashboard nor the URL-token page, writes any of it as markup."""
    from brain.models import CorrectionSuggestion, QueryLog, Thought
    from brain.services.thoughts import thought_create
    from core import services
    from quality.models import ConfidenceChange, JudgeValidation, QualityRollup, SessionOwner, TurnItem, TurnLog
    from tests.conftest import fake_vector
    from tests.web_support import make_human

    dev = agent_factory("dev", name="dev-x")
    thought = thought_create(
        space=space,
        content=MARKUP,
        contributor_id=MARKUP[:100],
        contributor_name=MARKUP,
        embedding=fake_vector("deploy notes"),
        tags=[MARKUP[:90]],
        topic="deploys",
        source_ref={"type": "url", "value": "javascript:alert(1)"},
        context_metadata={MARKUP: MARKUP},
        alternatives_considered=MARKUP,
        corrected_fact=MARKUP,
        correct_fact=MARKUP,
    )
    marker = thought_create(
        space=space,
        content=MARKUP + " marker",
        contributor_id="system",
        contributor_name="system",
        embedding=fake_vector("marker"),
        thought_category="transition_marker",
    )
    Thought.objects.filter(pk=thought.pk).update(accessed_by=[MARKUP[:90]], co_retrieved_with={MARKUP: 1})
    QueryLog.objects.create(
        space=space,
        agent=dev.agent,
        agent_ref=MARKUP[:100],
        session_id=MARKUP[:100],
        query_text=MARKUP,
        results=[{"id": MARKUP}],
    )
    CorrectionSuggestion.objects.create(
        space=space,
        thought=thought,
        statement=MARKUP,
        reason=MARKUP,
        origin="agent",
        confidence=0.5,
        session_id=MARKUP[:100],
        draft={MARKUP: MARKUP},
        agent=dev.agent,
    )
    project = make_project(space, "p1")
    type(project).objects.filter(pk=project.pk).update(name=MARKUP)
    task = make_task(project, slug="tk", status="approval", role="liaison", dna={MARKUP: MARKUP}, description=MARKUP)
    Task.objects.filter(pk=task.pk).update(title=MARKUP)
    TransitionLog.objects.create(
        task=task,
        rule_key="active->approval",
        from_status="active",
        to_status="approval",
        actor="dev",
        agent=dev.agent,
        marker=marker,
        summary=MARKUP,
        dna_diff={"added": {MARKUP: MARKUP}, "removed": {}, "changed": {}},
    )
    turn = TurnLog(space=space, agent=dev.agent, injected_from="hook")
    _fill_text_fields(turn)
    turn.tool_calls = [{"name": MARKUP, "input": MARKUP}]
    turn.save()
    item = TurnItem(
        turn=turn,
        thought=thought,
        position=0,
        score_at_injection=0.5,
        in_injection=True,
        content_length=10,
        judge_details={MARKUP: MARKUP},
    )
    _fill_text_fields(item)
    item.save()
    SessionOwner.objects.create(space=space, agent=dev.agent, session_id=MARKUP[:100])
    ConfidenceChange.objects.create(
        space=space,
        thought=thought,
        turn=turn,
        agent_name=MARKUP[:100],
        used=True,
        contradicted=False,
        usage_score=0.5,
        contradiction_score=0.1,
        old_confidence=0.5,
        new_confidence=0.6,
        changed_at="2026-01-01T00:00:00Z",
    )
    QualityRollup.objects.create(
        space=space, day="2026-01-01", agent_name=MARKUP[:100], computed_at="2026-01-01T00:00:00Z"
    )
    JudgeValidation.objects.create(
        judge_name=MARKUP[:50],
        source=MARKUP,
        source_sha256="0" * 64,
        turns=1,
        items=1,
        details={MARKUP: MARKUP},
        on_topic_agreement=0.5,
        used_agreement=0.5,
        contradicted_agreement=0.5,
        trusted=False,
    )
    services.url_token_create(agent=dev.agent, days=7, label=MARKUP[:100], created_by=MARKUP[:150])

    client.force_login(make_human("root", spaces=(space,), superuser=True))
    client.raise_request_exception = False
    admin_models = [
        ("brain", "thought", thought.pk),
        ("brain", "querylog", None),
        ("brain", "correctionsuggestion", None),
        ("tasks", "project", project.pk),
        ("tasks", "task", task.pk),
        ("tasks", "transitionlog", None),
        ("quality", "turnlog", turn.pk),
        ("quality", "turnitem", item.pk),
        ("quality", "sessionowner", None),
        ("quality", "confidencechange", None),
        ("quality", "qualityrollup", None),
        ("quality", "judgevalidation", None),
        ("core", "agent", dev.agent.pk),
        ("core", "urltoken", None),
    ]
    urls = ["/quality/", "/tokens/", "/admin/"]
    for app, model, pk in admin_models:
        urls.append(f"/admin/{app}/{model}/")
        if pk is None:
            from django.apps import apps

            pk = apps.get_model(app, model).objects.values_list("pk", flat=True).first()
        urls.append(f"/admin/{app}/{model}/{pk}/change/")
    for url in urls:
        response = client.get(url)
        body = response.content.decode()
        assert response.status_code == 200, (url, response.status_code)
        assert not RAW.search(body), (url, body[max(0, RAW.search(body).start() - 200) :][:400])
    confirm = client.post("/admin/tasks/task/", {"action": "confirm_approved", "_selected_action": [task.pk]})
    assert confirm.status_code == 200 and "&lt;x-pwn" in confirm.content.decode()
    assert not RAW.search(confirm.content.decode())
