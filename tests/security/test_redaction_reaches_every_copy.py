"""Attacks on ``redact`` (SPEC 5, docs/api.md "Retraction"): the copies of a redacted thought's text that
``test_redaction_erases_every_copy.py`` and ``test_retraction_holds.py`` don't reach.

A user who presses "redact" on a leaked secret expects it gone from what Colony keeps: the thought's own
fields, Colony's records of it (the admin's history, the turn log, the author's own query-log rows), what a
human's space-wide sweep is documented to clean (it reads a text as Colony's one-row-per-fact rule does:
case and spacing aside), the live thoughts of its own lineage that repeat it, and the process's in-memory
caches. ``rows_holding`` scans every text/JSON column of every table, case-insensitively here.
"""

from __future__ import annotations

import json

import pytest

from brain.models import QueryLog, Thought
from tests import web_support
from tests.conftest import fake_vector
from tests.security import support
from tests.security.support import remember, rows_holding

pytestmark = pytest.mark.django_db
ada = web_support.ada
boss = support.boss

MEMORY = "/api/v1/memory"
TURNS = "/api/v1/turns"
TOKEN, SECRET = support.LEAKED, support.LEAKED_NOTE
_redact = support.redact


def _human_redacts(client, thought_id: str) -> None:
    """A human's redaction on the thought page (staff removing a leaked secret: the space-wide sweep)."""
    response = client.post(f"/brain/thoughts/{thought_id}/retract/", {"reason": "leaked secret", "redact": "on"})
    assert response.status_code == 302, response.content[:500]
    assert TOKEN not in Thought.objects.get(pk=thought_id).content, "the probe's redaction did not run"


def _exported(space) -> str:
    from brain.transfer.export import space_export_rows

    return json.dumps(list(space_export_rows(space=space, embeddings=False)), default=str)


def _fake_model(monkeypatch):
    """The real ``embed_many`` (its normalisation and its query cache) over a deterministic model."""
    from brain import embedding

    class FakeModel:
        def embed(self, texts, batch_size=64):
            return [fake_vector(text) for text in texts]

    monkeypatch.setattr(embedding, "backend", lambda: "onnx")
    monkeypatch.setattr(embedding, "_onnx_model", lambda: FakeModel())


def test_a_redaction_erases_the_secret_from_the_thoughts_source_ref_topic_and_tags(agent_factory, space, fake_embedder):
    """Copy: the thought's other free-text fields. A leaked credential most often sits in a URL: an agent
    stores a note whose ``source_ref`` is ``{"type": "url", "value": "postgres://deploy:<password>@db…"}``
    (topic and tags can carry it too). ``_redact`` (brain/services/retraction.py) blanks content, the two
    facts, the alternatives and the metadata, but keeps ``source_ref``, ``topic`` and ``tags``: after the
    redaction the password is still in ``brain_thought.source_ref`` and ``brain_thought.topic`` (and the
    ``tags`` array), served by ``GET /api/v1/thoughts/{id}`` and written in the space's export.

    Rule: a redaction erases every text of the thought the caller wrote (source_ref's value, topic, tags),
    not only its content: nothing of the secret is left in the row, the API or the export."""
    dev = agent_factory("dev", name="dev-a")
    secret = remember(
        dev,
        "The deploy script connects to the production database with the URL of this note's source.",
        source_ref={"type": "url", "value": f"postgres://deploy:{TOKEN}@db.internal:5432/prod"},
        topic=f"prod db login {TOKEN}",
        tags=["database", f"pw-{TOKEN}"],
    )
    _redact(dev, secret)
    thought = Thought.objects.get(pk=secret)
    kept = json.dumps({"source_ref": thought.source_ref, "topic": thought.topic, "tags": thought.tags})
    assert TOKEN.lower() not in kept.lower(), f"the redacted thought keeps the secret: {kept}"
    assert rows_holding(TOKEN, any_case=True) == []
    assert TOKEN.lower() not in dev.get(f"/api/v1/thoughts/{secret}").content.decode().lower()
    assert TOKEN.lower() not in _exported(space).lower(), "the export still holds the erased secret"


def test_a_redaction_erases_the_admin_history_naming_the_thought(agent_factory, space, fake_embedder, client, boss):
    """Copy: ``django_admin_log``. A staff user opened the thought in the admin and saved it (set its topic)
    before anyone noticed the password in it. Django's admin logs the change with ``object_repr`` =
    ``str(thought)`` = its id and the first 60 characters of its content (brain/models.py
    ``Thought.__str__``): "… The production database password is Qx7Zebrapass and the dep". The human's
    redaction on the thought page erases the thought and sweeps the space's prompts, statements and kept
    answers, but the admin log keeps the password, and the thought's admin history page
    (``/admin/brain/thought/<id>/history/``) shows it to every staff user.

    Rule: a redaction leaves no copy of the text in the admin's log of the thought (its ``object_repr``
    and change messages say the redacted text, or nothing of it)."""
    from django.contrib.admin.models import LogEntry

    dev = agent_factory("dev", name="dev-a")
    secret = remember(dev, SECRET)
    url = f"/admin/brain/thought/{secret}/change/"
    data = web_support.admin_form_data(client.get(url))
    data["topic"] = "database"
    saved = client.post(url, data, follow=True)  # as a browser does: the "changed successfully" message is shown
    assert saved.redirect_chain, saved.context["adminform"].form.errors
    assert LogEntry.objects.filter(object_id=secret).exists(), "the probe's admin save was not logged"
    _human_redacts(client, secret)
    reprs = list(LogEntry.objects.filter(object_id=secret).values_list("object_repr", "change_message"))
    assert not [r for r in reprs if TOKEN in json.dumps(r)], f"the admin log keeps the secret: {reprs}"
    assert TOKEN not in client.get(f"/admin/brain/thought/{secret}/history/").content.decode()
    assert rows_holding(TOKEN, any_case=True) == []


def test_a_humans_redaction_erases_the_turn_logs_quoting_the_secret(agent_factory, space, fake_embedder, client, ada):
    """Copy: the quality loop's turn log (``quality_turnlog.user_prompt``, ``assistant_response``,
    ``tool_calls``). Another agent was shown the secret by a memory call and reported its turn: its answer
    quoted the note whole ("The note says: The production database password is Qx7Zebrapass …") and its
    tool calls recorded the text. A human's redaction replaces the text "in every query-log prompt,
    suggestion statement and kept answer of the space" (docs/api.md) and the hook erases the turn items'
    excerpts, but the turn log's prompt, response and tool calls keep the password (the judge reads them
    again if the turn is rescored).

    Rule: a human's space-wide sweep reaches the turn log as it reaches query-log prompts: the text in a
    turn's prompt, response and tool calls is replaced with ``[redacted]``."""
    from quality.models import TurnLog

    dev, qa = agent_factory("dev", name="dev-a"), agent_factory("qa", name="qa-b")
    secret = remember(dev, SECRET)
    asked = qa.post(MEMORY, {"prompt": "production database password", "contribute": False, "session_id": "s-qa"},
                    format="json")  # fmt: skip
    assert secret in {source["thought_id"] for source in asked.json()["result"]["sources"]}, asked.content
    turn = {
        "session_id": "s-qa",
        "turn_id": "t1",
        "user_prompt": "What is the production database password?",
        "assistant_response": f"The note says: {SECRET}",
        "tool_calls": [{"name": "memory", "output": {"content": SECRET}}],
    }
    assert qa.post(TURNS, turn, format="json").status_code == 202
    _human_redacts(client, secret)
    kept = [json.dumps(row) for row in TurnLog.objects.values("user_prompt", "assistant_response", "tool_calls")]
    assert not [row for row in kept if TOKEN in row], f"the turn log keeps the secret: {kept}"
    assert rows_holding(TOKEN, any_case=True) == []


def test_an_authors_redaction_erases_its_own_records_of_the_text(agent_factory, space, fake_embedder):
    """Copy: the author's own records of the text other than the storing call. The agent first asked the
    brain whether the note was known (``contribute: false`` with the note's exact text), then stored it,
    then reported its turn, whose ``tool_calls`` recorded the memory call with the note as its prompt.
    The redaction erases the query-log row of the storing call only (``stored_thought``): the earlier
    query-log prompt (the same agent, the exact text) and the author's turn log keep the password, and
    the space's export writes the query-log row out again.

    Rule: as with the author's own kept answers (erased anywhere, docs/api.md), an author's redaction
    erases the text in the author's own query-log prompts and turn logs; other agents' records stay
    theirs (test_retraction_holds)."""
    from quality.models import TurnLog

    dev = agent_factory("dev", name="dev-a")
    assert (
        dev.post(MEMORY, {"prompt": SECRET, "contribute": False, "session_id": "s-dev"}, format="json").status_code
        == 200
    )
    secret = remember(dev, SECRET, session_id="s-dev")
    turn = {
        "session_id": "s-dev",
        "turn_id": "t1",
        "user_prompt": "Keep the deploy note in the brain.",
        "assistant_response": "Stored it.",
        "tool_calls": [{"name": "memory", "input": {"prompt": SECRET, "store": True}}],
    }
    assert dev.post(TURNS, turn, format="json").status_code == 202
    _redact(dev, secret)
    prompts = list(QueryLog.objects.filter(agent=dev.agent).values_list("query_text", flat=True))
    assert not [p for p in prompts if TOKEN in p], f"the author's own query-log prompts keep it: {prompts}"
    calls = [json.dumps(c) for c in TurnLog.objects.filter(agent=dev.agent).values_list("tool_calls", flat=True)]
    assert not [c for c in calls if TOKEN in c], f"the author's own turn log keeps it: {calls}"
    assert TOKEN not in _exported(space), "the export still holds the erased secret"
    assert rows_holding(TOKEN, any_case=True) == []


def test_a_humans_redaction_finds_the_text_as_one_row_per_fact_reads_it(
    agent_factory, space, fake_embedder, client, ada
):
    """Copy: a prompt quoting the secret with other spacing or case. Colony itself holds that texts
    differing only in case and whitespace say the same thing (one row per fact, ``brain_content_key``).
    Another agent pasted the note wrapped over two lines (a line break and a double space for two spaces)
    into a retrieve-only memory call, and once more as an upper-case copy. The human's sweep
    (``_erase_copies``: ``query_text__contains=text`` and ``Replace``) matches the text byte for byte: the
    exact copy becomes ``[redacted]``, the wrapped and upper-case copies keep the password in
    ``brain_querylog.query_text``.

    Rule: the human's sweep finds the text as one-row-per-fact reads it (case and whitespace runs aside)
    and replaces each such copy."""
    dev, qa = agent_factory("dev", name="dev-a"), agent_factory("qa", name="qa-b")
    secret = remember(dev, SECRET)
    wrapped = SECRET.replace("password is", "password\nis").replace("deploy script", "deploy  script")
    for prompt in (f"Is this still right? {wrapped}", SECRET.upper(), f"Is this still right? {SECRET}"):
        assert qa.post(MEMORY, {"prompt": prompt, "contribute": False}, format="json").status_code == 200
    _human_redacts(client, secret)
    prompts = list(QueryLog.objects.filter(agent=qa.agent).values_list("query_text", flat=True))
    assert "Is this still right? [redacted]" in prompts, prompts  # the exact copy is swept
    assert not [p for p in prompts if TOKEN.lower() in p.lower()], f"a variant of the text is kept: {prompts}"


@pytest.mark.parametrize("link", ["refines", "consolidates"])
def test_a_humans_redaction_leaves_no_live_copy_in_the_thoughts_lineage(
    agent_factory, space, fake_embedder, client, ada, link
):
    """Copy: a refinement or consolidation of the thought, by another agent, that repeats its text
    verbatim ("<the note> It rotates on the first Monday of each month."). A human's redaction erases the
    thought and the copies in corrections of it (``_erase_copies``), but its lineage's live successor
    keeps the password whole: it is served to every agent by the memory call (its preview quotes it) and
    shown in the redacted thought's own lineage (``GET /api/v1/thoughts/{id}/lineage``, the thought page),
    right under the erased text.

    Rule: a human's redaction (staff removing a leaked secret) replaces the text in the thoughts of its
    lineage that repeat it (refinements and consolidations of it), as it does in corrections of it:
    ``[redacted]`` in their content, their vectors computed again; nothing the brain serves holds it."""
    dev, qa = agent_factory("dev", name="dev-a"), agent_factory("qa", name="qa-b")
    secret = remember(dev, SECRET)
    successor_text = f"{SECRET} It rotates on the first Monday of each month."
    if link == "refines":
        successor = remember(qa, successor_text, refines=secret)
    else:
        other = remember(dev, "The deploy script runs from the bastion host every weekday at noon UTC.")
        successor = remember(qa, successor_text, consolidates=[secret, other])
    _human_redacts(client, secret)
    assert TOKEN not in Thought.objects.get(pk=successor).content, "a live successor keeps the secret"
    lineage = qa.get(f"/api/v1/thoughts/{secret}/lineage").content.decode()
    assert TOKEN not in lineage, "the redacted thought's lineage shows the secret"
    answer = qa.post(MEMORY, {"prompt": "production database password", "contribute": False}, format="json")
    assert TOKEN not in answer.content.decode(), "the memory call still serves the secret"
    assert rows_holding(TOKEN, any_case=True) == []


def test_a_redaction_forgets_the_query_cache_entry_of_a_text_that_nfkc_changes(agent_factory, space, monkeypatch):
    """Copy: the query-vector cache, for a text the embedder normalises. ``embed_many`` keys the cache by
    ``embedding_text(NFKC(text))`` (brain/embedding.py), ``_redact`` discards the texts as stored. A note
    pasted from a document holds a no-break space (U+00A0) before the password: the cache's key has a
    plain space there, ``query_cache.discard`` misses it, and the whole note stays in the process's memory
    after the redaction (a later query of it is a cache hit).

    Rule: a redaction drops the cache entries of the erased texts as the cache keys them (normalised the
    way ``embed_many`` normalises them)."""
    from brain import embedding

    _fake_model(monkeypatch)
    embedding.query_cache.clear()
    try:
        dev = agent_factory("dev", name="dev-a")
        pasted = SECRET.replace(f"is {TOKEN}", f"is\u00a0{TOKEN}")
        secret = remember(dev, pasted)
        assert "\u00a0" in Thought.objects.get(pk=secret).content, "the probe's text was normalised when stored"
        assert any(TOKEN in key[1] for key in embedding.query_cache._items), "the probe did not reach the cache"
        _redact(dev, secret)
        kept = [key[1] for key in embedding.query_cache._items if TOKEN in key[1]]
        assert kept == [], f"the query cache still holds the erased text: {kept}"
    finally:
        embedding.query_cache.clear()


def test_a_redaction_forgets_the_judges_vectors_of_the_text(agent_factory, space, fake_embedder):
    """Copy: the embedding judge's vector cache (``brain.judging.embedding._VECTOR_CACHE``, up to 4096
    texts per process, keyed by the whole text). The contradiction check of any later neighbouring
    thought (``thought_detect_contradictions``, the worker's job) hands the judge the stored vectors of its
    candidates, the secret note among them (``vectors_remember``): the note's full text becomes a key
    and stays one after the redaction, for the life of the process.

    Rule: a redaction drops the erased texts from the judge's cache, as it does from the query cache (or
    the cache keeps no text: a digest as the key)."""
    from brain.judging import embedding as judge_embedding
    from brain.services.contradictions import thought_detect_contradictions

    judge_embedding._VECTOR_CACHE.clear()
    try:
        dev = agent_factory("dev", name="dev-a")
        secret = remember(dev, SECRET)
        later = remember(dev, "The production database password is rotated every month by the deploy script.")
        thought_detect_contradictions(thought_id=later)
        assert any(TOKEN in text for text in judge_embedding._VECTOR_CACHE), "the probe did not reach the cache"
        _redact(dev, secret)
        kept = [text for text in judge_embedding._VECTOR_CACHE if TOKEN in text]
        assert kept == [], f"the judge's cache still holds the erased text: {kept}"
    finally:
        judge_embedding._VECTOR_CACHE.clear()
