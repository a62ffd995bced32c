"""Invisible controls an agent writes don't reach what people read (SPEC 6: text shown in the UI is
escaped; every write path holds whatever the caller sends).

Escaping keeps HTML out, not Unicode's bidi controls: a right-to-left override (U+202E) at the end of
a task title made the browser draw the task page's slug after it backwards ("1-ksat" read "task-1",
another task's name), and reversed the chips after a title or a tag; a zero-width space made a topic
look exactly like another ("deploys" and "deploys\u200b") while filtering by it missed it. The API
drops these characters from every text it takes in (``api.text.without_invisible_controls``); the
joiners that scripts and emoji sequences need stay.
"""

from __future__ import annotations

import pytest

from api.text import without_invisible_controls
from brain.models import Thought
from tasks.models import Project, Task
from tests import web_support
from tests.security.support import shown as _shown

pytestmark = pytest.mark.django_db

ada = web_support.ada

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE
ZWSP = "\u200b"  # ZERO WIDTH SPACE


def test_a_task_title_or_project_name_with_a_bidi_override_is_not_shown_raw(agent_factory, client, ada):
    """Attack: an agent ends a project's name and a task's title and description with U+202E.
    Rule: stored and shown without it, on the board and the task page."""
    agent = agent_factory("dev")
    assert agent.post("/api/v1/projects", {"slug": "proj", "name": "Proj" + RLO}, format="json").status_code == 201
    created = agent.post(
        "/api/v1/tasks",
        {"project": "proj", "slug": "1-ksat", "title": "Ship it " + RLO, "description": "ok" + RLO, "type": "task"},
        format="json",
    )
    assert created.status_code == 201, created.content
    task = Task.objects.get(slug="1-ksat")
    assert (task.title, task.description, Project.objects.get(slug="proj").name) == ("Ship it", "ok", "Proj")
    for url in ("/board/", "/tasks/1-ksat/"):
        html = client.get(url).content.decode()
        assert not _shown(html, RLO), f"{url} shows an agent's U+202E"


def test_a_thoughts_text_tags_and_topic_lose_bidi_and_zero_width_controls(dev, client, ada, fake_embedder):
    """Attack: a thought whose prompt and tag carry U+202E and whose topic is "deploys" + U+200B.
    Rule: stored without them, so the topic is "deploys" (a filter finds it) and no page shows them."""
    body = {
        "prompt": "Learned: the deploy script must run migrations before restarting the workers " + RLO + "nimda",
        "topic": "deploys" + ZWSP,
        "tags": ["ops" + RLO, "prod"],
        "session_id": "s1",
    }
    response = dev.post("/api/v1/memory", body, format="json")
    assert response.status_code == 200, response.content
    thought = Thought.objects.get()
    assert RLO not in thought.content and thought.topic == "deploys" and thought.tags == ["ops", "prod"]
    found = dev.get("/api/v1/thoughts", {"topic": "deploys"})
    assert [t["thought_id"] for t in found.json()["results"]] == [str(thought.id)], found.json()
    for url in ("/brain/", f"/brain/thoughts/{thought.id}/"):
        html = client.get(url).content.decode()
        assert not _shown(html, RLO), f"{url} shows an agent's U+202E"
        assert not _shown(html, ZWSP), f"{url} shows a topic with U+200B"


def test_the_joiners_scripts_and_emoji_need_stay():
    text = "می\u200cخواهم 👩\u200d💻 deploys"  # ZWNJ in Persian, ZWJ in an emoji sequence
    assert without_invisible_controls(text) == text
    assert without_invisible_controls("a\u202ab\u2066c\u2069d\ufeffe\u2060f") == "abcdef"


#: Format characters (category Cf) that are drawn or that scripts need: the zero-width (non-)joiners and
#: the prepended concatenation marks (Arabic number signs and the like).
KEPT_FORMAT = {0x200C, 0x200D, *range(0x0600, 0x0606), 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x110BD, 0x110CD}


def test_every_other_format_character_is_dropped():
    """Attack: text hidden in format characters the list missed, such as the tag characters U+E0020-U+E007E
    ("ASCII smuggling": nothing shows on a screen, a language model reads the text they spell). Rule: every
    format character Unicode knows, but the kept ones, is dropped; a new Unicode version that adds one
    fails here until the list names it."""
    import sys
    import unicodedata

    missed = [
        f"U+{code:04X}"
        for code in range(0x80, sys.maxunicode + 1)
        if unicodedata.category(chr(code)) == "Cf"
        and code not in KEPT_FORMAT
        and without_invisible_controls(f"a{chr(code)}b") != "ab"
    ]
    assert missed == []
    assert without_invisible_controls("ok" + "".join(chr(0xE0000 + ord(c)) for c in "obey me")) == "ok"


def test_variation_selectors_choose_a_glyph_and_carry_nothing_else():
    """Attack: bytes hidden as a run of variation selectors after one visible character. Rule: one selector
    after a character stays (an emoji's presentation), the rest of a run and the supplement's go."""
    heart = "\u2764\ufe0f"
    assert without_invisible_controls(heart) == heart
    assert without_invisible_controls(heart + "\ufe01\ufe02\ufe0e") == heart
    assert without_invisible_controls("x\U000e0100\U000e01efy") == "xy"
