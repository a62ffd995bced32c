"""The humans' pages and the Django admin hold against what a logged-in (or not yet logged-in) human
sends: no 5xx for bad input, no change that crosses a space, no edit of the workflow's audit trail.

SPEC 6: "Spaces isolate tenants: no query, lineage walk or transition crosses a space. Bad input gets
a 4xx ..., never a 500, and changes nothing." "Transition markers are the audit trail: nothing
supersedes, refines, consolidates or retracts them." "every counter, weight and score stays within
the range its formula allows".
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.test import Client

from brain.models import Thought
from tasks.models import Task, TransitionLog
from tests.conftest import fake_vector
from tests.tasks_helpers import make_project, make_task
from tests.web_support import PASSWORD, make_human, make_marker

pytestmark = pytest.mark.django_db


# --- helpers --------------------------------------------------------------------------------------
class _ChangeForm(HTMLParser):
    """The fields of an admin change form as a browser would post them back unchanged."""

    def __init__(self):
        super().__init__()
        self.data: dict[str, list[str]] = {}
        self._textarea = self._select = None
        self._in_form = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and (a.get("id") or "").endswith("_form"):
            self._in_form = True
        if not self._in_form:
            return
        name = a.get("name")
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.data.setdefault(name, []).append(a.get("value") or "on")
            elif kind not in ("submit", "button", "file"):
                self.data.setdefault(name, []).append(a.get("value") or "")
        elif tag == "textarea" and name:
            self._textarea = name
            self.data.setdefault(name, []).append("")
        elif tag == "select" and name:
            self._select = name
            self.data.setdefault(name, [])
        elif tag == "option" and self._select and "selected" in a:
            self.data[self._select].append(a.get("value") or "")

    def handle_endtag(self, tag):
        if tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None
        elif tag == "form":
            self._in_form = False

    def handle_data(self, data):
        if self._textarea:
            self.data[self._textarea][-1] += data


def admin_form(client: Client, url: str) -> dict[str, list[str]]:
    page = client.get(url)
    assert page.status_code == 200, page.status_code
    parser = _ChangeForm()
    parser.feed(page.content.decode())
    # a browser drops the newline Django writes right after <textarea>
    return {k: [v[1:] if v.startswith("\n") else v for v in vs] for k, vs in parser.data.items()}


@pytest.fixture
def root(client, space):
    """A superuser logged in on the test client (the admin's most powerful human)."""
    user = make_human("root", spaces=(space,), superuser=True)
    client.force_login(user)
    return user


def _store(space, content, **fields):
    from brain.services.thoughts import thought_create

    return thought_create(
        space=space, content=content, contributor_id="agent-dev-1", contributor_name="dev-1",
        embedding=fake_vector(content), **fields,
    )  # fmt: skip


# --- login ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_a_login_with_an_overlong_username_is_not_a_500(space, path):
    """Attack: anyone, before logging in, posts a username of 300 characters to the login form.
    django-axes records the failed attempt in ``AccessAttempt.username`` (varchar(255)) untruncated and
    PostgreSQL refuses it: a 500 (DataError) to an anonymous visitor, and the failure is not counted.
    Expected (SPEC 6: bad input is a 4xx, never a 500; bounded work before authentication): the login
    form again saying the credentials don't match (200) or a 4xx; the right user still logs in after."""
    make_human("ada", spaces=(space,), superuser=path.startswith("/admin/"))  # the admin logs in staff only
    client = Client(raise_request_exception=False)
    response = client.post(path, {"username": "a" * 300, "password": "guess"})
    assert response.status_code < 500, response.status_code
    assert "_auth_user_id" not in client.session
    assert client.post(path, {"username": "ada", "password": PASSWORD}).status_code == 302


# --- admin: the audit trail -----------------------------------------------------------------------
def test_the_admin_can_not_supersede_or_rewrite_a_transition_marker(client, root, space):
    """Attack: a staff user opens a transition marker in the admin (/admin/brain/thought/<id>/change/),
    rewrites its text and ticks "superseded", and saves. Saved, the audit trail of a transition would
    say something else and rank as superseded. Expected (SPEC 6: "Transition markers
    are the audit trail: nothing supersedes, refines, consolidates or retracts them"; SPEC 3.3): the
    marker's content, category and supersession are read-only in the admin (or the save is refused);
    the marker is unchanged."""
    marker = make_marker(space, "TASK active→review: DEV fix-ci (colony) — tests green")
    url = f"/admin/brain/thought/{marker.id}/change/"
    data = admin_form(client, url)
    data["content"] = ["TASK active→review: DEV fix-ci (colony) — nothing was tested"]
    data["superseded"] = ["on"]
    client.post(url, data)
    marker.refresh_from_db()
    assert marker.content == "TASK active→review: DEV fix-ci (colony) — tests green"
    assert marker.superseded is False
    assert marker.thought_category == "transition_marker"


def test_the_admin_can_not_forge_a_transition_marker(client, root, space):
    """Attack: a staff user changes an ordinary thought's category to ``transition_marker`` in the
    admin. The home page's "recent markers" and an agent's in-flight recovery then read a marker no
    transition wrote (no TransitionLog row). Expected (SPEC 3.3: a marker is written by the transition,
    in its transaction, and nothing else; SPEC 6): the category can't be changed to or from
    transition_marker outside ``task_transition``; the thought keeps its category."""
    thought = _store(space, "TASK review→complete: LIAISON fix-ci (colony) — approved by the human")
    url = f"/admin/brain/thought/{thought.id}/change/"
    data = admin_form(client, url)
    data["thought_category"] = ["transition_marker"]
    client.post(url, data)
    thought.refresh_from_db()
    assert thought.thought_category != "transition_marker"
    assert "approved by the human" not in client.get("/").content.decode()


def test_the_admin_can_not_delete_a_transition_log_row_and_then_its_marker(client, root, space):
    """Attack: a staff user deletes a task's
    TransitionLog row (/admin/tasks/transitionlog/<id>/delete/), which also frees the marker thought
    from its PROTECT, and then deletes the marker. Expected (SPEC 6: transition markers are the audit
    trail; SPEC 2.1: thoughts are never deleted by normal operations; the admin already makes the log
    read-only): deleting a transition log row is refused (403), so both the row and the marker stay."""
    task = make_task(make_project(space, "colony"), slug="fix-ci", status="review", role="qa")
    marker = make_marker(space, "TASK active→review: DEV fix-ci (colony) — done")
    log = TransitionLog.objects.create(
        task=task, rule_key="active->review", from_status="active", to_status="review", actor="dev", marker=marker
    )
    client.post(f"/admin/tasks/transitionlog/{log.pk}/delete/", {"post": "yes"})
    client.post(f"/admin/brain/thought/{marker.pk}/delete/", {"post": "yes"})
    assert TransitionLog.objects.filter(pk=log.pk).exists()
    assert Thought.objects.filter(pk=marker.pk).exists()


# --- admin: spaces --------------------------------------------------------------------------------
def test_the_admin_can_not_link_a_thought_to_another_spaces_thought(client, root, space, other_space):
    """Attack: in the admin's thought form, the raw-id fields ``related_thoughts`` and ``superseded_by``
    take any thought id: a staff user links a thought of the default space to a thought of another
    tenant. Expected (SPEC 6: "Spaces isolate tenants: no query, lineage walk ... crosses a space"; the
    API refuses such ids, brain.services.thoughts.thought_link_related): the form refuses a thought of
    another space and nothing is linked."""
    mine = _store(space, "Our deploy runs at noon.")
    theirs = _store(other_space, "Rival secret: the deploy key is in vault path /kv/rival.")
    url = f"/admin/brain/thought/{mine.id}/change/"
    data = admin_form(client, url)
    data["related_thoughts"] = [str(theirs.id)]
    data["superseded_by"] = [str(theirs.id)]
    client.post(url, data)
    mine.refresh_from_db()
    assert mine.superseded_by_id is None
    assert not mine.related_thoughts.exists()


def test_the_thought_page_shows_no_other_spaces_text_through_a_link(client, space, other_space):
    """Attack: a thought of Ada's space carries a link to another tenant's thought (``related_thoughts``
    or ``superseded_by``: the admin writes either without checking the space, see the test above). The
    thought page lists ``thought.related_thoughts.all()`` and ``thought.superseded_by.content`` without a
    space filter, so Ada, a member of the default space only, reads the other tenant's text. Expected
    (SPEC 6, web/spaces.py: "Every page ... is scoped to that one space, so an id from another space is
    simply not found there"): nothing of the other space is shown on the page."""
    ada = make_human("ada", spaces=(space,))
    client.force_login(ada)
    mine = _store(space, "Our deploy runs at noon.")
    theirs = _store(other_space, "Rival secret: the deploy key is in vault path /kv/rival.")
    mine.related_thoughts.add(theirs)
    Thought.objects.filter(pk=mine.pk).update(superseded=True, superseded_by=theirs)
    body = client.get(f"/brain/thoughts/{mine.id}/").content.decode()
    assert "Rival secret" not in body


def test_the_admin_can_not_put_a_task_under_another_spaces_project_or_dependency(client, root, space, other_space):
    """Attack: in the admin's task form, ``project``, ``depends_on`` and ``parents`` list every space's
    projects and tasks. A staff user moves a task of the default space under another tenant's project
    and makes it depend on another tenant's task; the pending->ready gate then reads that other
    tenant's task status. Expected (SPEC 6: no query or transition crosses a space; tasks.services
    resolves depends_on/parent_ids within the task's space): the form refuses them; the task keeps its
    project and has no cross-space dependency."""
    project = make_project(space, "colony")
    task = make_task(project, slug="design", status="pending")
    rival_project = make_project(other_space, "rival")
    rival_task = make_task(rival_project, slug="rival-task", status="complete")
    url = f"/admin/tasks/task/{task.pk}/change/"
    data = admin_form(client, url)
    data["project"] = [str(rival_project.pk)]
    data["depends_on"] = [str(rival_task.pk)]
    data["parents"] = [str(rival_task.pk)]
    client.post(url, data)
    task = Task.objects.get(pk=task.pk)
    assert task.project_id == project.pk
    assert not task.depends_on.exclude(space=space).exists()
    assert not task.parents.exclude(space=space).exists()


# --- admin: bounds --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("pheromone_weight", "1e300"),
        ("pheromone_weight", "-5"),
        ("effective_confidence", "-3"),
        ("usage_score", "40"),
        ("contradiction_score", "-40"),
    ],
)
def test_the_admin_keeps_weights_and_scores_within_their_formulas_range(client, root, space, field, value):
    """Attack: the admin's thought form takes any finite float for the pheromone weight and the quality
    scores; a staff user saves ``pheromone_weight=1e300`` (or a negative weight/confidence, a usage EMA
    of 40). Expected (SPEC 6: "every counter, weight and score stays within the range its formula
    allows"; SPEC 2.6: weight in [0.1, 10]; SPEC 4.4: EMAs in [0, 1], effective_confidence >= 0): the form
    refuses the value (field error) and the thought keeps its number."""
    thought = _store(space, "The parser caches compiled grammars per worker.")
    before = getattr(thought, field)
    url = f"/admin/brain/thought/{thought.id}/change/"
    data = admin_form(client, url)
    data[field] = [value]
    client.post(url, data)
    thought.refresh_from_db()
    assert getattr(thought, field) == before


@pytest.mark.parametrize(
    "url",
    [
        "/admin/brain/thought/?created_at__year=99999999999999999999",
        "/admin/brain/thought/?created_at__year=2026&created_at__month=99999999999999999999",
        "/admin/quality/qualityrollup/?day__year=99999999999999999999",
        "/admin/quality/turnlog/?created_at__year=99999999999999999999",
        "/admin/quality/confidencechange/?changed_at__year=99999999999999999999",
        "/admin/brain/thought/?created_at__year=9999",
        "/admin/brain/thought/?created_at__year=9999&created_at__month=12&created_at__day=31",
    ],
)
def test_a_huge_date_in_the_admins_date_drilldown_is_not_a_500(root, client, url):
    """Attack: a staff user (or a link someone sends them) opens an admin list whose date drill-down
    (``date_hierarchy``) carries a year/month of 20 digits. Django's ChangeList builds a date from it and
    raises OverflowError (it only catches ValueError): a 500, as is the end of a drill-down into 9999,
    which lies past the calendar. A year of 99999 is answered with the list's "?e=1" redirect.
    Expected (SPEC 6: bad input is a 4xx or the page again, never a 500): the same redirect."""
    client.raise_request_exception = False
    response = client.get(url)
    assert response.status_code < 500, response.status_code


def test_a_five_digit_year_in_the_admins_date_drilldown_is_already_refused(root, client):
    """Boundary next to the test above: a year Python's datetime can't hold but that fits a C long is
    turned into the list's error redirect."""
    response = client.get("/admin/brain/thought/?created_at__year=99999")
    assert response.status_code == 302 and response["Location"].endswith("?e=1")


def test_the_admin_can_not_bring_a_revoked_token_back(client, root, space, agent_factory):
    """Attack: the agent admin's token inline shows ``revoked_at``; a staff user clears it and a revoked
    token (a leaked one) authenticates again. Expected (SPEC 6: revoked means revoked, tokens are made
    with manage.py agent): the form refuses it and the token stays refused."""
    from core.models import AgentToken

    dev = agent_factory("dev")
    token = AgentToken.objects.get(agent=dev.agent)
    AgentToken.objects.filter(pk=token.pk).update(revoked_at="2026-01-01T00:00:00Z")
    url = f"/admin/core/agent/{dev.agent.pk}/change/"
    data = admin_form(client, url)
    revoked = [name for name in data if "-revoked_at" in name]  # the date and the time box
    assert revoked, sorted(data)
    for name in revoked:
        data[name] = [""]
    client.post(url, data)
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert dev.get("/api/v1/agents/me").status_code == 401


def test_the_admin_keeps_a_moved_tasks_audit_trail_and_type(client, root, space):
    """Attack: a staff user deletes a task that has moved (its transition log and markers go with it),
    or switches a task to a bug (another workflow table, other gates). Expected (SPEC 6: the markers
    are the audit trail; a task is cancelled, not deleted): no delete, and the type is read-only once
    the task exists; a task that never moved can still be deleted."""
    project = make_project(space, "colony")
    moved = make_task(project, slug="moved", status="review", role="qa")
    marker = make_marker(space, "TASK active→review: DEV moved (colony) — done")
    TransitionLog.objects.create(
        task=moved, rule_key="active->review", from_status="active", to_status="review", actor="dev", marker=marker
    )
    client.post(f"/admin/tasks/task/{moved.pk}/delete/", {"post": "yes"})
    assert Task.objects.filter(pk=moved.pk).exists()
    assert "type" not in admin_form(client, f"/admin/tasks/task/{moved.pk}/change/")
    unmoved = make_task(project, slug="unmoved", status="backlog")
    client.post(f"/admin/tasks/task/{unmoved.pk}/delete/", {"post": "yes"})
    assert not Task.objects.filter(pk=unmoved.pk).exists()


def test_url_tokens_are_in_the_admin_and_a_revoked_one_stays_revoked(client, root, space, agent_factory):
    """SPEC 5: admin for every model; a URL token is listed and can be revoked there, and a revoked one
    can't be brought back (as an agent token can't)."""
    from core.models import UrlToken
    from core.services import url_token_create

    token, raw = url_token_create(agent=agent_factory("dev").agent, days=7, label="chat")
    listing = client.get("/admin/core/urltoken/")
    assert listing.status_code == 200 and token.prefix in listing.content.decode()
    assert raw not in listing.content.decode()
    UrlToken.objects.filter(pk=token.pk).update(revoked_at="2026-01-01T00:00:00Z")
    url = f"/admin/core/urltoken/{token.pk}/change/"
    data = admin_form(client, url)
    assert not [name for name in data if "revoked_at" in name]  # read-only once revoked
    client.post(url, {**data, "revoked_at_0": [""], "revoked_at_1": [""]})
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_a_markers_page_offers_no_correction(client, space):
    """A transition marker can't be corrected (SPEC 6); its page doesn't offer the form the service
    would refuse."""
    ada = make_human("ada", spaces=(space,))
    client.force_login(ada)
    marker = make_marker(space, "TASK active→review: DEV fix-ci (colony) — tests green")
    body = client.get(f"/brain/thoughts/{marker.id}/").content.decode()
    assert "tests green" in body
    assert "Correct this thought" not in body
