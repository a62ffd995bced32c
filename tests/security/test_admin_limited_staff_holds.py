"""The admin as a staff user with LIMITED permissions uses it (SPEC 5 admin, SPEC 6; docs/operations.md
"The admin edits what people decide and keeps what the workflow and the formulas write").

The user here is ``is_staff`` with only the model permissions a test grants
(``view_agent``, ``add_judgevalidation``, ``change_project``...): the kind of account an operator hands a
colleague to look at the agents or tidy the projects. Each test is an attack and the rule that should hold
instead: bad input is a 4xx and never a 500, what the formulas and the workflow write is not a form field,
links stay within their space, and the audit trail of the workflow is not rewritten by a delete elsewhere.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from brain.models import Thought
from core.models import AgentToken
from quality import formulas
from quality.models import JudgeValidation
from quality.selectors import judge_trust
from tasks.models import HumanConfirmation, TransitionLog, dna_digest
from tests.security import support
from tests.tasks_helpers import make_agent, make_project, make_task
from tests.web_support import admin_form_data

pytestmark = pytest.mark.django_db

boss = support.boss  # a fixture: a superuser, member of the space, logged in on ``client``


def staff_with(client, *codenames: str, member_of=None, name: str = "clerk"):
    """A staff user (not a superuser) holding only the model permissions ``codenames``, logged in on ``client``."""
    user = get_user_model().objects.create_user(name, f"{name}@example.com", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    assert user.user_permissions.count() == len(codenames)
    if member_of is not None:
        member_of.members.add(user)
    client.force_login(user)
    return user


def _admin_save(client, url, **changes):
    data = admin_form_data(client.get(url))
    data.update(changes)
    return client.post(url, data)


# --- changelist query strings ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "permission, url, query",
    [
        # a date part Python can't build: only the date hierarchy's own drill-down is caught (core.admin._ChangeList)
        ("view_agent", "/admin/core/agent/", "created_at__year=99999999999"),  # OverflowError
        ("view_task", "/admin/tasks/task/", "created_at__year=-5"),  # ValueError: year -5 is out of range
        ("view_thought", "/admin/brain/thought/", "created_at__iso_year=99999999999"),
        ("view_urltoken", "/admin/core/urltoken/", "created_at__year__gt=99999999999"),
        ("view_user", "/admin/auth/user/", "date_joined__year=99999999999"),
        # a regular expression PostgreSQL can't compile: DataError
        ("view_thought", "/admin/brain/thought/", "content__regex=("),
        ("view_space", "/admin/core/space/", "name__iregex=["),
        # an array lookup whose value is not a list of UUIDs
        ("view_thought", "/admin/brain/thought/", "source_ids__contains=zz"),
    ],
)
def test_an_odd_filter_in_a_view_only_users_list_is_not_a_500(client, space, thought_factory, permission, url, query):
    """Attack: a staff user who may only look at one model (``view_agent``, say) opens its list with a filter
    of their own in the query string: ``/admin/core/agent/?created_at__year=99999999999``, ``?name__iregex=[``,
    ``/admin/brain/thought/?source_ids__contains=zz``. Django's admin allows any lookup on a model's own fields;
    the year past ``datetime.MAXYEAR`` (or below 1) raises OverflowError/ValueError when the query is built, an
    invalid regular expression is PostgreSQL's DataError, the array value a cast error: each is a 500 with its
    traceback (DEBUG on) and an error page. ``core.admin._ChangeList`` catches the date hierarchy's own
    drill-down only, and ``auth.User``'s admin is Django's, not a ColonyModelAdmin.

    Instead (SPEC 6: bad input gets a 4xx, never a 500): the list answers as for any bad filter (Django's
    redirect to ``?e=1``, or a 400)."""
    staff_with(client, permission)
    thought_factory("A thought, so the list has a row to filter.")
    make_agent(space, "dev")
    client.raise_request_exception = False
    response = client.get(f"{url}?{query}")
    assert response.status_code < 500, (url, query, response.status_code)


# --- what the formulas write --------------------------------------------------------------------------
def test_a_staff_user_cannot_forge_a_trusted_judge_in_the_admin(client, space):
    """Attack: a staff user with ``add_judgevalidation`` (a colleague asked to "look after the quality pages")
    posts /admin/quality/judgevalidation/add/ for the configured judge (``embedding``) with every agreement at
    0.99, ``trusted`` ticked and ``details`` naming the current trust rule. No labelled file was run:
    ``quality.selectors.judge_trust`` reads the newest row, the judge is now trusted, and its verdicts move
    every judged thought's usage and contradiction EMAs (SPEC 4.2: a judge below 85% on any metric is not
    trusted for ranking; 4.4). The offline judge measures 84.4% on contradictions (brain/judging).

    Instead: a judge's validation is what ``manage.py validate_judge`` computed; the admin lists it and can't
    add one (nor change its numbers), and the judge stays untrusted."""
    staff_with(client, "add_judgevalidation", "change_judgevalidation", "view_judgevalidation")
    assert not judge_trust(judge_name="embedding").trusted
    response = client.post(
        "/admin/quality/judgevalidation/add/",
        {
            "judge_name": "embedding",
            "source": "labels.jsonl",
            "source_sha256": "0" * 64,
            "turns": 500,
            "items": 2000,
            "on_topic_agreement": 0.99,
            "used_agreement": 0.99,
            "contradicted_agreement": 0.99,
            "trusted": "on",
            "details": json.dumps({"trust_rule": formulas.JUDGE_TRUST_RULE}),
        },
    )
    assert not judge_trust(judge_name="embedding").trusted, response.status_code
    assert not JudgeValidation.objects.exists()


def test_a_staff_user_cannot_turn_a_failed_validation_into_trust(client, space):
    """Attack: ``manage.py validate_judge`` recorded that the judge failed (contradictions 0.61, not trusted).
    A staff user with ``change_judgevalidation`` opens that row in the admin, types 0.95 over the 0.61 and
    ticks ``trusted``: the same row, unchanged date and file digest, now makes the judge trusted for ranking.

    Instead: the numbers and the verdict of a validation are read-only in the admin; the judge stays untrusted."""
    validation = JudgeValidation.objects.create(
        judge_name="embedding",
        source="labels.jsonl",
        source_sha256="a" * 64,
        turns=400,
        items=1600,
        on_topic_agreement=0.9,
        used_agreement=0.9,
        contradicted_agreement=0.61,
        trusted=False,
        details={"trust_rule": formulas.JUDGE_TRUST_RULE},
    )
    staff_with(client, "change_judgevalidation", "view_judgevalidation")
    url = f"/admin/quality/judgevalidation/{validation.pk}/change/"
    _admin_save(client, url, contradicted_agreement="0.95", trusted="on")
    validation.refresh_from_db()
    assert (validation.contradicted_agreement, validation.trusted) == (0.61, False)
    assert not judge_trust(judge_name="embedding").trusted


# --- links stay within their space ------------------------------------------------------------------------
def test_moving_a_project_leaves_no_task_in_another_spaces_project(client, space, other_space):
    """Attack: a staff user with ``change_project`` opens project ``colony`` of the default space (its task
    ``fix-parser`` is there) and picks the space ``other`` in its form. The project moves; its task does not
    (a task's space is read-only once it exists): the task of the default space now belongs to a project of
    another tenant, what TaskForm refuses ("A project of another space") and docs/operations.md promises ("a
    task's project ... stay within its space"). The other space's project list now holds a project whose
    tasks it can't see, and its approval mode decides the default space's human gates.

    Instead: a project's space is fixed once it exists (as a task's is), or the move is refused while it has
    tasks; either way every task's project is of the task's space."""
    project = make_project(space, "colony")
    task = make_task(project, slug="fix-parser")
    staff_with(client, "change_project", "view_project", member_of=space)
    _admin_save(client, f"/admin/tasks/project/{project.pk}/change/", space=str(other_space.pk))
    task.refresh_from_db()
    assert task.project.space_id == task.space_id == space.pk


def test_moving_a_thought_leaves_no_link_across_spaces(client, space, other_space, thought_factory):
    """Attack: ``original`` of the default space was refined by ``refinement`` (``original.refined_by`` points
    at it, ``refinement.source_ids`` at the original). A staff user with ``change_thought`` opens the
    refinement and picks the space ``other``. ThoughtForm checks only the links the edited thought holds
    itself (refined_by, superseded_by, contradicted_by, related): the links other thoughts hold to it and its
    ``source_ids`` now cross into another tenant (docs/operations.md: "a thought's links ... stay within its
    space"; SPEC 6: no lineage walk crosses a space).

    Instead: a thought's space is fixed once it exists (as a task's is), or the move is refused while any
    thought links to it; the original's refinement stays in the original's space."""
    original = thought_factory("The parser cache needs a lock.")
    refinement = thought_factory(
        "The parser cache needs a lock around eviction only.", thought_type="refinement", source_ids=[original.id]
    )
    Thought.objects.filter(pk=original.pk).update(refined_by=refinement)
    staff_with(client, "change_thought", "view_thought", member_of=space)
    _admin_save(client, f"/admin/brain/thought/{refinement.id}/change/", space=str(other_space.pk))
    refinement.refresh_from_db()
    assert refinement.space_id == space.pk


def test_a_suggestion_edited_in_the_admin_shows_no_other_spaces_thought(client, space, other_space, thought_factory):
    """Attack: a staff user with ``change_correctionsuggestion`` edits a pending correction suggestion of the
    default space and types, in the raw-id ``thought`` box, the id of a thought of the space ``other``
    (CorrectionSuggestionForm checks only the draft). Every memory call of the default space then lists the
    suggestion in ``pending_corrections`` with ``thought_preview``: the first characters of the other
    tenant's thought (brain.services.suggestions._PENDING_ITEMS_SQL joins the thought by id, not by space).

    Instead: the form refuses a thought, contradicting thought or correction of another space (as ThoughtForm
    does for links); the suggestion keeps its own thought and no agent of the default space reads the other's."""
    from brain.services.suggestions import suggestion_create, suggestions_pending_items

    ours = thought_factory("Deploys run migrations first.")
    theirs = thought_factory("Other tenant: the payroll API key rotates on Fridays.", in_space=other_space)
    suggestion, _ = suggestion_create(
        thought=ours, statement="Deploys restart workers first.", origin="contradiction_detector"
    )
    staff_with(client, "change_correctionsuggestion", "view_correctionsuggestion", member_of=space)
    _admin_save(client, f"/admin/brain/correctionsuggestion/{suggestion.pk}/change/", thought=str(theirs.pk))
    suggestion.refresh_from_db()
    previews = [item["thought_preview"] for item in suggestions_pending_items(space=space, limit=10)]
    assert not any("payroll" in preview for preview in previews), previews
    assert suggestion.thought.space_id == suggestion.space_id == space.pk


# --- the audit trail -------------------------------------------------------------------------------------
def test_deleting_an_agent_keeps_who_moved_the_tasks(client, space, thought_factory):
    """Attack: a staff user with ``delete_agent`` deletes agent ``pdsa-7``, which moved task ``t`` (its
    transition log row names it). The delete page lists nothing it can't delete (TransitionLog.agent is
    ``on_delete=SET_NULL``, so the collector doesn't ask TransitionLogAdmin), the agent goes, and the log row's
    ``agent`` is NULL: the transition log, which no one may change or delete (tasks/admin.py, SPEC 6 "the audit
    trail"), no longer says which agent made the step (``actor`` keeps only the role).

    Instead: an agent that made a transition can't be deleted in the admin (deactivate it, as a task that has
    moved is cancelled), and the log row still names it."""
    agent = make_agent(space, "pdsa", name="pdsa-7")
    task = make_task(make_project(space), slug="t", status="ready", role="pdsa")
    marker = thought_factory("t: backlog -> ready", thought_category="transition_marker")
    log = TransitionLog.objects.create(
        task=task, rule_key="backlog->ready", from_status="backlog", to_status="ready", actor="pdsa", agent=agent,
        marker=marker,
    )  # fmt: skip
    staff_with(client, "delete_agent", "view_agent")
    client.post(f"/admin/core/agent/{agent.pk}/delete/", {"post": "yes"})
    log.refresh_from_db()
    assert log.agent_id == agent.pk


# --- protections that hold ---------------------------------------------------------------------------------
def test_a_view_only_user_cannot_save_a_thought_or_a_tokens_revocation(client, space, thought_factory):
    """Attack: a staff user with only ``view_thought``, ``view_agent`` and ``view_agenttoken`` posts the
    thought's change form with new content, and the agent's change form with its token's inline row marked
    revoked (or, for a revoked one, un-revoked).

    Instead: the admin answers 403 to the view-only change posts; the thought and the token are unchanged."""
    thought = thought_factory("The original wording.")
    agent = make_agent(space, "dev")
    token = AgentToken.objects.get(agent=agent)
    staff_with(client, "view_thought", "view_agent", "view_agenttoken", member_of=space)
    response = _admin_save(client, f"/admin/brain/thought/{thought.id}/change/", content="Rewritten by a viewer.")
    assert response.status_code == 403
    url = f"/admin/core/agent/{agent.pk}/change/"
    data = admin_form_data(client.get(url))
    data.update({"tokens-0-id": str(token.pk), "tokens-0-agent": str(agent.pk), "tokens-0-label": "x",
                 "tokens-0-revoked_at_0": "2020-01-01", "tokens-0-revoked_at_1": "00:00:00"})  # fmt: skip
    assert client.post(url, data).status_code == 403
    thought.refresh_from_db()
    token.refresh_from_db()
    assert (thought.content, token.revoked_at) == ("The original wording.", None)


def test_a_staff_user_outside_the_space_confirms_no_step(client, space):
    """Attack: a staff user with ``change_task`` who is not a member of the task's space runs "Confirm next
    step: -> approved" on a task waiting in ``approval`` (the action checks no model permission: a
    ``view_task`` user can run it too) and sends back the digest the page showed.

    Instead: the task is none of the user's to act on (the admin lists only its own spaces' rows, and the
    confirmation service refuses a non-member, HUMAN_NOT_MEMBER) and no confirmation is recorded."""
    task = make_task(make_project(space, "p"), slug="gated", status="approval", role="liaison",
                     dna={"abstract": "Ship it"})  # fmt: skip
    staff_with(client, "change_task", "view_task")
    response = client.post(
        "/admin/tasks/task/",
        {"action": "confirm_approved", "_selected_action": [str(task.pk)], "post": "yes",
         f"dna_digest_{task.pk}": dna_digest(task.dna)},
        follow=True,
    )  # fmt: skip
    assert response.status_code == 200
    assert "gated" not in response.content.decode()
    assert not HumanConfirmation.objects.exists()
