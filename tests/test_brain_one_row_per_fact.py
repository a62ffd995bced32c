"""One row per fact: the memory call stores no second live thought with the same text.

The same text once case, Unicode forms (NFKC) and whitespace are normalised, contributed again to the
same space, reinforces the live thought that says it and answers with its id (``trace.already_known``).
A repeat of a superseded or corrected thought is stored as today (a corrected fact with the
re-contamination warning) and never reinforces what it repeats; near-duplicates, refinements and
imports keep their own rules.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction

from brain import embedding
from brain.apis.memory import MemoryInputSerializer
from brain.models import QueryLog, Thought
from brain.services import pheromones, pipeline, thoughts
from brain.services.memory import memory_run, steps
from tests.concurrency_support import run_concurrently
from tests.conftest import fake_vector

pytestmark = pytest.mark.django_db

FACT = "The deploy pipeline runs the database migrations before it restarts the web workers."
#: FACT as someone else types it: other case, runs of spaces, a tab, a no-break space, full-width letters
#: and a trailing newline. NFKC folds the full-width and no-break forms, the rest is case and spacing.
FACT_RETYPED = "  the DEPLOY pipeline   runs the\tdatabase migrations before it restarts the\u00a0ｗｅｂ workers.\n"


def memory(client, status=200, **body):
    response = client.post("/api/v1/memory", body, format="json")
    assert response.status_code == status, response.content
    return response.json()


def folded(space) -> None:
    """Count every logged access now (the memory call folds at most once a second after its answer)."""
    pheromones.reinforcement_fold_all(space=space)


def test_the_same_text_twice_is_one_row_and_the_second_answer_names_it_as_already_known(dev, space, fake_embedder):
    first = memory(dev, prompt=FACT)
    thought_id = first["trace"]["thought_id"]
    assert first["trace"]["already_known"] is False and first["trace"]["thoughts_contributed"] == 1
    folded(space)
    before = Thought.objects.get(pk=thought_id)

    # Another topic's filter keeps it out of the sources: the reinforcement is the repeat's own.
    again = memory(dev, prompt=FACT, filter_topic="elsewhere")

    assert Thought.objects.filter(space=space).count() == 1
    trace = again["trace"]
    assert (trace["already_known"], trace["thought_id"], trace["thoughts_contributed"]) == (True, thought_id, 0)
    assert "contribute:already_known" in trace["operations"]
    assert f"already known: {thought_id}" in again["result"]["guidance"]
    assert again["result"]["response"].startswith(f"Already known as {thought_id}: nothing new was stored")
    log = QueryLog.objects.get(session_id=trace["session_id"])
    assert log.stored_thought_id == before.pk  # a contribution's text, not a query (keyword echo)
    assert log.results == [{"id": thought_id, "score": None}]
    folded(space)
    after = Thought.objects.get(pk=thought_id)
    assert after.access_count == before.access_count + 1
    assert after.pheromone_weight == pytest.approx(before.pheromone_weight + pheromones.REINFORCE_STEP)
    assert str(dev.agent.pk) in after.accessed_by


def test_a_repeat_found_by_the_search_is_reinforced_once(dev, space, fake_embedder):
    thought_id = memory(dev, prompt=FACT)["trace"]["thought_id"]
    folded(space)
    before = Thought.objects.get(pk=thought_id).access_count
    again = memory(dev, prompt=FACT)
    assert again["trace"]["already_known"] is True
    assert [s["thought_id"] for s in again["result"]["sources"]] == [thought_id]  # it is its own best source
    log = QueryLog.objects.get(session_id=again["trace"]["session_id"])
    assert [r["id"] for r in log.results] == [thought_id]  # named once
    folded(space)
    assert Thought.objects.get(pk=thought_id).access_count == before + 1


def test_case_unicode_forms_and_whitespace_do_not_make_a_new_fact(dev, agent_factory, space, fake_embedder):
    thought_id = memory(dev, prompt=FACT)["trace"]["thought_id"]
    again = memory(agent_factory("qa"), prompt=FACT_RETYPED)
    assert (again["trace"]["already_known"], again["trace"]["thought_id"]) == (True, thought_id)
    assert list(Thought.objects.filter(space=space).values_list("content", flat=True)) == [FACT]


def test_different_spaces_keep_their_own_rows(dev, agent_factory, other_space, space, fake_embedder):
    here = memory(dev, prompt=FACT)["trace"]
    there = memory(agent_factory("dev", in_space=other_space), prompt=FACT)["trace"]
    assert here["already_known"] is False and there["already_known"] is False
    assert here["thought_id"] != there["thought_id"]
    assert Thought.objects.filter(space=space).count() == Thought.objects.filter(space=other_space).count() == 1


def test_a_near_duplicate_is_stored_flagged_with_the_consolidation_hint(dev, space, fake_embedder):
    thought_id = memory(dev, prompt=FACT)["trace"]["thought_id"]
    # Other punctuation: not the same text, and the (bag-of-words) embedding is the same vector.
    body = memory(dev, prompt=FACT.replace("migrations before", "migrations; before").rstrip(".") + "!")
    trace = body["trace"]
    assert trace["already_known"] is False and trace["thought_id"] not in (None, thought_id)
    assert Thought.objects.filter(space=space).count() == 2
    assert "near_duplicate" in Thought.objects.get(pk=trace["thought_id"]).quality_flags
    assert f'"consolidates": ["{thought_id}", "{trace["thought_id"]}"]' in body["result"]["guidance"]


def test_a_refinement_with_its_parents_text_follows_the_lineage_rules(dev, space, fake_embedder):
    parent = memory(dev, prompt=FACT)["trace"]["thought_id"]
    body = memory(dev, prompt=FACT, refines=parent)
    refinement = body["trace"]["thought_id"]
    assert body["trace"]["already_known"] is False and refinement != parent
    assert Thought.objects.get(pk=parent).refined_by_id is not None
    assert str(Thought.objects.get(pk=parent).refined_by_id) == refinement
    # The live one is now the refinement: the same text again is known as it.
    again = memory(dev, prompt=FACT)["trace"]
    assert (again["already_known"], again["thought_id"]) == (True, refinement)
    assert Thought.objects.filter(space=space).count() == 2


def test_a_repeat_of_a_superseded_thought_is_stored_and_does_not_reinforce_it(dev, space, fake_embedder):
    old = memory(dev, prompt=FACT, topic="deploys")["trace"]["thought_id"]
    memory(dev, prompt="The deploy pipeline now restarts the web workers first, then runs migrations.", refines=old)
    folded(space)
    before = Thought.objects.get(pk=old)
    assert before.superseded

    body = memory(dev, prompt=FACT, filter_topic="elsewhere")  # the search does not return it either

    assert body["trace"]["already_known"] is False and body["trace"]["thought_id"] != old
    assert Thought.objects.filter(space=space, content=FACT).count() == 2
    folded(space)
    after = Thought.objects.get(pk=old)
    assert (after.access_count, after.pheromone_weight) == (before.access_count, before.pheromone_weight)


def test_repeating_a_corrected_fact_never_reinforces_it_and_keeps_the_warning(dev, agent_factory, space, fake_embedder):
    """The seed's case: however often the wrong fact comes back, each repeat is stored flagged with the
    warning, and none strengthens a copy of it (repetition must not outweigh a correction)."""
    wrong = "The staging database listens on port 5433 for every service of the cluster."
    wrong_id = memory(dev, prompt=wrong, topic="staging")["trace"]["thought_id"]
    correction = memory(
        agent_factory("liaison"),
        prompt="CORRECTION: the staging database listens on port 5432, not 5433.",
        thought_category="correction",
        topic="staging",
        corrected_fact=wrong,
        correct_fact="The staging database listens on port 5432.",
        supersedes=[wrong_id],
        source_ref={"type": "url", "value": "ops-runbook"},
    )["trace"]["thought_id"]
    folded(space)
    before = Thought.objects.get(pk=wrong_id)
    repeats = []
    for agent in (dev, agent_factory("qa"), agent_factory("dev")):
        body = memory(agent, prompt=wrong.upper(), filter_topic="elsewhere")
        trace = body["trace"]
        assert trace["already_known"] is False and trace["thoughts_contributed"] == 1
        assert body["result"]["guidance"].startswith("WARNING") and correction in body["result"]["guidance"]
        stored = Thought.objects.get(pk=trace["thought_id"])
        assert "contradicts_correction" in stored.quality_flags and str(stored.contradicted_by_id) == correction
        repeats.append(stored.pk)
    assert len(set(repeats)) == 3 and wrong_id not in {str(r) for r in repeats}
    folded(space)
    after = Thought.objects.get(pk=wrong_id)
    assert (after.access_count, after.pheromone_weight) == (before.access_count, before.pheromone_weight)
    assert all(t.access_count == 0 and t.pheromone_weight == 1.0 for t in Thought.objects.filter(pk__in=repeats))


def test_an_import_keeps_its_own_rules_and_the_oldest_live_copy_is_the_known_one(dev, space, fake_embedder):
    first = memory(dev, prompt=FACT)["trace"]["thought_id"]
    imported = dev.post(
        "/api/v1/thoughts/import", data=json.dumps([{"content": FACT}]), content_type="application/json"
    )
    assert imported.status_code == 201, imported.json()
    assert Thought.objects.filter(space=space, content=FACT).count() == 2  # an import stores what it is given
    again = memory(dev, prompt=FACT)["trace"]
    assert (again["already_known"], again["thought_id"]) == (True, first)


def test_a_question_or_a_retrieve_only_call_is_not_a_repeat(dev, space, fake_embedder):
    memory(dev, prompt=FACT)
    body = memory(dev, prompt=FACT, contribute=False)
    assert body["trace"]["already_known"] is False and body["trace"]["thought_id"] is None


def _copies_of(template: Thought, **made: str) -> None:
    """20,000 copies of ``template`` (column -> SQL over ``g``, the copy's number, for what differs), analysed."""
    fields, columns = thoughts.thought_columns()
    made = {"id": "gen_random_uuid()", "embedding": "NULL", **made}
    select = ", ".join(made.get(f.column, f't."{f.column}"') for f in fields)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO brain_thought ({columns}) SELECT {select.replace('%', '%%')} "  # noqa: S608 - the model's columns
            "FROM brain_thought t, generate_series(1, 20000) g WHERE t.id = %s",
            [template.pk],
        )
        cursor.execute("ANALYZE brain_thought")


def _prepared_plan_and_rows(sql: str, names: list[str], types: str, arguments: str, params, plan_cache_mode: str):
    """The plan and the rows of ``sql`` prepared (its ``%(name)s`` as ``$1``, ``$2``... in ``names`` order,
    of ``types``) and executed with ``arguments`` under ``plan_cache_mode``."""
    for number, name in enumerate(names, 1):
        sql = sql.replace(f"%({name})s", f"${number}")
    run = f"EXECUTE probe({arguments})"
    with connection.cursor() as cursor:
        cursor.execute(f"SET plan_cache_mode = {plan_cache_mode}")
        cursor.execute(f"PREPARE probe({types}) AS {sql}")
        cursor.execute(f"EXPLAIN {run}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(run, params)
        rows = cursor.fetchall()
        cursor.execute("DEALLOCATE probe")
        cursor.execute("RESET plan_cache_mode")
    return plan, rows


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
def test_the_lookup_is_an_index_probe(thought_factory, space, plan_cache_mode):
    """Among 20,000 thoughts the lookup reads the live rows of the space with the key by index, as a
    custom plan (a prepared statement's first runs) and as the generic plan that follows."""
    _copies_of(
        thought_factory("fact number 0"),
        content="'fact number ' || g || ' about the deploy pipeline and its workers'",
        superseded="g % 3 = 0",
        created_at="t.created_at + g * interval '1 second'",
    )
    plan, found = _prepared_plan_and_rows(
        thoughts._KNOWN_SQL,
        ["space", "content", "categories", "flag", "sources"],
        "bigint, text, text[], text, uuid[]",
        "%s, 'FACT  number 7 about the deploy pipeline and its  workers', '{}', 'x', NULL",
        [space.pk],
        plan_cache_mode,
    )
    assert "Index Scan using thought_space_content_key" in plan, plan
    assert [Thought.objects.get(pk=pk).content for (pk,) in found] == [
        "fact number 7 about the deploy pipeline and its workers"
    ]


# --- races ----------------------------------------------------------------------------------------
@pytest.fixture
def offline(monkeypatch):
    # Not what these tests are about: the model (a fake, deterministic one) and the follow-up jobs.
    monkeypatch.setattr(steps, "thought_schedule_followups", lambda **kwargs: None)
    monkeypatch.setattr(pipeline, "thought_schedule_followups", lambda **kwargs: None)
    monkeypatch.setattr(embedding, "embed_many", lambda texts, **kw: [fake_vector(t) for t in texts])
    monkeypatch.setattr(embedding, "embed", lambda text: fake_vector(text))


@pytest.mark.django_db(transaction=True)
def test_identical_contributions_at_once_leave_one_row(space, agent_factory, offline):
    agents = [agent_factory("dev").agent for _ in range(4)]

    def contribute(agent, text):
        serializer = MemoryInputSerializer(data={"prompt": text})
        serializer.is_valid(raise_exception=True)
        return memory_run(agent=agent, request=serializer.validated_data)

    for round_no in range(5):
        text = f"Round {round_no}: the nightly backup of the staging database runs at 02:00 UTC and takes an hour."
        texts = [text.upper() if n % 2 else text for n in range(len(agents))]  # the same fact, case aside
        answers = run_concurrently([lambda a=a, t=t: contribute(a, t) for a, t in zip(agents, texts, strict=True)])
        assert not [a for a in answers if isinstance(a, BaseException)], answers
        stored = Thought.objects.filter(space=space, content__iexact=text)
        assert stored.count() == 1, (round_no, answers)
        traces = [a["trace"] for a in answers]
        assert {t["thought_id"] for t in traces} == {str(stored.get().pk)}
        assert sorted(t["already_known"] for t in traces) == [False, True, True, True]


@pytest.mark.django_db(transaction=True)
def test_the_lookup_refuses_to_run_without_a_transaction_to_hold_its_lock(space):
    with pytest.raises(RuntimeError, match="inside transaction.atomic"):
        thoughts.thought_known(space=space, content=FACT)
    with transaction.atomic():
        assert thoughts.thought_known(space=space, content=FACT) is None


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
def test_the_guard_finds_a_corrected_thoughts_text_by_index(thought_factory, space, plan_cache_mode):
    """Among 20,000 superseded thoughts, the correction guard reads the ones with the text's key by index
    (brain.services.flags._GUARD_SAME_TEXT_SQL: through the space's few corrections, or through
    ``thought_space_superseded_key`` when they are many), as a custom plan and as the generic plan."""
    from brain.services import flags

    _copies_of(
        thought_factory("fact number 0"),
        content="'fact number ' || g || ' about the deploy pipeline and its workers'",
        superseded="true",
    )
    plan, _rows = _prepared_plan_and_rows(
        flags._GUARD_SAME_TEXT_SQL,
        ["space", "text", "exclude"],
        "bigint, text, uuid[]",
        "%s, 'FACT number 7 about the deploy pipeline and its workers', '{}'",
        [space.pk],
        plan_cache_mode,
    )
    assert "Seq Scan" not in plan and "Index Cond" in plan, plan
