"""Attacks on ``redact`` (SPEC 5): a thought retracted with ``redact: true`` leaves no copy of its text
where Colony keeps it — the database (every text and JSON column), what the API and the export serve,
and what the process keeps in memory.

Each test names the copy and the rule that holds instead. ``rows_holding`` scans every text/JSON column
of every table (case-insensitively here: a copy lowered or re-cased is still the secret).
"""

from __future__ import annotations

import json

import pytest
from django.db import connection

from brain.models import Thought
from tests import web_support
from tests.conftest import fake_vector
from tests.security import support
from tests.security.support import remember, rows_holding

pytestmark = pytest.mark.django_db
ada = web_support.ada

MEMORY = "/api/v1/memory"
TOKEN, SECRET = support.LEAKED, support.LEAKED_NOTE
_redact = support.redact


def test_a_redaction_leaves_no_word_of_the_erased_text_in_the_term_statistics(agent_factory, space, fake_embedder):
    """Copy: BM25's document frequencies (``brain_lexemestats``) are delta rows that a trigger appends per
    lexeme of every inserted or changed thought. Redacting the thought appends a ``-1`` row for each of
    its words but keeps the ``+1`` row: the secret's words stay in the database, lowercased, as lexemes,
    until a periodic compaction folds them (never, if the job does not run). Reading the space's lexemes
    whose sum is 0 lists exactly the erased words.

    Rule: once the redaction commits, no row of any table holds the erased secret in any case; the
    redaction folds (or deletes) the statistics rows of the words it erased."""
    dev = agent_factory("dev", name="dev-a")
    secret = remember(dev, SECRET)
    _redact(dev, secret)
    assert Thought.objects.get(pk=secret).content.find(TOKEN) == -1
    with connection.cursor() as cursor:
        cursor.execute("SELECT lexeme, documents FROM brain_lexemestats WHERE lexeme = %s", [TOKEN.lower()])
        kept = cursor.fetchall()
    assert kept == [], f"the erased secret is still a lexeme of the space's statistics: {kept}"
    assert rows_holding(TOKEN, any_case=True) == []


def test_a_redaction_erases_the_quality_judges_reason_quoting_the_text(agent_factory, space, fake_embedder):
    """Copy: when the quality judge finds a turn contradicting a thought, it raises a suggestion against
    that thought whose ``reason`` quotes the judge's words (``quality.services.scoring._raise_suggestion``),
    and an LLM judge's reason quotes the excerpt it read, the thought's text. Redacting the thought empties
    the suggestion's draft and the turn item's judge details, but not the suggestion's ``reason``: the
    secret stays in ``brain_correctionsuggestion.reason`` and in the space's export.

    Rule: the suggestions about a redacted thought keep no copy of its text, in the database or the export."""
    from brain.choices import SuggestionOrigin
    from brain.models import CorrectionSuggestion
    from brain.services.suggestions import suggestion_create
    from brain.transfer.export import space_export_rows

    dev, qa = agent_factory("dev", name="dev-a"), agent_factory("qa", name="qa-b")
    secret = remember(dev, SECRET)
    judged = f'"The turn says the password is not what the note says ({SECRET})"'
    suggestion_create(
        thought=Thought.objects.get(pk=secret),
        statement="The production database password was rotated and is kept in the vault now.",
        origin=SuggestionOrigin.QUALITY_JUDGE,
        confidence=0.8,
        reason=f"The quality judge found turn t-1 of qa-b contradicting this thought: {judged}",
        agent=qa.agent,
        session_id="s-qa",
    )
    _redact(dev, secret)
    reasons = list(CorrectionSuggestion.objects.filter(thought_id=secret).values_list("reason", flat=True))
    assert reasons and not any(TOKEN in reason for reason in reasons), f"a suggestion's reason keeps it: {reasons}"
    exported = json.dumps(list(space_export_rows(space=space, embeddings=False)), default=str)
    assert TOKEN not in exported, "the export still holds the erased secret"


def test_a_redaction_leaves_no_vector_keyed_by_the_erased_text_in_the_query_cache(agent_factory, space, monkeypatch):
    """Copy: the query-vector cache (``brain.embedding.query_cache``) keeps each single text it embedded, as
    its key, for the life of the process: the thought's own text (embedded when it was stored) stays in
    memory after its redaction, and a later query of that exact text is answered from it (a hit tells
    whoever can time it or read the metrics that the text was seen).

    Rule: a redaction drops the cache entries of the texts it erased."""
    from brain import embedding

    class FakeModel:
        def embed(self, texts, batch_size=64):
            return [fake_vector(text) for text in texts]

    monkeypatch.setattr(embedding, "backend", lambda: "onnx")
    monkeypatch.setattr(embedding, "_onnx_model", lambda: FakeModel())
    embedding.query_cache.clear()
    try:
        dev = agent_factory("dev", name="dev-a")
        secret = remember(dev, SECRET)
        assert any(TOKEN in key[1] for key in embedding.query_cache._items), "the probe did not reach the cache"
        _redact(dev, secret)
        kept = [key[1] for key in embedding.query_cache._items if TOKEN.lower() in key[1].lower()]
        assert kept == [], f"the query cache still holds the erased text: {kept}"
    finally:
        embedding.query_cache.clear()
