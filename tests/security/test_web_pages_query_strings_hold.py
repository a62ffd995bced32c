"""The humans' pages hold against odd query strings, form values and htmx headers, and against what
agents write for them to render: no 5xx, no unbounded page, no state a GET piles up.

SPEC 6: "Bad input gets a 4xx ..., never a 500, and changes nothing." "Text shown in the UI is
escaped." "Production-safe by default: ... bounded work before authentication". The board draws at
most ``web.board.COLUMN_CARDS`` cards per column and counts the rest, the explorer pages 20 thoughts
at a time: a page a human opens does work bounded by what the page shows, not by what agents wrote.

(``tests/security/test_web_pages_hold.py`` covers the admin and cross-space links; this module the
pages' own inputs.)
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import pytest
from django.test import Client

from brain.models import CorrectionSuggestion, Thought
from tasks.models import Task, TransitionLog, dna_digest
from tests.conftest import fake_vector
from tests.security.support import remember
from tests.tasks_helpers import make_project, make_task
from tests.web_support import make_human

pytestmark = pytest.mark.django_db

#: Stored markup an agent (or a prompt injection steering it) writes into what humans read.
MARKUP = "<img src=x onerror=alert(1)>\"'><script>alert(2)</script>"


def _store(space, content, **fields):
    from brain.services.thoughts import thought_create

    return thought_create(
        space=space, content=content, contributor_id="agent-dev-1", contributor_name="dev-1",
        embedding=fake_vector(content), **fields,
    )  # fmt: skip


def _thought_links(body: str) -> int:
    return body.count('href="/brain/thoughts/')


# --- the thought page's lineage -------------------------------------------------------------------
def _layers(dev, *, width: int, levels: int) -> list[str]:
    """``levels`` layers of ``width`` consolidations, each consolidating every thought of the layer
    below (an agent may consolidate thoughts that are already superseded): a DAG of width × levels
    thoughts in which every path down is distinct."""
    layer = [remember(dev, f"Original fact {i} about the build cache and how it evicts entries.") for i in range(width)]
    for level in range(levels):
        layer = [
            remember(dev, f"Merged view {level}-{j} of the build cache facts from the layer below.", consolidates=layer)
            for j in range(width)
        ]
    return layer


@pytest.mark.parametrize("direction", ["ancestors", "descendants"])
def test_a_lattice_of_consolidations_does_not_blow_up_the_thought_page(client, space, dev, fake_embedder, direction):
    """Attack: an agent builds 8 layers of 3 consolidations, each consolidating all 3 thoughts of the
    layer below (25 memory calls, ``consolidates`` takes thoughts already superseded). The thought page
    draws the lineage as trees (``web.lineage.lineage_trees``) that repeat a node under each of its
    parents, so every distinct path becomes a list item: 3^8 paths, ~9,800 links and ~3 MB of HTML for
    25 thoughts; with 4 per layer and the page's full depth of 10 (41 calls) ~1.4 million items, and the
    page never answers (CPU and memory of the web process for every human who opens it).
    Instead: the page's size follows the number of thoughts in the lineage (each shown a bounded
    number of times, or the tree cut with "follow the links" as the depth already is)."""
    if direction == "ancestors":
        top = _layers(dev, width=3, levels=7)
        root = remember(dev, "The top summary of the build cache facts, merged from all the layers.", consolidates=top)
    else:  # the same lattice below a thought: every layer-1 node consolidates the root and a filler
        root = remember(dev, "The root fact about the build cache that everything below builds on.")
        layer = [
            remember(dev, f"Build cache view {j}, merged with the root fact.", consolidates=[root, filler])
            for j, filler in enumerate(remember(dev, f"Filler fact {j} about cache warmup timing.") for j in range(3))
        ]
        for level in range(7):
            layer = [
                remember(dev, f"Deeper merged view {level}-{j} of the build cache facts.", consolidates=layer)
                for j in range(3)
            ]
    thoughts = Thought.objects.filter(space=space).count()
    client.force_login(make_human("ada", spaces=(space,)))
    started = time.monotonic()
    response = client.get(f"/brain/thoughts/{root}/")
    elapsed = time.monotonic() - started
    body = response.content.decode()
    assert response.status_code == 200
    assert _thought_links(body) <= 4 * thoughts + 20, (_thought_links(body), thoughts, len(body), elapsed)
    assert len(body) < 500_000, len(body)


# --- lists a page renders whole ------------------------------------------------------------------
LIST_ROWS = 120
LIST_CAP = 100


def _related(space, target):
    for i in range(LIST_ROWS):  # as POST /api/v1/memory {"related_thoughts": [target]} stores them (bidirectional)
        _store(space, f"Related note {i}: the staging refresh touches table number {i}.", related_thoughts=[target.id])
    return "Related note"


def _suggestions(space, target):
    # What the contradiction detector raises for each distinct contradicting statement an agent contributes
    # (brain.services.suggestions.suggestion_create reuses only an identical pending statement).
    CorrectionSuggestion.objects.bulk_create(
        CorrectionSuggestion(
            space=space,
            thought=target,
            statement=f"Contradiction {i}: it runs at {i}:00.",
            origin="contradiction_detector",
        )
        for i in range(LIST_ROWS)
    )
    return 'class="panel suggestion"'


def _corrections(space, target):
    from brain.services.corrections import thought_correct

    for i in range(LIST_ROWS):  # as POST /api/v1/thoughts/{id}/correct does, once per call
        thought_correct(
            space=space, agent=None, content="", topic="staging", corrected_fact=target.content,
            correct_fact=f"Correction {i}: the staging refresh runs at {i % 24}:30 UTC.", supersedes=[target.id],
            contributor_id="agent-dev-1", contributor_name="dev-1", vector=fake_vector(f"correction {i}"),
        )  # fmt: skip
    return "the staging refresh runs at"


@pytest.mark.parametrize("fill", [_related, _suggestions, _corrections], ids=["related", "suggestions", "corrections"])
def test_the_thought_page_does_not_render_every_linked_row(client, space, fill, fake_embedder):
    """Attack: agents link thousands of thoughts to one popular thought (``related_thoughts`` is
    bidirectional), contribute thousands of distinct contradicting statements about it (each a pending
    suggestion) or post thousands of corrections of it (at the API's 3000 calls a minute). The thought
    page (``web.views.brain.thought_detail``) renders ``related``, ``suggestions`` (each with two forms)
    and ``corrected_by`` whole: today all 120 of each here, and a page of megabytes for every human who
    opens the thought. Instead: each list shows a bounded page (as the board's columns do) and counts
    or links the rest."""
    target = _store(space, "The staging database is refreshed nightly at 02:00 UTC.", topic="staging")
    marker = fill(space, target)
    client.force_login(make_human("ada", spaces=(space,)))
    body = client.get(f"/brain/thoughts/{target.id}/").content.decode()
    assert body.count(marker) <= LIST_CAP, body.count(marker)


def test_the_task_pages_transition_history_is_bounded(client, space, agent_factory):
    """Attack: a liaison agent blocks and restores one task in a loop (PATCH the blocked_reason, block,
    restore: both rules are the liaison's). Each move writes a TransitionLog row and a marker, and the
    task page (``web.views.board.task_detail`` via ``web.selectors.transition_history``) renders every
    row with its marker: 120 rows here after 60 loops; at the API's throttle (3000/min) a day of it
    makes the page hundreds of megabytes. Instead: the history shows the newest rows (as the board shows
    the newest 25 cards) and says how many more there are."""
    liaison = agent_factory("liaison")
    make_task(make_project(space, "colony"), slug="loop", status="active", role="dev")
    for i in range(60):
        reason = {"blocked_reason": f"waiting {i}"}
        assert liaison.patch("/api/v1/tasks/loop/dna", reason, format="json").status_code == 200
        assert liaison.post("/api/v1/tasks/loop/transition", {"to": "blocked"}, format="json").status_code == 200
        assert liaison.post("/api/v1/tasks/loop/transition", {"to": "restore"}, format="json").status_code == 200
    assert TransitionLog.objects.filter(task__slug="loop").count() == 120
    client.force_login(make_human("ada", spaces=(space,)))
    body = client.get("/tasks/loop/").content.decode()
    assert body.count('class="marker"') <= LIST_CAP, body.count('class="marker"')


# --- htmx -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "current"),
    [("/board/", "http://["), ("/home/health/", "http://[::1/"), ("/tasks/fix/moves/", "https://a]b/")],
)
def test_an_anonymous_htmx_request_with_a_malformed_current_url_is_not_a_500(space, url, current):
    """Attack: anyone, not logged in, sends a page's address with ``HX-Request: true`` and
    ``HX-Current-URL: http://[``. ``web.views.common.space_required`` parses the header with
    ``urllib.parse.urlparse``, which raises ValueError ("Invalid IPv6 URL"): a 500 and a logged
    traceback per request, before authentication. Instead: the same 401 with ``HX-Redirect`` to the
    login page (the current page taken as "/" when the header is not a URL)."""
    client = Client(raise_request_exception=False)
    response = client.get(url, headers={"HX-Request": "true", "HX-Current-URL": current})
    assert response.status_code == 401, response.status_code
    assert response["HX-Redirect"].startswith("/login/")


def test_the_boards_htmx_refresh_does_not_pile_up_a_message_per_refresh(client, space):
    """Attack: a human opens a board link with a filter the form refuses (``/board/?role=bogus``, a
    shared or stale bookmark). The board refreshes its columns by htmx every 5 s; each refresh adds
    "Filter ignored — ..." to the messages (a GET that writes), but the columns partial never shows them,
    so they pile up: after an hour 720, after 200 refreshes here the next page shows 200 identical
    alerts. Instead: a refresh adds no message the partial does not show (the full page already said it
    once), so the next page shows at most one."""
    client.force_login(make_human("ada", spaces=(space,)))
    assert "Filter ignored" in client.get("/board/?role=bogus").content.decode()  # the page itself says it
    for _ in range(200):
        assert client.get("/board/?role=bogus", headers={"HX-Request": "true"}).status_code == 200
    assert client.get("/").content.decode().count("Filter ignored") <= 1


# --- what holds -----------------------------------------------------------------------------------
ODD_QUERIES = [
    "page=1e9",
    "page=-1",
    "project=" + "x" * 5000,
    "role=dev&role=qa",
    "type=%ff",
    "q=" + "a" * 20000,
    "q=%ed%a0%80",
    "q=%e2%80%ae",
    "q=' OR 1=1 --",
    "q=:*%26!|",
    "cursor=" + "A" * 999,
    "cursor=W10",
    # a cursor of year 1 with the largest offset PostgreSQL reads
    "cursor=WyIwMDAxLTAxLTAxVDAwOjAwOjAwKzE1OjU5IiwgIjAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMCJd",
    "days=1e9",
    "days=99999999999999999999",
    "days=14&days=90",
    "agent=" + "é" * 300,
    "topic=" + "\u0130" * 300,
    "topic=%c0%80",
    "category=correction&q=x&category=nope",
]
ODD_PAGES = [
    *("/", "/home/health/", "/board/", "/brain/", "/quality/", "/tokens/", "/tasks/fix/", "/tasks/fix/moves/"),
    *("/tasks/" + "\u0130" * 200 + "/", "/tasks/" + "9" * 40 + "/", "/tasks/" + "x" * 3000 + "/moves/"),
]


def test_odd_query_strings_on_every_page_are_answered_without_a_500(space, fake_embedder):
    """Attack: a human (or a link someone sends them) opens every page with odd query strings:
    scientific, negative and 20-digit numbers, repeated parameters, 20,000-character searches, invalid
    UTF-8 and surrogates, forged paging cursors, unknown choices, odd task refs. Instead (holds): every
    answer is below 500."""
    make_task(make_project(space, "colony"), slug="fix", status="active", role="dev")
    client = Client(raise_request_exception=False)
    client.force_login(make_human("root", spaces=(space,), superuser=True))
    failures = [
        (page, query[:60], status)
        for page in ODD_PAGES
        for query in ODD_QUERIES
        if (status := client.get(f"{page}?{query}").status_code) >= 500
    ]
    assert failures == []


def test_odd_form_values_change_nothing_and_never_redirect_off_site(space, agent_factory, fake_embedder):
    """Attack: a logged-in human posts the pages' forms with values the forms never offer: 25-digit
    token days and ids, a summary of 100,000 characters, JSON surrogates and infinities in DNA, a
    non-object "original" DNA, and ``next=`` values that leave the site
    (``//evil.example``, ``/\\evil.example``, ``https://evil.example``). Instead (holds): no 5xx, the
    task neither moves nor changes DNA, no URL token is made, and every redirect stays on the site."""
    from core.models import UrlToken

    agent_factory("dev", name="dev-1")
    task = make_task(make_project(space, "colony"), slug="fix", status="active", role="dev", dna={"keep": 1})
    digest = dna_digest(task.dna)
    big = "9" * 25
    posts = [
        (f"/tokens/{big}/revoke/", {}),
        ("/tokens/", {"agent": "dev-1", "days": big}),
        ("/tokens/", {"agent": "dev-1", "days": "-" + big}),
        ("/tokens/", {"agent": "dev-1", "days": "1e3"}),
        ("/tasks/fix/transition/", {"to": "review", "dna_digest": digest, "summary": "s" * 100_000}),
        ("/tasks/fix/transition/", {"to": "\u0130" * 20, "dna_digest": digest}),
        ("/tasks/fix/confirm/", {"to_status": "approved", "dna_digest": "0" * 64}),
        ("/tasks/fix/dna/", {"dna": '{"a": "\\ud800"}'}),
        ("/tasks/fix/dna/", {"dna": '{"\\udfff": 1}'}),
        ("/tasks/fix/dna/", {"dna": '{"a": 1e999}'}),
        ("/tasks/fix/dna/", {"dna": '{"a": 1}', "original": "[]"}),
    ]
    offsite = (
        "//evil.example/",
        "/\\evil.example/",
        "https://evil.example/",
        "\t//evil.example/",
        "/%2F/evil.example/",
    )
    for nxt in offsite:
        posts += [
            ("/space/", {"space": "default", "next": nxt}),
            ("/tasks/fix/transition/", {"to": "cancelled", "dna_digest": digest, "next": nxt}),
            ("/tasks/fix/confirm/", {"to_status": "approved", "dna_digest": digest, "next": nxt}),
        ]
    client = Client(raise_request_exception=False)
    client.force_login(make_human("ada", spaces=(space,)))
    for url, data in posts:
        response = client.post(url, data)
        assert response.status_code < 500, (url, response.status_code)
        location = response.get("Location", "")
        assert "evil.example" not in urlsplit(location.strip()).netloc, (url, location)
        assert not location.startswith(("//", "/\\", "http")), (url, location)
    task = Task.objects.get(pk=task.pk)
    assert (task.status, task.dna) == ("active", {"keep": 1})
    assert not UrlToken.objects.exists()


@pytest.mark.parametrize("page", ["/", "/board/", "/board/?project=p2", "/tasks/xss/", "/tasks/xss/moves/", "thought"])
def test_markup_agents_write_is_shown_as_text_on_every_page(client, space, agent_factory, fake_embedder, page):
    """Attack: an agent writes markup into what humans read: a task title, DNA keys and values, a
    blocked reason, a project name, a thought's content, topic, tags and a ``javascript:`` source URL.
    Instead (holds): every page shows it as text; no tag or handler of it reaches the HTML."""
    dev = agent_factory("dev", name="dev-x")
    thought = remember(dev, "A fact about the deploy pipeline caches " + MARKUP, topic="t" + MARKUP, tags=[MARKUP],
                       source_ref={"type": "url", "value": "javascript:alert(1)//" + MARKUP})  # fmt: skip
    assert dev.post("/api/v1/projects", {"slug": "p2", "name": MARKUP}, format="json").status_code == 201
    created = dev.post(
        "/api/v1/tasks",
        {"project": "p2", "slug": "xss", "title": MARKUP, "type": "task", "dna": {MARKUP: MARKUP, "note": MARKUP}},
        format="json",
    )
    assert created.status_code == 201, created.content
    Task.objects.filter(slug="xss").update(status="blocked", dna={MARKUP: MARKUP, "blocked_reason": MARKUP})
    client.force_login(make_human("ada", spaces=(space,)))
    body = client.get(f"/brain/thoughts/{thought}/" if page == "thought" else page).content.decode()
    if "moves" not in page:  # the move panel shows no agent text
        assert "&lt;img src=x" in body  # the text is there, escaped
    assert "<img src=x" not in body and "<script>alert" not in body and 'href="javascript:' not in body
