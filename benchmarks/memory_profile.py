"""Where a retrieve-only memory call's time goes, so a speed target that isn't met (docs/performance.md)
comes with what the time is spent on. Prints three views of the same call:

    python -m benchmarks.memory_profile [--database bench_colony] [--calls 300] [--servers] [--contribute]

1. CPU of the calling thread per phase (``time.thread_time`` around the functions that make up the
   call, through the whole Django + DRF stack in-process), and what is left for the framework.
   ``--contribute`` profiles contribute+retrieve calls instead (each stores a new thought).
2. Wall time of every SQL statement the call runs (a Django execute wrapper): database work plus the
   round trip, as the web process waits for it.
3. ``--servers``: the CPU the web server's processes spend per request over HTTP, for the production
   server (``python -m runtime.serve``: uvicorn, ASGI) and, as references, gunicorn serving the same
   Django app over WSGI and granian over WSGI and ASGI (one worker each, one client in sequence,
   keep-alive).

The database must hold the benchmark notes: run ``python -m benchmarks.compare --notes 10000
--skip-mem0`` first (it leaves ``bench_colony``; add ``--reuse`` to later runs). Loopback only,
bounded call counts. Figures from a loaded machine are noisy; compare phases within one run.
"""

from __future__ import annotations

import argparse
import collections
import functools
import itertools
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

from benchmarks.stats import percentile

BASE_DIR = Path(__file__).resolve().parent.parent
#: Django names each savepoint uniquely; statements are grouped without the name.
SAVEPOINT_NAME = re.compile(r'"s\d+_x\d+"')
PHASES = [
    # (module, attribute, label). Times are exclusive: a phase that runs inside another is taken out of
    # the outer one (the query is embedded inside the search's _fetch, while its lexical statement runs).
    ("core.throttling", "TokenRateThrottle.allow_request", "throttle (per-token counts in the cache)"),
    ("brain.apis.memory", "MemoryInputSerializer.is_valid", "input validation (DRF serializer)"),
    ("brain.embedding", "embed", "query embedding (ONNX Runtime)"),
    ("brain.selectors.search", "_fetch", "search statement + rows to candidates"),
    ("brain.ranking", "rank", "fusion and multipliers"),
    # A retrieve-only call's log row is written by its search (in "search statement + rows"); its
    # results are named after the response. A contribution logs in a statement of its own.
    ("brain.services.pheromones", "retrieval_log", "query log (a contribution's own statement)"),
    ("brain.services.pheromones", "retrieval_results", "query log's results (one statement, after the response)"),
    ("brain.services.pheromones", "reinforcement_fold", "reinforcement fold (one statement, after the response)"),
    ("rest_framework.renderers", "JSONRenderer.render", "JSON rendering"),
]


def _setup(database: str) -> None:
    sys.path.insert(0, str(BASE_DIR))
    os.chdir(BASE_DIR)
    from benchmarks.setup import server_url

    os.environ["DATABASE_URL"] = server_url(database)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ["DEBUG"] = "false"
    import django

    django.setup()
    from brain.models import Thought

    if not Thought.objects.exists():
        sys.exit(f"{database} holds no thoughts: run `python -m benchmarks.compare --notes 10000 --skip-mem0` first.")


def _agent_and_token():
    from benchmarks.setup import agent_client
    from core.models import Space

    agent, token, _ = agent_client(space=Space.objects.get(slug="default"), name=f"profile-{int(time.time() * 1000)}")
    return agent, token


def _prompts(seed: int):
    from benchmarks import seed as notes

    rng = random.Random(seed)
    for i in itertools.count():
        yield (
            f"Why does {rng.choice(notes.COMPONENTS)} {rng.choice(notes.ACTIONS)} {rng.choice(notes.CONDITIONS)}? ({i})"
        )


def _wrap(spent: dict, module: str, attribute: str, label: str, nested: list[float]) -> None:
    """Time ``module.attribute`` on the thread's CPU clock into ``spent[label]``, without the time of any
    other wrapped phase it calls (``nested``: the CPU time of the wrapped calls under way, innermost last)."""
    import importlib

    owner = importlib.import_module(module)
    *path, name = attribute.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args, **kwargs):
        started = time.thread_time()
        nested.append(0.0)
        try:
            return original(*args, **kwargs)
        finally:
            elapsed = time.thread_time() - started
            spent[label] += elapsed - nested.pop()
            if nested:
                nested[-1] += elapsed

    setattr(owner, name, timed)


def in_process(calls: int, *, contribute: bool = False) -> None:
    from django.db import connection
    from django.test import Client

    agent, token = _agent_and_token()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    prompts = _prompts(5)
    kind = "contribute+retrieve" if contribute else "retrieve-only"

    def call() -> None:
        if contribute:  # a new statement each time (a numbered prompt), stored and answered
            body = {"prompt": f"Observed: {next(prompts)} It needed a restart of the worker pool."}
            response = client.post("/api/v1/memory", body, content_type="application/json", HTTP_HOST="127.0.0.1")
        else:
            response = client.get(
                "/api/v1/memory", {"prompt": next(prompts), "contribute": "false"}, HTTP_HOST="127.0.0.1"
            )
        assert response.status_code == 200, response.content[:300]

    for _ in range(20):
        call()
    spent: dict[str, float] = collections.defaultdict(float)
    nested: list[float] = []
    for module, attribute, label in PHASES:
        _wrap(spent, module, attribute, label, nested)
    statements: dict[str, list[float]] = collections.defaultdict(list)

    def sql_timer(execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            statements[SAVEPOINT_NAME.sub('"…"', " ".join(sql.split()))[:70]].append(
                (time.perf_counter() - started) * 1000
            )

    import psycopg

    wait = psycopg.Connection.wait
    pipeline_reads = {
        "_fetch_gen": "(pipeline) results read: the search's statements 1 and 2 after the embedding",
        "_exit_gen": "(pipeline) its Sync: the search statement's rows, the end of its transaction",
    }

    def timed_wait(self, gen, *args, **kwargs):  # a pipeline's reads: the waits no execute wrapper sees
        label = pipeline_reads.get(getattr(gen, "__name__", ""))
        started = time.perf_counter()
        try:
            return wait(self, gen, *args, **kwargs)
        finally:
            if label:
                statements[label].append((time.perf_counter() - started) * 1000)

    walls = []
    cpu_started = time.thread_time()
    with connection.execute_wrapper(sql_timer), mock.patch.object(psycopg.Connection, "wait", timed_wait):
        for _ in range(calls):
            started = time.perf_counter()
            call()
            walls.append((time.perf_counter() - started) * 1000)
    total = (time.thread_time() - cpu_started) / calls * 1000
    print(f"\n1. CPU of the calling thread per {kind} call (in-process, {calls} calls): {total:.2f} ms")
    accounted = 0.0
    for _module, _attribute, label in PHASES:
        ms = spent[label] / calls * 1000
        accounted += ms
        print(f"   {ms:6.2f} ms  {ms / total:4.0%}  {label}")
    print(f"   {total - accounted:6.2f} ms  {(total - accounted) / total:4.0%}  the rest: Django + DRF + middleware")
    print(f"   wall per call: p50 {statistics.median(walls):.1f} ms, p95 {percentile(walls, 0.95):.1f} ms")
    print("\n2. SQL statements per call, wall time as the web process waits for each (p50 / mean ms;")
    print("   a statement sent in pipeline mode shows its sending only; the pipeline's reads are listed too):")
    for text, samples in sorted(statements.items(), key=lambda item: -sum(item[1])):
        per_call = len(samples) / calls
        print(f"   {statistics.median(samples):6.2f} / {statistics.mean(samples):6.2f}  x{per_call:.0f}  {text}")
    if contribute:
        # What these calls stored would otherwise stay among the benchmark's notes: the prompts share
        # bench-compare's vocabulary, and a later `compare --reuse` run found 1 point less hit@10.
        from brain.models import QueryLog, Thought

        QueryLog.objects.filter(agent=agent).delete()
        _, removed = Thought.objects.filter(agent=agent).delete()
        print(f"\n   removed the {removed.get('brain.Thought', 0)} thoughts these calls stored (the notes stay)")


def servers(database: str, calls: int, port: int) -> None:
    import httpx
    import psutil

    from benchmarks.compare import ColonyServer

    bin_dir = Path(sys.executable).parent
    gunicorn = [str(bin_dir / "gunicorn"), "config.wsgi", "-w", "1", "-b", f"127.0.0.1:{port}"]
    gunicorn += ["--log-level", "warning"]
    granian = [str(bin_dir / "granian"), "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    granian += ["--log-level", "warning", "--no-access-log"]
    candidates = {
        "uvicorn (production: runtime.serve, ASGI)": (None, {}),
        "gunicorn (reference: WSGI, sync worker)": (gunicorn, {"DATABASE_POOL": "false"}),
        "granian (reference: WSGI, Rust HTTP)": (
            [*granian, "--interface", "wsgi", "--blocking-threads", "1", "config.wsgi:application"],
            {"DATABASE_POOL": "false"},
        ),
        "granian (reference: ASGI, config.asgi)": ([*granian, "--interface", "asgi", "config.asgi:application"], {}),
    }
    print(f"\n3. Web server CPU per retrieve-only request over HTTP (one worker, {calls} requests in sequence):")
    for name, (command, extra) in candidates.items():
        server = ColonyServer(port=port, workers=1, database=database, reuse=True, command=command, extra_env=extra)
        token = server.start()
        try:
            client = httpx.Client(
                base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=30
            )
            prompts = _prompts(9)

            def call(client=client, prompts=prompts) -> float:
                started = time.perf_counter()
                response = client.get("/api/v1/memory", params={"prompt": next(prompts), "contribute": "false"})
                assert response.status_code == 200, response.text[:300]
                return (time.perf_counter() - started) * 1000

            for _ in range(20):
                call()
            root = psutil.Process(server.process.pid)
            tree = [root, *root.children(recursive=True)]

            def cpu(tree=tree) -> float:
                return sum(p.cpu_times().user + p.cpu_times().system for p in tree)

            before = cpu()
            walls = [call() for _ in range(calls)]
            per_request = (cpu() - before) / calls * 1000
            print(
                f"   {per_request:6.2f} ms CPU/request; latency p50 {statistics.median(walls):.1f} ms, "
                f"p95 {percentile(walls, 0.95):.1f} ms  {name}"
            )
        finally:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="bench_colony")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--servers", action="store_true", help="also measure the web servers' CPU per request")
    parser.add_argument("--port", type=int, default=8291)
    parser.add_argument(
        "--contribute", action="store_true", help="profile contribute+retrieve calls (each stores a new thought)"
    )
    args = parser.parse_args(argv)
    _setup(args.database)
    in_process(args.calls, contribute=args.contribute)
    if args.servers:
        servers(args.database, args.calls, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
