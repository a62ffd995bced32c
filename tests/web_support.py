"""Helpers for the web UI tests (unit and browser): humans with a password, members of given spaces."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from brain.choices import ThoughtCategory
from brain.services.thoughts import thought_create
from core.models import Space

PASSWORD = "correct horse battery staple"


def make_human(username: str = "ada", *, spaces: tuple[Space, ...] = (), superuser: bool = False):
    """A human user who is a member of ``spaces`` (a superuser sees every space anyway)."""
    User = get_user_model()
    if superuser:
        user = User.objects.create_superuser(username=username, password=PASSWORD, email=f"{username}@example.org")
    else:
        user = User.objects.create_user(username=username, password=PASSWORD)
    for space in spaces:
        space.members.add(user)
    return user


@pytest.fixture
def ada(client, space):
    """Ada, a member of ``space``, logged in on the test client: the human most web tests act as.

    Web test modules bind it with ``ada = web_support.ada``: defined once here, not copied into each module.
    """
    user = make_human("ada", spaces=(space,))
    client.force_login(user)
    return user


def fake_vector(seed: int = 1) -> list[float]:
    """A fixed unit-ish vector, so stored thoughts don't need the embedding model."""
    return [((seed * 31 + i * 7) % 97) / 97.0 + 0.01 for i in range(384)]


def make_marker(space: Space, content: str, *, seed: int = 1):
    """A transition-marker thought stored through the brain's one insert path."""
    return thought_create(
        space=space,
        content=content,
        contributor_id="system",
        contributor_name="system",
        thought_category=ThoughtCategory.TRANSITION_MARKER,
        embedding=fake_vector(seed),
    )


def admin_form_data(response) -> dict:
    """What the admin page's form would post back unchanged: its fields and its inlines' management forms."""
    form = response.context["adminform"].form
    data = {}
    for name in form.fields:
        value = form[name].value()  # already prepared for the widget (a JSON field: its text)
        if isinstance(value, (list, tuple)):
            data[name] = [str(item) for item in value]
        elif value is not None:
            data[name] = value
    for inline in response.context["inline_admin_formsets"]:
        management = inline.formset.management_form
        data.update({f"{management.prefix}-{key}": management[key].value() for key in management.fields})
    return data
