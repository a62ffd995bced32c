"""Helpers shared by the security tests (not a test module): the memory and import calls an attacking agent
makes, the login form a sprayer posts, a logged-in superuser, and how a page shows a character.

Fixtures here are bound by name in the modules that use them (``boss = support.boss``), as
``tests.web_support.ada`` is: defined once, not copied into each module.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from brain.services.thoughts import thought_create
from tests.conftest import fake_vector

MEMORY_URL = "/api/v1/memory"
IMPORT_URL = "/api/v1/thoughts/import"


# --- the memory endpoint -------------------------------------------------------------------------------
def memory(client, **body):
    """``POST /api/v1/memory`` with ``body``: the response, whatever it is."""
    return client.post(MEMORY_URL, body, format="json")


def memory_answer(client, **body) -> dict:
    """``POST /api/v1/memory`` with ``body``, which must answer 200: the answer's JSON."""
    response = memory(client, **body)
    assert response.status_code == 200, response.content
    return response.json()


def remember(client, prompt: str, **fields) -> str:
    """Store ``prompt`` through the memory endpoint; the stored thought's id."""
    response = client.post(MEMORY_URL, {"prompt": prompt, "store": True, **fields}, format="json")
    assert response.status_code == 200, response.content
    stored = response.json()["trace"]["thought_id"]
    assert stored, response.json()
    return stored


# --- a thought stored as a service would -------------------------------------------------------------
def store(space, content, *, agent=None, vector="fake", **fields):
    """A thought of ``agent`` (or of "someone") stored by ``thought_create``, embedded with ``fake_vector``
    unless ``vector`` gives its vector (None: not embedded yet)."""
    return thought_create(
        space=space,
        content=content,
        contributor_id=agent.name if agent else "someone",
        contributor_name=agent.name if agent else "someone",
        agent=agent,
        embedding=fake_vector(content) if vector == "fake" else vector,
        **fields,
    )


# --- a leaked secret and its redaction -----------------------------------------------------------------
LEAKED = "Qx7Zebrapass"
LEAKED_NOTE = f"The production database password is {LEAKED} and the deploy script reads it from this note here."


def redact(client, thought_id: str) -> None:
    """The author's redaction (``POST /api/v1/thoughts/{id}/retract`` with ``redact``), which must succeed."""
    response = client.post(f"/api/v1/thoughts/{thought_id}/retract", {"reason": "a leaked password", "redact": True},
                           format="json")  # fmt: skip
    assert response.status_code == 200, response.content


# --- the import endpoint -------------------------------------------------------------------------------
def import_post(client, items):
    """``POST /api/v1/thoughts/import`` with ``items`` as its JSON body: the response."""
    return client.post(IMPORT_URL, data=json.dumps(items), content_type="application/json")


def import_refusal(
    response,
    field: str,
    *,
    status: int = 400,
    code: str = "IMPORT_INVALID",
    field_prefix: bool = False,
    nothing_stored: bool = False,
) -> str:
    """The refusal's message for ``field``, after checking the envelope (``status`` and ``code``).

    ``field_prefix``: the first line whose field starts with ``field`` (``tags`` for ``tags[3]``), not
    only one naming it exactly. ``nothing_stored``: the message must also say nothing of the batch was stored.
    """
    assert response.status_code == status, response.content[:2000]
    error = response.json()["error"]
    assert error["code"] == code, error
    if nothing_stored:
        assert "nothing of this batch was stored" in error["message"], error
    if field_prefix:
        lines = [line for line in error["lines"] if line["field"].startswith(field)]
    else:
        lines = [line for line in error["lines"] if line["field"] == field]
    assert lines, error["lines"]
    return lines[0]["message"]


# --- logins and humans ---------------------------------------------------------------------------------
def login(client, path, username, password, **extra):
    """Post the login form at ``path`` (``/login/`` or ``/admin/login/``); ``extra``: request headers/environ."""
    return client.post(path, {"username": username, "password": password}, **extra)


@pytest.fixture
def boss(client, space):
    """A superuser, member of the space, logged in on the test client."""
    user = get_user_model().objects.create_superuser("boss", "boss@example.com")
    space.members.add(user)
    client.force_login(user)
    return user


def shown(html: str, char: str) -> bool:
    """Whether ``char`` is in the page, raw or as an HTML character reference."""
    return char in html or f"&#{ord(char)};" in html or f"&#x{ord(char):x};" in html.lower()


# --- what the database still holds -----------------------------------------------------------------
def rows_holding(text: str, *, any_case: bool = False) -> list[str]:
    """Every column of every table that holds ``text`` in some row (text and JSON columns; with
    ``any_case``, whatever its case): "table.column"."""
    found = []
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.table_name, c.column_name FROM information_schema.columns c
            JOIN information_schema.tables t ON t.table_name = c.table_name AND t.table_schema = c.table_schema
            WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
                  AND c.data_type IN ('text', 'character varying', 'jsonb', 'json')
            ORDER BY 1, 2
            """
        )
        for table, column in cursor.fetchall():
            value = f"{connection.ops.quote_name(column)}::text"
            held = f"strpos(lower({value}), lower(%s)) > 0" if any_case else f"strpos({value}, %s) > 0"
            table_name = connection.ops.quote_name(table)
            cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {table_name} WHERE {held})", [text])  # noqa: S608 - catalog names
            if cursor.fetchone()[0]:
                found.append(f"{table}.{column}")
    return found
