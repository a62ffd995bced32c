"""benchmarks/reinforcement_fold.py's measurement folds the calls it marks, each once."""

import pytest

from brain.models import QueryLog, Thought
from brain.services.pheromones import reinforcement_fold, retrieval_log


def _logged_calls(dev, thought_factory, calls: int) -> list[Thought]:
    """Three thoughts, and ``calls`` logged memory calls that each returned all three."""
    thoughts = [thought_factory(f"Deploy note {i}: the pipeline restarts workers after migrations.") for i in range(3)]
    for i in range(calls):
        retrieval_log(
            space=dev.agent.space,
            agent=dev.agent,
            agent_ref=dev.agent.name,
            session_id=f"s{i}",
            query_text="deploy",
            results=[{"id": str(t.id), "score": 0.5} for t in thoughts],
        )
    return thoughts


@pytest.mark.django_db
def test_a_measured_fold_counts_the_calls_it_marked(dev, thought_factory):
    from benchmarks.reinforcement_fold import measure

    thoughts = _logged_calls(dev, thought_factory, 4)
    assert reinforcement_fold().logs == 4
    times, reinforced = measure(2, 2)  # the four calls marked uncounted again, folded two at a time
    assert len(times) == 2 and all(t > 0 for t in times)
    assert reinforced == 6  # each fold reinforced the three thoughts
    assert [t.access_count for t in Thought.objects.filter(pk__in=[t.pk for t in thoughts])] == [8, 8, 8]
    assert not QueryLog.objects.filter(reinforced=False).exists()


@pytest.mark.django_db(transaction=True)
def test_the_fillfactor_comparison_rewrites_the_table_and_counts_its_updates(dev, thought_factory):
    """``--fillfactors``: the table rewritten at each setting, and the fold's updates counted, HOT or not
    (committed folds: the statistics are read across transactions)."""
    from django.db import connection

    from benchmarks.reinforcement_fold import measure, rewrite, thought_updates

    _logged_calls(dev, thought_factory, 2)
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'brain_thought'")
        (options,) = cursor.fetchone()
    migrated = int(next(o for o in options if o.startswith("fillfactor=")).split("=")[1])
    try:
        rewrite(60)
        with connection.cursor() as cursor:
            cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'brain_thought'")
            assert "fillfactor=60" in cursor.fetchone()[0]
        before = thought_updates()
        measure(1, 2)
        after = thought_updates()
        assert after[0] - before[0] == 6  # two folds, three thoughts each
        assert 0 <= after[1] - before[1] <= 6
    finally:
        rewrite(migrated)  # the migrations' setting, for the tests after this one
