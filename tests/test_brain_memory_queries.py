"""The memory endpoint's SQL statements: a fixed, small number per call, whatever the brain holds."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from brain.models import QueryLog, Thought

pytestmark = pytest.mark.django_db

QUERY = "Deploy fact: the pipeline runs migrations then restarts the workers"
STATEMENT = "The deploy pipeline runs the database migrations before restarting the web workers."


def _statements(client, body, *, split: bool = False):
    """The SQL of one memory call; with ``split``, (before the response is sent, after it)."""
    from api.responses import ResponseThenWork

    sent_at = []
    close = ResponseThenWork.close

    def close_marking(response):
        sent_at.append(len(ctx.captured_queries))
        close(response)

    with pytest.MonkeyPatch.context() as patch, CaptureQueriesContext(connection) as ctx:
        patch.setattr(ResponseThenWork, "close", close_marking)
        response = client.post("/api/v1/memory", body, format="json")
        assert response.status_code == 200, response.content
    # SAVEPOINT/RELEASE are the test's transaction standing in for BEGIN/COMMIT: not counted.
    counted = [
        (i, q["sql"]) for i, q in enumerate(ctx.captured_queries) if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))
    ]
    if not split:
        return [sql for _, sql in counted]
    assert len(sent_at) == 1, "the test client closes the response once, as a WSGI server does"
    return [sql for i, sql in counted if i < sent_at[0]], [sql for i, sql in counted if i >= sent_at[0]]


def _seed(thought_factory, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        thought_factory(f"Deploy fact {i}: the pipeline runs migrations then restarts the workers.", tags=[f"t{i % 4}"])


def test_retrieve_only_call_takes_a_fixed_few_statements(agent_factory, thought_factory, fake_embedder):
    client = agent_factory("dev")
    _seed(thought_factory, 3)
    client.post("/api/v1/memory", {"prompt": QUERY, "session_id": "s"}, format="json")  # token's first use
    few, after = _statements(client, {"prompt": QUERY, "session_id": "s", "contribute": False}, split=True)
    # Before the answer (the token was looked up by the first call and is kept: core.services.TokenRows):
    # the search: query terms (lexemes + BM25 statistics, and the scan
    # settings), the lexical side (run while the query is embedded: no wait of its own), candidates
    # with every ranking input, and with them the query log's row, which also says whether the agent
    # queried before and whether a correction suggestion is pending (read only when there are some).
    # Highways come from the search's own candidates. After the answer is sent: the log row's results,
    # then reinforcing what it returned, one statement each.
    assert len(few) <= 4, "\n".join(few)
    assert not any("core_agenttoken" in sql for sql in few), "\n".join(few)
    assert sum("brain_querylog" in sql for sql in few) == 1  # the log, nothing else
    assert len(after) == 2 and "SET results" in after[0] and "access_count" in after[1], "\n".join(after)
    _seed(thought_factory, 20, start=3)
    before = list(Thought.objects.values_list("access_count", flat=True))
    more, more_after = _statements(client, {"prompt": QUERY, "session_id": "s", "contribute": False}, split=True)
    assert (len(more), len(more_after)) == (len(few), len(after)), "\n".join(more + more_after)
    after_counts = list(Thought.objects.values_list("access_count", flat=True))
    assert sum(after_counts) - sum(before) == 10  # ten results, each reinforced once
    assert QueryLog.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_retrieve_only_call_waits_for_the_database_twice_before_its_answer(
    agent_factory, thought_factory, fake_embedder
):
    """Round trips, not statements, are what a call waits for. Outside a test's transaction (as in
    production: autocommit), a retrieve-only call waits twice before its answer: statements 1 and 2 of
    the search (sent together, read after the embedding), and the search statement with the query
    log's row (their rows come back with the pipeline's Sync, which ends the search's implicit
    transaction: no BEGIN, no COMMIT). Written as separate statements it
    waited up to eight times (BEGIN, the terms statement, the lexical side's rows and its pipeline's
    Sync, the search, COMMIT, the query log)."""
    import psycopg

    from api.responses import ResponseThenWork

    client = agent_factory("dev")
    _seed(thought_factory, 30)
    client.post("/api/v1/memory", {"prompt": QUERY, "session_id": "s"}, format="json")  # token's first use
    waits: list[str] = []
    sent_at: list[int] = []
    wait, close = psycopg.Connection.wait, ResponseThenWork.close

    def counting_wait(self, gen, *args, **kwargs):
        # A wait for the server: a statement run on its own, or reading a pipeline's results (a flush
        # request, or its Sync at the end). Sending in pipeline mode (or entering it) waits for nothing.
        name = getattr(gen, "__qualname__", "")
        if name.endswith(("_fetch_gen", "_exit_gen")) or (self._pipeline is None and not name.endswith("_enter_gen")):
            waits.append(name)
        return wait(self, gen, *args, **kwargs)

    def close_marking(response):
        sent_at.append(len(waits))
        close(response)

    statements = []
    with pytest.MonkeyPatch.context() as patch, CaptureQueriesContext(connection) as ctx:
        patch.setattr(psycopg.Connection, "wait", counting_wait)
        patch.setattr(ResponseThenWork, "close", close_marking)
        response = client.post(
            "/api/v1/memory", {"prompt": QUERY, "session_id": "s", "contribute": False}, format="json"
        )
        statements = [q["sql"] for q in ctx.captured_queries]
    assert response.status_code == 200 and response.json()["result"]["sources"], response.content
    assert sent_at == [2], (sent_at, waits, statements)
    log = QueryLog.objects.get(session_id="s", query_text=QUERY, stored_thought__isnull=True)
    assert log.results and log.results[0]["id"] == response.json()["result"]["sources"][0]["thought_id"]
    assert not any(sql.startswith(("BEGIN", "COMMIT", "SAVEPOINT")) for sql in statements), statements


def test_the_search_terms_row_is_on_its_way_while_the_prompt_is_embedded(agent_factory, thought_factory, monkeypatch):
    """Statements 1 and 2 run while the prompt is embedded, and their row leaves the server then too:
    PostgreSQL holds a pipeline's results until it is asked to flush, so without the flush request sent
    with them the row only left when read after the embedding (one more round trip). Here the
    embedding waits for the row to reach this process's socket before reading anything."""
    import select

    import psycopg

    from brain import embedding
    from tests.conftest import fake_vector

    client = agent_factory("dev")
    _seed(thought_factory, 30)
    seen: list[bool] = []

    def embed_many(texts, *, batch_size=64):
        pgconn = connection.connection.pgconn
        if pgconn.pipeline_status == psycopg.pq.PipelineStatus.ON:  # the search embeds inside its pipeline
            readable, _, _ = select.select([pgconn.socket], [], [], 2.0)
            seen.append(bool(readable))
        return [fake_vector(text) for text in texts]

    monkeypatch.setattr(embedding, "embed_many", embed_many)
    response = client.post("/api/v1/memory", {"prompt": QUERY, "session_id": "s", "contribute": False}, format="json")
    assert response.status_code == 200 and response.json()["result"]["sources"], response.content
    assert seen == [True]


def test_contribute_and_retrieve_call_takes_a_fixed_number_of_statements(agent_factory, thought_factory, fake_embedder):
    client = agent_factory("dev")
    _seed(thought_factory, 3)
    client.post("/api/v1/memory", {"prompt": QUERY, "session_id": "s"}, format="json")
    few, after = _statements(client, {"prompt": STATEMENT + " one", "session_id": "s"}, split=True)
    # Before the answer: the search, first (terms, lexical side while the prompt is embedded,
    # candidates); the agent's recent queries (keyword echo) and the correction guard, sent together;
    # in the storing transaction, the space's correction lock (shared) and the guard again, sent
    # together; the lock on the text's key and the lookup of a live thought saying the same (one row per
    # fact), sent together; the insert; the query log. The nearest existing thought (near-duplicate)
    # comes from the search's rows: no scan of its own. After it: the reinforcement, and the session's
    # implicit feedback.
    assert len(few) <= 11, "\n".join(few)
    assert not any("hnsw.ef_search" in sql for sql in few[2:])  # only the search's terms statement sets it
    assert len(after) == 2 and "access_count" in after[0] and "previous" in after[1], "\n".join(after)
    _seed(thought_factory, 20, start=3)
    assert len(_statements(client, {"prompt": STATEMENT + " two", "session_id": "s"})) == len(few) + len(after)


def test_a_contributions_flag_reads_share_one_round_trip(agent_factory, thought_factory, fake_embedder):
    """The keyword-echo read and the correction guard are both sent before either is read (pipeline mode)."""
    import psycopg

    client = agent_factory("dev")
    _seed(thought_factory, 3)
    client.post("/api/v1/memory", {"prompt": QUERY, "session_id": "s"}, format="json")
    seen: list[tuple[str, bool]] = []

    def record(execute, sql, params, many, context):
        status = context["connection"].connection.pgconn.pipeline_status
        seen.append((sql, status != psycopg.pq.PipelineStatus.OFF))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        response = client.post("/api/v1/memory", {"prompt": STATEMENT + " three", "session_id": "s"}, format="json")
    assert response.status_code == 200, response.content
    reads = {"recent queries" if "query_text" in sql else "guard": piped for sql, piped in seen
             if ("FROM brain_querylog q" in sql and "stored_thought_id IS NULL" in sql)
             or "corrected_fact_embedding <=>" in sql}  # fmt: skip
    assert reads == {"recent queries": True, "guard": True}, seen


def test_first_call_gets_onboarding_and_the_second_not(agent_factory, thought_factory, fake_embedder):
    client = agent_factory("dev")
    _seed(thought_factory, 3)
    first = client.post("/api/v1/memory", {"prompt": QUERY}, format="json").json()
    second = client.post("/api/v1/memory", {"prompt": QUERY}, format="json").json()
    assert "onboarding" in first["trace"]["operations"] and "Welcome" in first["result"]["guidance"]
    assert "onboarding" not in second["trace"]["operations"]


def _reads_a_vector(statements: list[str]) -> list[str]:
    """SELECTs that fetch a vector or tsvector column (each vector is ~1 ms of parsing per row)."""
    columns = ('."embedding"', '."corrected_fact_embedding"', '."search_vector"')
    selects = [sql for sql in statements if sql.lstrip().upper().startswith("SELECT")]
    # A null test of a column ("has_embedding") reads no vector.
    select_lists = [re.sub(r'"\w+"\."\w+" IS (NOT )?NULL', "", sql.split(" FROM ")[0]) for sql in selects]
    return [sql for sql in select_lists if any(column in sql for column in columns)]


def test_pending_corrections_are_listed_without_reading_vectors(agent_factory, thought_factory, fake_embedder):
    from brain.services.suggestions import suggestion_create

    client = agent_factory("dev")
    _seed(thought_factory, 3)
    wrong = thought_factory("Deploy fact: the pipeline restarts the workers before the migrations.")
    suggestion_create(thought=wrong, statement="Migrations run first.", origin="contradiction", agent=client.agent)
    statements = _statements(client, {"prompt": QUERY, "session_id": "s", "contribute": False})
    body = client.post("/api/v1/memory", {"prompt": QUERY, "session_id": "s", "contribute": False}, format="json")
    assert [p["thought_id"] for p in body.json()["result"]["pending_corrections"]] == [str(wrong.id)]
    assert _reads_a_vector(statements) == []


def test_a_thought_is_read_without_its_vectors(agent_factory, thought_factory):
    client = agent_factory("dev")
    old = thought_factory("The deploy pipeline restarts the workers first.")
    new = thought_factory("The deploy pipeline runs the migrations first.", source_ids=[old.id])
    old.related_thoughts.add(thought_factory("Deploys happen on Tuesdays."))
    Thought.objects.filter(pk=old.pk).update(superseded=True, superseded_by=new, refined_by=new)
    with CaptureQueriesContext(connection) as ctx:
        body = client.get(f"/api/v1/thoughts/{old.id}").json()
    assert body["has_embedding"] is True and body["superseded_by"] == str(new.id)
    assert body["related_thoughts"] == [str(t.id) for t in old.related_thoughts.all()] != []
    assert _reads_a_vector([q["sql"] for q in ctx.captured_queries]) == []
    Thought.objects.filter(pk=new.pk).update(embedding=None)
    assert client.get(f"/api/v1/thoughts/{new.id}").json()["has_embedding"] is False


def test_a_contributions_flag_reads_wait_for_the_database_once(agent_factory, thought_factory, fake_embedder):
    """Both reads come back with the pipeline's Sync: one wait, not a flush's and then the Sync's."""
    import psycopg

    from brain.services import flags
    from tests.conftest import fake_vector

    client = agent_factory("dev")
    _seed(thought_factory, 3)
    client.post("/api/v1/memory", {"prompt": QUERY, "session_id": "s", "contribute": False}, format="json")
    waits: list[str] = []
    wait = psycopg.Connection.wait

    def counting_wait(self, gen, *args, **kwargs):
        name = getattr(gen, "__qualname__", "")
        if name.endswith(("_fetch_gen", "_exit_gen")) or (self._pipeline is None and not name.endswith("_enter_gen")):
            waits.append(name)
        return wait(self, gen, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(psycopg.Connection, "wait", counting_wait)
        recent, correction = flags.contribution_checks(
            space=client.agent.space,
            agent=client.agent,
            agent_ref=client.agent.name,
            guard=True,
            vector=fake_vector(STATEMENT),
            text=STATEMENT,
        )
    assert recent == [QUERY] and correction is None
    assert waits == ["BasePipeline._exit_gen"], waits
