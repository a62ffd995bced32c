"""The brain's data: thoughts, the query log and correction suggestions (SPEC 2.1)."""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

from brain.choices import TOPIC_MAX_CHARS, SuggestionOrigin, SuggestionStatus, ThoughtCategory, ThoughtType
from core.db import vector_from_binary

EMBEDDING_DIMENSIONS = 384
#: A thought's columns that are a job's bookkeeping, not knowledge: no response shows them and no
#: export or import carries them (``brain.transfer.serializers``).
THOUGHT_BOOKKEEPING_FIELDS = ("decayed_at",)
#: The columns no page or response shows: two 384-float vectors (parsed from text, ~1 ms per row), the
#: tsvector and the bookkeeping columns. Reads that only show a thought defer them (``thought_defer_bulky``).
THOUGHT_BULKY_FIELDS = ("embedding", "corrected_fact_embedding", "search_vector", *THOUGHT_BOOKKEEPING_FIELDS)


def vector_from_send(data) -> list[float] | None:
    """A vector read as ``vector_send(column)`` (pgvector's binary form, bytea: int16 dimensions, int16
    unused, then big-endian float32s) as the list of floats the ORM would give: ~7x faster to read
    than the text form the ORM parses float by float, and exactly the stored float32s."""
    vector = vector_from_binary(None if data is None else bytes(data))
    return None if vector is None else vector.astype("float64").tolist()


def thought_defer_bulky(*relations: str) -> list[str]:
    """``defer()`` arguments leaving out the bulky columns of the thoughts at these relation paths
    ("" for the queryset's own model, e.g. ``"thought"`` for a suggestion's thought)."""
    return [f"{relation}__{name}" if relation else name for relation in relations for name in THOUGHT_BULKY_FIELDS]


def content_key(text) -> models.Func:
    """The key of a text as one fact: ``brain_content_key(text)``, an SQL function (migrations 0016, 0018)
    that is the md5 of the text NFKC-normalised, its look-alike letters of other scripts read as the
    Latin letters they look like (``brain.confusables``), its whitespace runs collapsed to one space,
    trimmed and lower-cased (as the database's ctype folds case). Texts with one key say the same
    thing; the memory call stores no second live thought with a key one already has
    (``brain.services.thoughts.thought_known``), read through the index ``thought_space_content_key``."""
    return models.Func(text, function="brain_content_key", output_field=models.CharField())


class Thought(models.Model):
    """One self-contained unit of knowledge. Never deleted by normal operations."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    space = models.ForeignKey("core.Space", on_delete=models.PROTECT, related_name="thoughts")
    content = models.TextField()
    context_metadata = models.JSONField(default=dict, blank=True)
    # Who contributed: the authenticated agent (null for system markers and imports), plus the
    # free-form agent_id/agent_name of the seed brain's wire format.
    agent = models.ForeignKey("core.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="thoughts")
    contributor_id = models.CharField(max_length=100)
    contributor_name = models.CharField(max_length=200)
    # A default, not auto_now_add: imports keep the original time (brain.transfer.services).
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)

    # Lineage (seeds/001)
    thought_type = models.CharField(max_length=20, choices=ThoughtType.choices, default=ThoughtType.ORIGINAL)
    source_ids = ArrayField(models.UUIDField(), default=list, blank=True)
    refined_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Newest refinement or consolidation built on this thought.",
    )

    # Structure (seeds/000)
    tags = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    thought_category = models.CharField(
        max_length=30, choices=ThoughtCategory.choices, default=ThoughtCategory.UNCATEGORIZED
    )
    topic = models.CharField(max_length=TOPIC_MAX_CHARS, blank=True, default="")
    temporal_scope = models.DateField(null=True, blank=True)
    source_ref = models.JSONField(null=True, blank=True)
    alternatives_considered = models.TextField(blank=True, default="")
    corrected_fact = models.TextField(blank=True, default="")
    correct_fact = models.TextField(blank=True, default="")
    supersedes = ArrayField(models.UUIDField(), default=list, blank=True)
    related_thoughts = models.ManyToManyField("self", symmetrical=True, blank=True)
    quality_flags = ArrayField(models.CharField(max_length=40), default=list, blank=True)
    superseded = models.BooleanField(default=False)
    superseded_at = models.DateTimeField(
        null=True, blank=True, help_text="When a refinement, consolidation or correction first superseded it."
    )
    superseded_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The correction that supersedes this thought.",
    )
    contradicted_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The correction whose corrected fact this thought repeats.",
    )

    # Retrieval
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    # Corrections only: the embedding of ``corrected_fact``, so the re-contamination guard compares
    # a new contribution with every correction's wrong fact without re-embedding them per request.
    corrected_fact_embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    search_vector = models.GeneratedField(
        expression=SearchVector("content", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    # Pheromones and reinforcement (SPEC 2.3, 2.6)
    pheromone_weight = models.FloatField(default=1.0)
    access_count = models.PositiveIntegerField(default=0)
    last_accessed = models.DateTimeField(null=True, blank=True)
    # The agents that retrieved it, each once, by id (as text; a renamed agent is one agent): highways
    # count them (brain.selectors.activity). A name only where no agent of the space had it when an
    # import or migration 0020 mapped names to ids (history with no agent behind it). Shown by name.
    accessed_by = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    co_retrieved_with = models.JSONField(default=dict, blank=True)
    # The hourly decay's bookkeeping (brain.services.pheromones.thoughts_decay): the start (UTC) of the
    # clock hour whose decay step this thought took, written by the same UPDATE as the step. A run skips
    # the thoughts already stepped for its hour, so a retried or redelivered run steps each thought at
    # most once per clock hour. Not shown, edited, exported or imported.
    decayed_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Start of the clock hour whose decay step this thought took (one step per hour at most).",
    )

    # Quality loop (SPEC 4.4): EMAs over per-injection outcomes; null = no history.
    usage_score = models.FloatField(null=True, blank=True)
    contradiction_score = models.FloatField(null=True, blank=True)
    effective_confidence = models.FloatField(default=1.0)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            HnswIndex(
                name="thought_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            GinIndex(fields=["search_vector"], name="thought_search_gin"),
            # Full-text retrieval of thoughts whose embedding is still pending: few rows, any word.
            GinIndex(
                fields=["search_vector"], name="thought_search_pending_gin", condition=models.Q(embedding__isnull=True)
            ),
            GinIndex(fields=["source_ids"], name="thought_source_ids_gin"),
            models.Index(fields=["space", "topic"], name="thought_space_topic"),
            models.Index(fields=["space", "thought_category"], name="thought_space_category"),
            models.Index(fields=["space", "-created_at"], name="thought_space_created"),
            # One row per fact: the live thought of a space with a text's key (brain.services.thoughts.thought_known).
            models.Index(
                models.F("space"),
                content_key(models.F("content")),
                name="thought_space_content_key",
                condition=models.Q(superseded=False),
            ),
            # The superseded thoughts of a space with a text's key: a corrected thought's own text, sent
            # again, is flagged like its corrected fact (brain.services.flags.contribution_checks).
            models.Index(
                models.F("space"),
                content_key(models.F("content")),
                name="thought_space_superseded_key",
                condition=models.Q(superseded=True),
            ),
            # Which embedder computed the stored vectors (brain.embedding.stored_vectors_notice).
            models.Index(
                fields=["embedding_model"], name="thought_embedding_model", condition=models.Q(embedding__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.content[:60]}"

    @property
    def contributor(self) -> str:
        """Who contributed it, as answers name it: its agent's registered name now (SPEC 2.2; a renamed
        agent's thoughts follow it, and an agent given a retired agent's name is not their author), else the
        stored ``contributor_name`` (a human's correction, a marker, an import without an agent). A query
        of many thoughts annotates ``agent_name`` (the agent's name, joined) so this reads no row of its
        own; otherwise the thought's agent is read (select it with the thought)."""
        if self.agent_id is None:
            return self.contributor_name
        named = self.__dict__.get("agent_name")
        return named if named is not None else self.agent.name


class SpaceTextStats(models.Model):
    """BM25's collection statistics of a space, as deltas: a space's thought count and total lexeme
    count are the SUMS of its rows.

    Database triggers on ``brain_thought`` (migration 0008) append one row per inserting or deleting
    statement (and per changed content), in that statement's transaction: exact, visible to the
    transaction at once, and append-only, so concurrent writers never wait for each other on a
    counter row. ``brain.services.text_stats.text_stats_compact`` (a periodic job) folds each space's
    rows into one. A search reads them through the index instead of counting the space.
    """

    space = models.ForeignKey("core.Space", on_delete=models.CASCADE, related_name="+")
    documents = models.BigIntegerField(default=0)
    lexemes = models.BigIntegerField(default=0, help_text="Sum of length(search_vector).")

    class Meta:
        indexes = [models.Index(fields=["space"], name="spacetextstats_space")]

    def __str__(self) -> str:
        return f"space {self.space_id}: {self.documents:+d} thoughts, {self.lexemes:+d} lexemes"


class LexemeStats(models.Model):
    """BM25's document frequencies, as deltas like :class:`SpaceTextStats`: in how many thoughts of
    the space a lexeme occurs is the SUM of its rows."""

    space = models.ForeignKey("core.Space", on_delete=models.CASCADE, related_name="+")
    lexeme = models.TextField()
    documents = models.BigIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["space", "lexeme"], name="lexemestats_space_lexeme")]

    def __str__(self) -> str:
        return f"space {self.space_id}: {self.lexeme} {self.documents:+d}"


class QueryLog(models.Model):
    """One retrieval: who asked what in which session, and what came back with which score."""

    space = models.ForeignKey("core.Space", on_delete=models.CASCADE, related_name="query_logs")
    agent = models.ForeignKey("core.Agent", null=True, blank=True, on_delete=models.SET_NULL)
    agent_ref = models.CharField(max_length=100, help_text="agent_id as given on the wire")
    session_id = models.CharField(max_length=100)
    query_text = models.TextField()
    results = models.JSONField(default=list, help_text='[{"id": "...", "score": 0.8}, ...] best first')
    # The thought this same call stored, if any, or the live thought that already said the same (the
    # call stored nothing new): its text was a contribution, not a search, so the keyword-echo rule
    # does not compare later contributions with it.
    stored_thought = models.ForeignKey(Thought, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # Whether the accesses in ``results`` have been counted on the thoughts (access_count, weight,
    # accessed_by, last_accessed, co-retrieval): a memory call logs them unreinforced and
    # brain.services.pheromones.reinforcement_fold counts each row once, in batches, off the answer's
    # path. An imported row is history (its thoughts bring their own counts): reinforced already.
    reinforced = models.BooleanField(default=True, db_default=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["space", "session_id", "-created_at"], name="querylog_session"),
            models.Index(fields=["agent", "-created_at"], name="querylog_agent"),
            # the fold's queue: only the rows still to count (a few seconds' worth), never the history
            models.Index(fields=["id"], name="querylog_unreinforced", condition=models.Q(reinforced=False)),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.query_text[:60]}"

    @staticmethod
    def result_scores(results) -> dict[uuid.UUID, float | None]:
        """A row's ``results`` as {thought id: score}, best first; malformed entries are skipped (a
        broken log entry must not break the turn or the scoring that reads it)."""
        scores: dict[uuid.UUID, float | None] = {}
        for result in results or []:
            if not isinstance(result, dict):
                continue
            try:
                thought_id = uuid.UUID(str(result["id"]))
            except (KeyError, TypeError, ValueError):
                continue
            if thought_id not in scores:
                score = result.get("score")
                try:
                    scores[thought_id] = float(score) if isinstance(score, (int, float)) else None
                except OverflowError:  # an integer of hundreds of digits
                    scores[thought_id] = None
        return scores


class CorrectionSuggestion(models.Model):
    """A pending correction: something contradicts ``thought``; accepting it creates a correction."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    space = models.ForeignKey("core.Space", on_delete=models.CASCADE, related_name="correction_suggestions")
    thought = models.ForeignKey(Thought, on_delete=models.CASCADE, related_name="correction_suggestions")
    statement = models.TextField(help_text="The contradicting statement.")
    contradicting_thought = models.ForeignKey(
        Thought, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    draft = models.JSONField(default=dict, help_text="Memory-endpoint payload of the correction to create.")
    origin = models.CharField(max_length=30, choices=SuggestionOrigin.choices)
    confidence = models.FloatField(default=0.0)
    reason = models.TextField(blank=True, default="")
    # Whom to tell: the agent and/or session whose work raised it.
    agent = models.ForeignKey("core.Agent", null=True, blank=True, on_delete=models.SET_NULL)
    session_id = models.CharField(max_length=100, blank=True, default="")
    status = models.CharField(max_length=20, choices=SuggestionStatus.choices, default=SuggestionStatus.PENDING)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=200, blank=True, default="")
    correction = models.ForeignKey(Thought, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["space", "status", "-created_at"], name="suggestion_status")]

    def __str__(self) -> str:
        return f"{self.status}: {self.statement[:60]}"


class ImportReceipt(models.Model):
    """What ``POST /api/v1/thoughts/import`` or ``POST /api/v1/memory`` answered to one
    ``Idempotency-Key``, so that a request sent again is answered again instead of stored twice
    (``brain.services.receipts``; the name is from when only imports took a key)."""

    space = models.ForeignKey("core.Space", on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(
        "core.Agent", on_delete=models.CASCADE, related_name="+", help_text="Keys are per agent: whose key it is."
    )
    key = models.CharField(max_length=255, help_text="The client's Idempotency-Key.")
    fingerprint = models.CharField(max_length=64, help_text="sha256 of the request's media type and body.")
    status_code = models.PositiveSmallIntegerField()
    response = models.JSONField(help_text="The response body, as first sent.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["space", "agent", "key"], name="importreceipt_space_agent_key")]

    def __str__(self) -> str:
        return f"{self.key} ({self.created_at:%Y-%m-%d %H:%M})"
