"""The board and the task page: columns, filters in the URL, transitions and confirmations a human may give,
DNA edits without gate keys, and tampered posts refused with a message and no change."""

from __future__ import annotations

import pytest

from tasks.models import HumanConfirmation, Task, TransitionLog, dna_digest
from tests import web_support
from tests.tasks_helpers import make_project, make_task

ada = web_support.ada  # the logged-in human fixture, defined once for the web tests

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(space):
    return make_project(space, "colony")


def _body(response) -> str:
    return response.content.decode()


def test_board_has_one_column_per_status_with_cards(client, ada, project):
    make_task(project, slug="write-parser", status="active", role="dev")
    make_task(project, slug="old-thing", status="complete", role="liaison")
    body = _body(client.get("/board/"))
    for status in (
        "backlog",
        "pending",
        "ready",
        "active",
        "approval",
        "approved",
        "testing",
        "review",
        "rework",
        "blocked",
        "complete",
        "cancelled",
    ):
        assert f'data-status="{status}"' in body
    assert 'data-slug="write-parser"' in body and 'href="/tasks/write-parser/"' in body
    # terminal and empty columns start folded, columns with work start open
    assert '<details class="column" data-status="active" open>' in body
    assert '<details class="column" data-status="complete" >' in body
    assert '<details class="column" data-status="backlog" >' in body


def test_card_shows_slug_title_type_role_age_and_blocked_reason(client, ada, project):
    make_task(project, slug="stuck", status="blocked", role="dev", dna={"blocked_reason": "waiting for <the> API key"})
    body = _body(client.get("/board/"))
    assert "Task stuck" in body and ">task<" in body and ">dev<" in body and ">colony<" in body
    assert "Blocked: waiting for &lt;the&gt; API key" in body
    assert "minute" in body  # age


def test_filters_stay_in_the_url_and_filter(client, ada, space, project):
    other = make_project(space, "other")
    make_task(project, slug="dev-task", status="active", role="dev")
    make_task(project, slug="qa-bug", status="active", role="qa", type="bug")
    make_task(other, slug="elsewhere", status="active", role="dev")
    body = _body(client.get("/board/?project=colony&role=dev&type="))
    assert "dev-task" in body and "qa-bug" not in body and "elsewhere" not in body
    assert 'hx-get="/board/?project=colony&amp;role=dev&amp;type="' in body  # the refresh keeps the filters
    assert '<option value="colony" selected>' in body
    assert "qa-bug" in _body(client.get("/board/?type=bug")) and "dev-task" not in _body(client.get("/board/?type=bug"))


def test_a_tampered_filter_is_ignored_with_a_message(client, ada, project):
    make_task(project, slug="dev-task", status="active", role="dev")
    body = _body(client.get("/board/?role=overlord"))
    assert "Filter ignored" in body and "dev-task" in body


def test_board_refresh_returns_only_the_columns(client, ada, project):
    make_task(project, slug="dev-task", status="active", role="dev")
    response = client.get("/board/", headers={"HX-Request": "true"})
    body = _body(response)
    assert body.lstrip().startswith('<div class="board"') and "<html" not in body
    assert "dev-task" in body


def test_board_shows_only_the_current_space(client, ada, other_space, project):
    foreign = make_project(other_space, "rival")
    make_task(foreign, slug="their-secret", status="active", role="dev")
    assert "their-secret" not in _body(client.get("/board/"))


def test_task_page_shows_description_dna_history_and_moves(client, ada, project):
    task = make_task(
        project,
        slug="design",
        status="approval",
        role="liaison",
        description="Design the <b>parser</b>.",
        dna={"pdsa_ref": "docs/design.md", "memory_query_session": "s-1", "human_x": 1},
    )
    body = _body(client.get(f"/tasks/{task.slug}/"))
    assert "Design the &lt;b&gt;parser&lt;/b&gt;." in body
    assert "pdsa_ref" in body and "docs/design.md" in body
    assert "memory_query_session" in body and 'title="written by the workflow, not editable"' in body
    # the textarea holds only the editable DNA
    textarea = body.split('<textarea name="dna"', 1)[1].split("</textarea>", 1)[0]
    assert "pdsa_ref" in textarea and "memory_query_session" not in textarea and "human_x" not in textarea
    # a human may approve or send back from approval; the rest is refused with a reason
    assert 'data-to="approved" data-allowed="true"' in body
    assert 'data-to="rework" data-allowed="true"' in body
    assert 'data-to="complete" data-allowed="false"' in body
    assert "you act as human" in body
    assert "Confirm approval → complete" in body


def test_a_human_moves_a_task_with_a_button_and_the_marker_is_linked(client, ada, project):
    task = make_task(project, slug="design", status="approval", role="liaison")
    response = client.post(
        f"/tasks/{task.slug}/transition/",
        {"dna_digest": dna_digest(task.dna), "to": "approved", "summary": "looks right"},
        follow=True,
    )
    body = _body(response)
    task.refresh_from_db()
    assert task.status == "approved" and task.role == "qa"
    log = TransitionLog.objects.get(task=task)
    assert log.user == ada and log.actor == "human"
    assert "design moved approval → approved" in body
    marker = f'data-marker="{log.marker_id}"><a href="/brain/thoughts/{log.marker_id}/">'
    assert marker + "TASK approval→approved: HUMAN design (colony) — looks right<" in body
    assert "ada (human)" in body


def test_a_move_from_the_board_answers_with_messages_and_refreshes_the_board(client, ada, project):
    task = make_task(project, slug="design", status="approval", role="liaison")
    response = client.post(
        f"/tasks/{task.slug}/transition/",
        {"dna_digest": dna_digest(task.dna), "to": "approved"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert response["HX-Trigger"] == "board-changed"
    assert 'hx-swap-oob="true"' in _body(response) and "design moved approval → approved" in _body(response)


def test_card_move_panel_lists_what_the_human_may_do(client, ada, project):
    task = make_task(project, slug="design", status="approval", role="liaison")
    body = _body(client.get(f"/tasks/{task.slug}/moves/"))
    assert f'hx-post="/tasks/{task.slug}/transition/"' in body
    assert 'data-to="approved" data-allowed="true"' in body


def test_a_transition_the_workflow_does_not_allow_is_refused_and_changes_nothing(client, ada, project):
    task = make_task(project, slug="coding", status="active", role="dev")
    response = client.post(
        f"/tasks/{task.slug}/transition/", {"dna_digest": dna_digest(task.dna), "to": "complete"}, follow=True
    )
    task.refresh_from_db()
    assert task.status == "active" and not TransitionLog.objects.exists()
    assert "transition to “complete” refused" in _body(response)


def test_another_spaces_task_can_neither_be_seen_nor_moved(client, ada, other_space):
    foreign = make_task(make_project(other_space, "rival"), slug="theirs", status="approval", role="liaison")
    assert client.get(f"/tasks/{foreign.slug}/").status_code == 404
    assert client.get(f"/tasks/{foreign.id}/").status_code == 404
    response = client.post(
        f"/tasks/{foreign.id}/transition/", {"dna_digest": dna_digest(foreign.dna), "to": "approved"}, follow=True
    )
    assert "No task" in _body(response)
    client.post(f"/tasks/{foreign.id}/confirm/", {"to_status": "approved", "dna_digest": dna_digest({})})
    client.post(f"/tasks/{foreign.id}/dna/", {"dna": '{"a": 1}', "original": "{}"})
    foreign.refresh_from_db()
    assert foreign.status == "approval" and foreign.dna == {}
    assert not HumanConfirmation.objects.exists() and not TransitionLog.objects.exists()


def test_a_human_confirms_a_gate_and_who_and_when_are_recorded(client, ada, project):
    task = make_task(
        project,
        slug="ship-it",
        status="review",
        role="liaison",
        dna={"abstract_ref": "a.md", "test_pass_count": 3, "test_total_count": 3},
    )
    response = client.post(
        f"/tasks/{task.slug}/confirm/", {"to_status": "complete", "dna_digest": dna_digest(task.dna)}, follow=True
    )
    confirmation = HumanConfirmation.objects.get(task=task)
    assert confirmation.user == ada and confirmation.to_status == "complete"
    body = _body(response)
    assert "review → complete confirmed by ada" in body
    assert "Confirmed by <strong>ada</strong>" in body
    task.refresh_from_db()
    assert task.status == "review"  # confirming is not moving: the liaison's transition consumes it


def test_confirming_a_step_that_has_no_human_gate_is_refused(client, ada, project):
    task = make_task(project, slug="coding", status="active", role="dev")
    response = client.post(
        f"/tasks/{task.slug}/confirm/", {"to_status": "review", "dna_digest": dna_digest({})}, follow=True
    )
    assert "confirmation refused" in _body(response)
    assert not HumanConfirmation.objects.exists()


def test_dna_edit_saves_only_what_changed(client, ada, project):
    task = make_task(project, slug="t", status="active", role="dev", dna={"pdsa_ref": "a.md", "notes": "x"})
    # meanwhile an agent adds a key the page never showed
    Task.objects.filter(pk=task.pk).update(dna={"pdsa_ref": "a.md", "notes": "x", "agent_key": 1})
    response = client.post(
        f"/tasks/{task.slug}/dna/",
        {"dna": '{"pdsa_ref": "b.md", "extra": [1, 2]}', "original": '{"pdsa_ref": "a.md", "notes": "x"}'},
        follow=True,
    )
    task.refresh_from_db()
    assert task.dna == {"pdsa_ref": "b.md", "extra": [1, 2], "agent_key": 1}
    assert "DNA saved" in _body(response)


@pytest.mark.parametrize(
    "key", ["human_approved", "memory_query_session", "memory_contribution_id", "blocked_from_role"]
)
def test_a_gate_key_in_dna_is_refused_and_changes_nothing(client, ada, project, key):
    task = make_task(project, slug="t", status="active", role="dev", dna={"notes": "x"})
    response = client.post(
        f"/tasks/{task.slug}/dna/",
        {"dna": f'{{"notes": "y", "{key}": "s-1"}}', "original": '{"notes": "x"}'},
        follow=True,
    )
    task.refresh_from_db()
    assert task.dna == {"notes": "x"}
    assert f"{key}: gate keys are written by the workflow" in _body(response)


def test_invalid_dna_json_is_refused_with_a_message(client, ada, project):
    task = make_task(project, slug="t", status="active", role="dev", dna={"notes": "x"})
    response = client.post(f"/tasks/{task.slug}/dna/", {"dna": "[1, 2", "original": "{}"}, follow=True)
    assert "not valid JSON" in _body(response)
    task.refresh_from_db()
    assert task.dna == {"notes": "x"}


def test_board_query_count_does_not_grow_with_tasks(client, ada, project, django_assert_num_queries):
    # session, user, spaces, projects, count per status, the cards shown
    for batch in (3, 40):
        for i in range(batch):
            make_task(
                project, slug=f"t-{batch}-{i}", status=["active", "review", "complete", "blocked"][i % 4], role="dev"
            )
        with django_assert_num_queries(6):
            assert client.get("/board/").status_code == 200


def test_task_page_query_count_is_fixed(client, ada, project, django_assert_max_num_queries):
    task = make_task(project, slug="design", status="approval", role="liaison")
    client.post(f"/tasks/{task.slug}/transition/", {"dna_digest": dna_digest(task.dna), "to": "rework"})
    # session, user, spaces, task, parents, depends_on, membership, open confirmations, history
    with django_assert_max_num_queries(9):
        assert client.get(f"/tasks/{task.slug}/").status_code == 200


def test_a_long_column_shows_the_newest_cards_and_counts_the_rest(client, ada, project):
    from web.board import COLUMN_CARDS

    for i in range(COLUMN_CARDS + 5):
        make_task(project, slug=f"done-{i:03d}", status="complete", role="liaison")
    body = _body(client.get("/board/"))
    column = body.split('data-status="complete"', 1)[1].split('data-status="cancelled"', 1)[0]
    assert f'<span class="count">{COLUMN_CARDS + 5}</span>' in column
    assert column.count('class="task-card"') == COLUMN_CARDS
    assert "and 5 more" in column
    assert 'data-slug="done-029"' in column and 'data-slug="done-000"' not in column  # newest first


def test_a_nul_escaped_in_dna_json_is_refused_with_a_message(client, ada, project):
    """The form checks the text for NUL, but JSON's "\\u0000" is one only once parsed: it reached jsonb (a 500)."""
    task = make_task(project, slug="t", status="active", role="dev", dna={"notes": "x"})
    response = client.post(
        f"/tasks/{task.slug}/dna/", {"dna": '{"notes": "a\\u0000b"}', "original": '{"notes": "x"}'}, follow=True
    )
    assert response.status_code == 200 and "NUL" in _body(response)
    task.refresh_from_db()
    assert task.dna == {"notes": "x"}


@pytest.mark.parametrize("number", ["1e400", "NaN", "-Infinity"])
def test_a_number_jsonb_cannot_hold_in_dna_is_refused_with_a_message(client, ada, project, number):
    """json.loads reads 1e400 as infinity and takes NaN / Infinity: jsonb refused them (a 500 from the page)."""
    task = make_task(project, slug="t", status="active", role="dev", dna={"notes": "x"})
    dna = '{"notes": "x", "estimate": ' + number + "}"
    response = client.post(f"/tasks/{task.slug}/dna/", {"dna": dna, "original": '{"notes": "x"}'}, follow=True)
    assert response.status_code == 200 and "Not a finite number" in _body(response)
    task.refresh_from_db()
    assert task.dna == {"notes": "x"}


def test_dna_nested_too_deep_is_refused_with_a_message(client, ada, project):
    """Past ~900 levels json.loads raised RecursionError: a 500 from the page."""
    task = make_task(project, slug="t", status="active", role="dev", dna={"notes": "x"})
    deep = '{"notes": ' + "[" * 5000 + "]" * 5000 + "}"
    response = client.post(f"/tasks/{task.slug}/dna/", {"dna": deep, "original": '{"notes": "x"}'}, follow=True)
    assert response.status_code == 200 and "nested more than 100 levels" in _body(response)
    task.refresh_from_db()
    assert task.dna == {"notes": "x"}
