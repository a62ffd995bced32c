"""The humans' side of Colony: sessions, logins, what a page's form acts on, and what a browser keeps.

SPEC 6: "Humans log in to the web UI and admin. Spaces isolate tenants ... Bad input gets a 4xx ...,
never a 500, and changes nothing." "Production-safe by default." SPEC 3.4: a human's confirmation is
given in the web UI by a logged-in user, for the task as they saw it.

(CSRF on every form, off-site ``next`` values, ids of another space's objects, cookie flags under
``check --deploy``, deactivation and password changes ending sessions are covered in
test_human_forms_hold.py, test_web_pages_query_strings_hold.py, test_web_security.py,
test_production_defaults.py and test_identity_changes_take_effect.py; this module does not repeat them.)
"""

from __future__ import annotations

import contextlib
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from brain.models import Thought
from core.models import UrlToken
from tasks.models import HumanConfirmation, Task
from tests.tasks_helpers import make_project, make_task
from tests.web_support import PASSWORD, make_human

pytestmark = pytest.mark.django_db


# --- the login page -------------------------------------------------------------------------------
@pytest.mark.parametrize("query", ["next=/login/", "next=%2Flogin%2F"])
def test_a_link_to_the_login_page_that_returns_to_itself_is_not_a_500_for_a_logged_in_human(space, query):
    """Attack: anyone sends a logged-in human (a chat message, a page, an <img>) the link
    ``/login/?next=/login/``. The login view is ``LoginView(redirect_authenticated_user=True)``
    (web/urls.py): for a logged-in human it computes the success URL from ``next`` and, finding it is the
    login page itself, raises ValueError ("Redirection loop for authenticated user detected"): a 500 and
    a logged traceback per click (without the rule: 500). Rule: bad input is a 4xx or a page, never a 500 -- a
    logged-in human sent to the login page goes to LOGIN_REDIRECT_URL ("/") when ``next`` is the login
    page."""
    client = Client(raise_request_exception=False)
    client.force_login(make_human("ada", spaces=(space,)))
    response = client.get(f"/login/?{query}")
    assert response.status_code < 500, response.status_code
    assert client.get("/").status_code == 200  # still logged in


def test_a_login_rotates_the_session_key_a_visitor_arrived_with(space):
    """Attack (holds): session fixation. An attacker plants a session id in the human's browser (a
    sibling subdomain's cookie), waits for them to log in, then uses the same id. Holds: the login gives
    a new session key (django.contrib.auth.login cycles it), and the planted one is not logged in."""
    make_human("ada", spaces=(space,))
    planted = SessionStore()
    planted["planted"] = True
    planted.create()
    victim = Client()
    victim.cookies["sessionid"] = planted.session_key
    assert victim.post("/login/", {"username": "ada", "password": PASSWORD}).status_code == 302
    assert victim.cookies["sessionid"].value != planted.session_key
    attacker = Client()
    attacker.cookies["sessionid"] = planted.session_key
    assert attacker.get("/").status_code == 302  # to the login page: the planted id is nobody


# --- what a page's form acts on -------------------------------------------------------------------
def _two_spaces_same_names(space, other_space, agent_factory):
    """Ada is a member of both spaces; each has a task ``release`` (same templated DNA) and an agent
    ``dev-1``: names a team picks, so two tenants pick the same ones."""
    dna = {"abstract_ref": "docs/release.md", "test_pass_count": 3, "test_total_count": 3}
    ours = make_task(make_project(space, "colony"), slug="release", status="review", role="liaison", dna=dna)
    theirs = make_task(make_project(other_space, "rival"), slug="release", status="review", role="liaison", dna=dna)
    agent_factory("dev", name="dev-1")
    agent_factory("dev", name="dev-1", in_space=other_space)
    return ours, theirs


@pytest.mark.parametrize("form", ["dna edit", "confirmation", "url token"])
def test_a_form_shown_in_one_space_does_not_act_in_the_space_the_session_switched_to(
    client, space, other_space, agent_factory, form
):
    """Attack (a confused deputy, no attacker needed): Ada, a member of two spaces, opens task
    ``release`` (or the URL tokens page) of the default space in one tab, switches to the other space in
    a second tab (the switcher keeps the space in the session, web.spaces.SESSION_KEY), and submits the
    form of the first tab. The forms name the task by slug and the agent by name, and the views resolve
    them in the session's *current* space (web.views.board.task_dna_post / task_confirm_post,
    web.views.tokens.url_tokens): the DNA she typed for her task, possibly a secret, is written into the
    other tenant's ``release`` (its agents read it); her human confirmation opens the other tenant's
    review->complete gate (the DNA digest only checks the DNA, equal here); the read-only URL token she
    hands to a chat client of the default space reads the *other* space's brain (without the rule: all three
    land in the other space). Rule: a page's form acts in the space the page was shown in -- the form
    carries that space (or the task's/agent's id), and a post whose space is not the session's current
    one is refused with a message and changes nothing."""
    ours, theirs = _two_spaces_same_names(space, other_space, agent_factory)
    client.force_login(make_human("ada", spaces=(space, other_space)))
    page = client.get("/tokens/" if form == "url token" else "/tasks/release/").content.decode()
    # the page she fills in is the default space's (its switcher says so)
    assert re.search(r'<option value="default"\s+selected>', page), "the page is not the default space's"
    # ... the second tab:
    assert client.post("/space/", {"space": other_space.slug}).status_code == 302
    # ... the first tab's form is submitted as the page built it (its hidden fields included):
    shown = dict(re.findall(r'<input type="hidden" name="(page_space)" value="([^"]*)"', page))
    if form == "dna edit":
        client.post("/tasks/release/dna/", {"dna": '{"deploy_note": "our staging key is k-7731"}', "original": "{}",
                                            **shown})  # fmt: skip
    elif form == "confirmation":
        digest = re.search(r'name="dna_digest" value="([0-9a-f]{64})"', page).group(1)
        client.post("/tasks/release/confirm/", {"to_status": "complete", "dna_digest": digest, **shown})
    else:
        client.post("/tokens/", {"agent": "dev-1", "days": 30, "label": "our chat", **shown})
    theirs = Task.objects.get(pk=theirs.pk)
    assert "deploy_note" not in theirs.dna, theirs.dna
    assert not HumanConfirmation.objects.filter(task=theirs).exists()
    assert not UrlToken.objects.filter(agent__space=other_space).exists()


def test_extra_fields_posted_with_a_pages_form_change_nothing_the_form_does_not_show(
    client, space, other_space, agent_factory, thought_factory, fake_embedder
):
    """Attack (holds): mass assignment. Ada posts the correction and URL-token forms with fields the
    forms don't show, named after the model's columns: another contributor and space, a weight, a
    date, a token maker and expiry, another agent's id. Holds: the pages' forms are plain Forms (no
    ModelForm); who, where and when come from the session, the URL and the clock."""
    dev = agent_factory("dev", name="dev-1")
    rival = agent_factory("dev", name="rival-dev", in_space=other_space)
    target = thought_factory("The deploy pipeline caches wheels between runs.")
    client.force_login(make_human("ada", spaces=(space,)))
    forged = {
        "contributor_id": "agent-dev-1", "contributor_name": "dev-1", "agent": str(dev.agent.pk),
        "space": str(other_space.pk), "space_id": str(other_space.pk), "pheromone_weight": "10",
        "created_at": "2001-01-01T00:00:00Z", "thought_category": "transition_marker", "supersedes": str(target.id),
    }  # fmt: skip
    client.post(
        f"/brain/thoughts/{target.id}/correct/",
        {**forged, "correct_fact": "Nothing is cached.", "corrected_fact": target.content, "topic": "deploys"},
    )
    correction = Thought.objects.get(thought_category="correction")
    assert (correction.space_id, correction.contributor_id, correction.agent_id) == (space.pk, "human-ada", None)
    assert correction.pheromone_weight == 1.0 and correction.created_at > timezone.now() - timedelta(minutes=5)
    client.post(
        "/tokens/",
        {"agent": "dev-1", "days": 7, "created_by": "root", "created_by_user": "1", "agent_id": str(rival.agent.pk),
         "expires_at": "2999-01-01T00:00:00Z", "revoked_at": "", "key_hash": "0" * 64},
    )  # fmt: skip
    token = UrlToken.objects.get()
    assert (token.agent_id, token.created_by, token.created_by_user.username) == (dev.agent.pk, "ada", "ada")
    assert token.expires_at < timezone.now() + timedelta(days=8) and token.key_hash != "0" * 64


# --- what a browser keeps -------------------------------------------------------------------------
@pytest.mark.parametrize("page", ["thought", "task", "/brain/", "/board/", "/", "/quality/"])
def test_pages_that_show_the_brain_and_task_dna_are_not_kept_by_the_browser(client, space, thought_factory, page):
    """Attack: the pages that show a space's knowledge -- a thought (the text of a leaked secret before a
    human redacts it), a task's DNA, the explorer, the board, home's markers, the quality dashboard --
    are sent without any Cache-Control (without the rule: none; only ``Vary: Cookie``), so the browser keeps them
    in its disk cache and back/forward cache: after Ada logs out on a shared machine, Back shows them,
    and after she redacts a thought (SPEC: "erases its text where Colony keeps it") the browser still
    holds the old page. The admin sends ``no-store, private`` for the same records, and so do /login/
    and /tokens/. Rule: every page a logged-in human reads is sent ``Cache-Control: no-store`` (and
    ``private``), e.g. ``never_cache`` in web.views.common.space_required."""
    thought = thought_factory("Staging deploy key is k-7731; rotate it monthly.")
    make_task(make_project(space, "colony"), slug="release", status="active", role="dev", dna={"note": "k-7731"})
    client.force_login(make_human("ada", spaces=(space,)))
    url = {"thought": f"/brain/thoughts/{thought.id}/", "task": "/tasks/release/"}.get(page, page)
    response = client.get(url)
    assert response.status_code == 200
    cache_control = response.get("Cache-Control", "")
    assert "no-store" in cache_control and "private" in cache_control, (url, cache_control)


# --- passwords ------------------------------------------------------------------------------------
@pytest.mark.parametrize("weak", ["password", "12345678", "colony123"])
def test_a_staff_user_can_not_change_their_password_to_a_common_one(client, space, weak):
    """Attack: a staff user changes their password at /admin/password_change/ to "password" or
    "12345678". AUTH_PASSWORD_VALIDATORS (config/settings.py) keeps only MinimumLengthValidator
    (Django's project template also has CommonPasswordValidator, NumericPasswordValidator and
    UserAttributeSimilarityValidator), so any 8 characters are accepted (without the rule: 302, changed). The
    login throttle allows 20 failures per address and cool-off, so an attacker spraying the top common
    passwords from a few addresses finds such an account; the admin is the whole of Colony. Rule: the
    password checks refuse common, all-numeric and username-like passwords; the old password stays."""
    user = get_user_model().objects.create_user("colony", password=PASSWORD, is_staff=True)
    space.members.add(user)
    client.force_login(user)
    response = client.post(
        "/admin/password_change/",
        {"old_password": PASSWORD, "new_password1": weak, "new_password2": weak},
    )
    user.refresh_from_db()
    assert user.check_password(PASSWORD), (weak, response.status_code)


@pytest.mark.parametrize("weak", ["admin", "1234"])
def test_the_bootstrap_admin_does_not_get_a_password_the_checks_refuse(space, monkeypatch, capsys, weak):
    """Attack: the operator starts Colony with ``COLONY_ADMIN_PASSWORD=admin`` (docs/configuration.md
    offers the variable). ``colony_bootstrap`` (core/management/commands/colony_bootstrap.py) hands it
    to ``create_superuser`` without ``validate_password``: a superuser ``admin``/``admin`` exists, below
    even the 8-character minimum the password checks ask of everyone else (without the rule: created, login
    works). Rule: the bootstrap checks the password (validate_password) and refuses a weak one with a
    clear message (no superuser made), as ``createsuperuser`` and ``changepassword`` do."""
    monkeypatch.setenv("COLONY_ADMIN_PASSWORD", weak)
    with contextlib.suppress(Exception):  # a refusal of any kind is the rule; what matters is below
        call_command("colony_bootstrap")
    capsys.readouterr()
    admin = get_user_model().objects.filter(username="admin").first()
    assert admin is None or not admin.check_password(weak)
