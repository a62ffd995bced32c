"""Web UI benchmark: server time of every page with 10k thoughts and 1k tasks (target: < 300 ms each).

    python -m benchmarks.run --only pages

Runs in-process through Django's test client (middleware, session, templates, PostgreSQL — no
network), as a logged-in member of the benchmark space, on the ``colony_bench`` database. Seeds
(once, reused by later runs): the brain benchmark's 10k thoughts, 1k tasks in every status, a task
with a long transition history, pending correction suggestions and 30 days of quality rollups.
Prints p50/p95/max per page and the number of SQL queries each page ran.
"""

from __future__ import annotations

import datetime as dt
import random

BENCH_SPACE = "bench"
BENCH_USER = "bench-human"
BENCH_PROJECT = "bench-pages"
HISTORY_TASK = "bench-history"
HISTORY_TRANSITIONS = 30
AGENTS = ("bench-dev", "bench-qa", "bench-pdsa", "bench-liaison")
#: How 1k tasks spread over the statuses: a long-running project is mostly finished work.
STATUS_WEIGHTS = {
    "backlog": 80,
    "pending": 40,
    "ready": 40,
    "active": 60,
    "approval": 20,
    "approved": 20,
    "testing": 20,
    "review": 40,
    "rework": 20,
    "blocked": 20,
    "complete": 560,
    "cancelled": 60,
}


def _seed_tasks(space, n: int):
    from tasks.models import Project, Task
    from tasks.services.transitions import task_transition

    project, _ = Project.objects.get_or_create(space=space, slug=BENCH_PROJECT, defaults={"name": "Benchmark pages"})
    existing = Task.objects.filter(project=project).count()
    rng = random.Random(11)
    statuses = [s for s, w in STATUS_WEIGHTS.items() for _ in range(w)]
    if existing < n:
        Task.objects.bulk_create(
            [
                Task(
                    space=space,
                    project=project,
                    slug=f"bench-task-{i}",
                    title=f"Benchmark task {i}: make {rng.choice(['search', 'billing', 'deploy'])} faster",
                    description="Seeded for the page benchmark.",
                    status=statuses[i % len(statuses)],
                    role=rng.choice(["pdsa", "dev", "qa", "liaison"]),
                    dna={"blocked_reason": "waiting for credentials"}
                    if statuses[i % len(statuses)] == "blocked"
                    else {},
                )
                for i in range(existing, n)
            ]
        )
    task, created = Task.objects.get_or_create(
        space=space, slug=HISTORY_TASK, defaults={"project": project, "title": "A task with a long history"}
    )
    if created:  # the real transition path, as the system: backlog <-> pending, with brain markers
        for i in range(HISTORY_TRANSITIONS):
            task_transition(task=task, to="pending" if i % 2 == 0 else "backlog", summary=f"step {i}", as_system=True)
    return task


def _seed_quality(space) -> None:
    from django.utils import timezone

    from quality.models import QualityRollup

    today = timezone.now().date()
    if QualityRollup.objects.filter(space=space, day=today).exists():
        return
    QualityRollup.objects.filter(space=space).delete()
    rng = random.Random(5)
    rows = []
    for offset in range(45):
        day = today - dt.timedelta(days=offset)
        for agent in ("", *AGENTS):
            items = rng.randint(20, 60)
            rows.append(
                QualityRollup(
                    day=day,
                    space=space,
                    agent_name=agent,
                    turns=items // 3,
                    items=items,
                    on_topic=int(items * rng.uniform(0.7, 0.95)),
                    used=int(items * rng.uniform(0.3, 0.7)),
                    contradicted=int(items * rng.uniform(0.0, 0.08)),
                    contradictions_raised=3,
                    contradictions_resolved=2,
                    computed_at=timezone.now(),
                )
            )
    QualityRollup.objects.bulk_create(rows)


def _seed_suggestions(space, n: int = 25) -> None:
    from brain.choices import SuggestionOrigin
    from brain.models import CorrectionSuggestion, Thought
    from brain.services.suggestions import suggestion_create

    have = CorrectionSuggestion.objects.filter(space=space, status="pending").count()
    for thought in Thought.objects.filter(space=space).order_by("created_at")[: max(0, n - have)]:
        suggestion_create(
            thought=thought,
            statement=f"Benchmark: this is not so ({thought.id}).",
            origin=SuggestionOrigin.QUALITY_JUDGE,
        )


def run(*, thoughts: int = 10_000, tasks: int = 1_000, requests: int = 30) -> list[tuple[str, list[float]]]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from benchmarks.seed import seed_thoughts
    from benchmarks.setup import bench_space
    from benchmarks.stats import timed
    from brain.models import Thought
    from core.models import Agent
    from core.services import agent_create
    from tasks.models import Task

    space = bench_space(BENCH_SPACE)
    seed_thoughts(space, thoughts)
    for name in AGENTS:
        if not Agent.objects.filter(space=space, name=name).exists():
            agent_create(name=name, role=name.split("-")[1], space=space)
    history_task = _seed_tasks(space, tasks)
    _seed_suggestions(space)
    _seed_quality(space)
    user, _ = get_user_model().objects.get_or_create(username=BENCH_USER)
    space.members.add(user)
    client = Client()
    client.force_login(user)
    session = client.session
    session["colony_space_id"] = space.pk
    session.save()

    thought = Thought.objects.filter(space=space, source_ids__len__gt=0).order_by("-created_at").first()
    thought = thought or Thought.objects.filter(space=space).first()
    pages = [
        ("home", "/", {}),
        ("home: health panel", "/home/health/", {}),
        ("board (all tasks)", "/board/", {}),
        ("board refresh (htmx)", "/board/", {"HTTP_HX_REQUEST": "true"}),
        ("board filtered (role=dev)", "/board/?role=dev", {}),
        (f"task page ({HISTORY_TRANSITIONS} transitions)", f"/tasks/{history_task.slug}/", {}),
        ("card move panel", f"/tasks/{history_task.slug}/moves/", {}),
        ("brain explorer (newest)", "/brain/", {}),
        ("brain search", "/brain/?q=why+does+the+deploy+pipeline+time+out", {}),
        (
            "brain search, topic+category",
            "/brain/?q=billing+service+restart&topic=billing&category=decision_record",
            {},
        ),
        ("thought page (with lineage)", f"/brain/thoughts/{thought.id}/", {}),
        ("quality dashboard (space, 30 days)", "/quality/", {}),
        ("quality dashboard (agent, 90 days)", f"/quality/?agent={AGENTS[0]}&days=90", {}),
    ]
    total_thoughts = Thought.objects.filter(space=space).count()
    total_tasks = Task.objects.filter(space=space).count()
    print(
        f"\npages: {total_thoughts} thoughts and {total_tasks} tasks in space {BENCH_SPACE!r}, "
        f"{requests} requests per page"
    )
    rows, queries = [], {}
    from brain import embedding

    # The search pages embed the query with the model on the request path: shown apart, so a slow
    # CPU (or a busy one) is told from a slow page.
    rows.append(
        ("(embedding of one query, model only)", timed(lambda i: embedding.embed(f"why does step {i} fail"), requests))
    )
    for label, url, headers in pages:

        def get(_i, url=url, headers=headers):
            response = client.get(url, **headers)
            if response.status_code != 200:
                raise RuntimeError(f"{url} answered {response.status_code}")

        for i in range(3):  # warm-up: model load, plan caches
            get(i)
        with CaptureQueriesContext(connection) as captured:
            get(0)
        queries[label] = len(captured.captured_queries)
        rows.append((f"{label} [{queries[label]} queries]", timed(get, requests)))
    return rows
