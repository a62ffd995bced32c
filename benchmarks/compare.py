"""``make bench-compare``: Colony against Mem0 OSS on the same notes, queries, model and PostgreSQL.

    python -m benchmarks.compare [--notes 10000] [--queries 300] [--port 8250] [--workers 2]
        [--skip-mem0] [--database bench_colony] [--mem0-database bench_mem0] [--reuse] [--samples FILE]

1. Generates ``--notes`` deterministic notes (``benchmarks.seed.seed_text``) and ``--queries``
   questions, each written for one target note (the same texts on every run).
2. Mem0 (``mem0ai``, installed only in the benchmark venv ``var/bench-venv`` by ``make
   bench-compare``, never a Colony dependency) runs in that venv (``benchmarks/mem0_side.py``):
   ``add(infer=False)`` of every note (notes/s), then ``search()`` in-process for every query (timed
   inside Mem0's process; each query is sent to Mem0 and to Colony one after the other, in
   alternating order, so both are measured under the same machine load), with
   pgvector (HNSW, cosine) in the database ``bench_mem0`` of the same embedded PostgreSQL and the
   same all-MiniLM-L6-v2 from the installed model package (sentence-transformers on torch).
3. Colony runs as the production web server (``python -m runtime.serve``, uvicorn, ``--workers``) on
   127.0.0.1:``--port`` against the database ``bench_colony`` of the same server (recreated each
   run unless ``--reuse`` finds the notes there; ``--reuse`` also keeps Mem0's ``bench_mem0``). The
   notes go in through ``POST /api/v1/thoughts/import`` in batches of 1000, one request per web
   worker in flight (notes/s, embedding included). Both databases are then vacuumed and analyzed
   (:func:`settle`), as autovacuum would have done in a running deployment, before the queries as retrieve-only
   ``GET /api/v1/memory?contribute=false`` calls over HTTP (keep-alive), then ``--contribute``
   contribute+retrieve ``POST``s of new statements. The timed calls go through :class:`TimingClient`
   (the standard library's ``http.client`` on one keep-alive connection), so the figure is the
   server's answer, not the client library's own work (httpx, which sends the import, spends about
   0.8 ms more CPU per call and measured p50 1.2 ms higher on the same server and queries).
4. Prints one table: p50/p95/p99 ms, notes/s, hit@10 and MRR (target note in the top 10 / mean
   reciprocal rank), and Colony/Mem0 ratios; then the speed targets (docs/performance.md), met or
   not. ``--samples FILE`` also keeps every call's time, in the order asked (:func:`write_samples`).

Everything runs on this machine; figures on a loaded machine are noisy (say so when quoting them).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.setup import recreate_database, server_url
from benchmarks.stats import percentile

BASE_DIR = Path(__file__).resolve().parent.parent
BENCH_VENV = BASE_DIR / "var" / "bench-venv"
COLONY_DB = "bench_colony"
MEM0_DB = "bench_mem0"
IMPORT_BATCH = 1000

QUERY_FORMS = [
    "What happens to {component} {condition}, and what did we do about it?",
    "Why does {component} {action} {condition}?",
    "{component} {action}: what fixed it {condition}?",
]


class TimingClient:
    """The timed side of the benchmark: one keep-alive HTTP/1.1 connection (``http.client``), a bearer
    token, JSON in and out. Mem0's search is timed inside its own process with no client at all; this
    keeps what a Colony figure includes to the request, the server and the response."""

    def __init__(self, port: int, token: str) -> None:
        import http.client

        self._connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        self._headers = {"Authorization": f"Bearer {token}"}

    def _send(self, method: str, path: str, body: bytes | None = None) -> dict:
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        self._connection.request(method, path, body=body, headers=headers)
        response = self._connection.getresponse()
        payload = response.read()
        if response.status != 200:
            raise SystemExit(f"{method} {path[:80]} answered {response.status}: {payload[:500]!r}")
        return json.loads(payload)

    def get(self, path: str, params: dict) -> dict:
        from urllib.parse import urlencode

        return self._send("GET", f"{path}?{urlencode(params)}")

    def post(self, path: str, body: dict) -> dict:
        return self._send("POST", path, json.dumps(body).encode())

    def close(self) -> None:
        self._connection.close()


# --- data -----------------------------------------------------------------------------------------
def notes(n: int) -> list[dict]:
    from benchmarks.seed import seed_text

    out = []
    for i in range(n):
        row = seed_text(i)
        out.append(
            {
                "content": row["content"],
                "topic": row["topic"],
                "tags": row["tags"],
                "context_metadata": {"note": i},
            }
        )
    return out


def queries(n_notes: int, n_queries: int) -> list[dict]:
    """Questions about one target note each: its component, action and condition, reworded (the
    observation number and the fix are left out, so several notes can answer: a real ranking task)."""
    from benchmarks import seed

    rng = random.Random(2026)
    out = []
    for q in range(n_queries):
        target = rng.randrange(n_notes)
        r = random.Random(target)  # the same draws seed_text(target) made
        component, action, condition = r.choice(seed.COMPONENTS), r.choice(seed.ACTIONS), r.choice(seed.CONDITIONS)
        form = QUERY_FORMS[q % len(QUERY_FORMS)]
        text = form.format(component=component, action=action, condition=condition)
        out.append({"query": text[0].upper() + text[1:], "target": target})
    return out


def quality(ranked: list[list[int]], targets: list[int]) -> tuple[float, float]:
    hits, rr = 0, 0.0
    for found, target in zip(ranked, targets, strict=True):
        if target in found[:10]:
            hits += 1
            rr += 1.0 / (found.index(target) + 1)
    return hits / len(targets), rr / len(targets)


# --- databases ------------------------------------------------------------------------------------
def settle(urls: list[str]) -> float:
    """``VACUUM (ANALYZE)`` of every table in each database; returns the seconds it took. Run after both
    loads and before anything is timed, so that both sides answer from the state a running deployment is
    in, with nothing left for autovacuum to do. Without it, autovacuum processes Mem0's new table during a
    fresh run's timed queries and Mem0's search p50 rises by several ms, which flatters Colony's ratio."""
    import psycopg

    started = time.perf_counter()
    for url in urls:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE)")
    return time.perf_counter() - started


def _manage(env: dict, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


# --- Mem0 -----------------------------------------------------------------------------------------
class Mem0Peer:
    """Mem0 in its own venv (``benchmarks/mem0_side.py --serve``): adds the notes (or finds them there
    with ``reuse``), then answers one query at a time, so its queries interleave with Colony's."""

    def __init__(
        self, data: list[dict], workdir: Path, *, reuse: bool = False, database: str = MEM0_DB, add_first: int = 0
    ) -> None:
        python = BENCH_VENV / "bin" / "python"
        if not python.exists():
            raise SystemExit(f"{python} is missing: run `make bench-compare` (it installs mem0ai into {BENCH_VENV}).")
        skip_add = reuse and _mem0_rows(server_url(database)) == len(data)
        url = server_url(database) if skip_add else recreate_database(database)
        self.url = url
        workdir = workdir.resolve()
        payload = workdir / "mem0_input.json"
        payload.write_text(
            json.dumps({"database_url": url, "notes": data, "skip_add": skip_add, "add_first": add_first})
        )
        what = f"reusing its {len(data)} notes in {database}" if skip_add else f"add(infer=False) {len(data)} notes"
        print(f"Mem0 (in {BENCH_VENV}): {what} ...", flush=True)
        self.process = subprocess.Popen(
            [str(python), str(BASE_DIR / "benchmarks" / "mem0_side.py"), str(payload), "--serve"],
            cwd=workdir,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "MEM0_DIR": str(workdir / "mem0"), "TOKENIZERS_PARALLELISM": "false"},
        )
        line = self.process.stdout.readline()
        if not line.startswith("READY "):
            self.process.kill()
            raise SystemExit(f"Mem0's side stopped before it was ready (output: {line!r}); see its messages above.")
        self.notes_per_s = json.loads(line[len("READY ") :])["notes_per_s"]

    def search(self, text: str) -> tuple[float, list[int]]:
        self.process.stdin.write(json.dumps(text) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        return answer["ms"], answer["ranked"]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def _mem0_rows(url: str) -> int:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM bench_notes").fetchone()[0]
    except psycopg.Error:
        return 0


# --- Colony ---------------------------------------------------------------------------------------
class ColonyServer:
    """Colony's web server on 127.0.0.1:``port`` against ``database``: the production one
    (``python -m runtime.serve``) unless ``command`` names another (e.g. a WSGI reference), with
    ``extra_env`` on top of the benchmark environment."""

    def __init__(
        self,
        *,
        port: int,
        workers: int,
        database: str = COLONY_DB,
        reuse: bool = False,
        command: list[str] | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.port, self.workers, self.database = port, workers, database
        self.command = command or [sys.executable, "-m", "runtime.serve"]
        self.url = server_url(database) if reuse else recreate_database(database)
        self.env = {
            **os.environ,
            "DATABASE_URL": self.url,
            "PORT": str(port),
            "HOST": "127.0.0.1",
            "WEB_WORKERS": str(workers),
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            "CELERY_TASK_ALWAYS_EAGER": "false",
            **(extra_env or {}),
        }
        self.process: subprocess.Popen | None = None

    def start(self) -> str:
        shown = " ".join(Path(part).name if i == 0 else part for i, part in enumerate(self.command[:3]))
        print(f"Colony: migrating {self.database}, starting {shown} on :{self.port} ...", flush=True)
        _manage(self.env, "migrate", "--verbosity", "0")
        name = f"bench-agent-{int(time.time())}"  # a fresh agent (and token) also in a reused database
        token = _manage(self.env, "agent", "create", name, "--role", "dev").strip().splitlines()[-1].strip()
        self.process = subprocess.Popen(self.command, cwd=BASE_DIR, env=self.env, start_new_session=True)
        import httpx

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/api/v1/health", timeout=2).status_code in (200, 503):
                    return token
            except httpx.HTTPError:
                time.sleep(0.5)
        self.stop()
        raise SystemExit(f"Colony's server did not answer on :{self.port} within 120 s.")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


def _loaded_note_ids(url: str, n: int) -> dict[str, int] | None:
    """A reused database's thought ids by note number (``context_metadata.note``), if it holds the
    ``n`` notes; None otherwise."""
    import psycopg

    try:
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                "SELECT id::text, (context_metadata->>'note')::int FROM brain_thought "
                "WHERE context_metadata ? 'note' AND thought_category = 'uncategorized'"
            ).fetchall()
    except psycopg.Error:
        return None
    ids = {thought_id: note for thought_id, note in rows if note is not None and note < n}
    return ids if len(ids) == n else None


def run_colony(
    data: list[dict],
    qs: list[dict],
    *,
    port: int,
    workers: int,
    contribute: int,
    database: str = COLONY_DB,
    reuse: bool = False,
    peer: Mem0Peer | None = None,
) -> tuple[dict, dict | None]:
    """Colony's figures, and the peer's when given: each query goes to both, in alternating order
    (Mem0 first on even queries, Colony first on odd ones), so both are timed under the same load."""
    import httpx

    loaded = _loaded_note_ids(server_url(database), len(data)) if reuse else None
    if reuse and loaded is None:
        print(f"Colony: {database} does not hold the {len(data)} notes; loading them.", flush=True)
    server = ColonyServer(port=port, workers=workers, database=database, reuse=loaded is not None)
    token = server.start()
    # Neither opens a connection before its first call; both are closed however the run ends.
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=300
    )
    timed = TimingClient(port, token)
    try:
        note_ids: dict[str, int] = dict(loaded or {})
        # One request per web worker in flight, as any bulk client would send them: while one worker
        # embeds its batch, the other's is being written (the database's HNSW inserts), so neither the
        # CPU nor PostgreSQL waits for the other.
        from concurrent.futures import ThreadPoolExecutor

        def retrieve(text: str) -> list[int]:
            body = timed.get("/api/v1/memory", {"prompt": text, "contribute": "false", "limit": 10})
            return [note_ids.get(s["thought_id"], -1) for s in body["result"]["sources"]]

        # Every worker loads its model and opens its connection before anything is timed: the import
        # rate is the import's, not a first model load's (or, on a new machine, the one-time ONNX
        # export into the data folder: ~6 s, which would lower a first run's rate by ~30%). Mem0's side
        # loads its model before its add() is timed as well.
        def warm(text: str) -> None:  # concurrent, so that every worker gets some (httpx's pool)
            client.get("/api/v1/memory", params={"prompt": text, "contribute": "false"}).raise_for_status()

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            list(pool.map(warm, [f"warm-up question {i} about the deploy pipeline" for i in range(4 * workers)]))
        started = time.perf_counter()

        def send(start: int) -> tuple[int, list[str]]:
            response = client.post("/api/v1/thoughts/import", json=data[start : start + IMPORT_BATCH])
            if response.status_code != 201:
                raise SystemExit(f"import failed: {response.status_code} {response.text[:500]}")
            return start, response.json()["ids"]

        done = 0
        batches = [] if loaded is not None else range(0, len(data), IMPORT_BATCH)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for start, ids in pool.map(send, batches):
                for offset, thought_id in enumerate(ids):
                    note_ids[thought_id] = start + offset
                done += len(ids)
                print(f"  imported {done}/{len(data)}", end="\r", flush=True)
        import_seconds = time.perf_counter() - started
        if loaded is None:
            print(f"  imported {len(data)} notes in {import_seconds:.1f} s", flush=True)
        else:
            print(f"  reused {database}: {len(data)} notes already loaded (no import rate)", flush=True)

        # BM25's statistics deltas folded, as Colony's periodic job does every 15 s where a worker runs
        # (config/celery.py TEXT_STATS_COMPACT_SECONDS; none runs here): a reused database otherwise
        # keeps every earlier run's contributions' delta rows, which each search sums (the terms
        # statement takes 1.4 ms instead of 0.75 after ~20 reuses).
        fold = "from brain.services.text_stats import text_stats_compact; text_stats_compact()"
        _manage(server.env, "shell", "--no-imports", "-c", fold)
        seconds = settle([server_url(database)] + ([peer.url] if peer is not None else []))
        print(f"  vacuumed and analyzed {'both databases' if peer else database} in {seconds:.1f} s", flush=True)
        for i in range(4 * workers):  # warm again: the caches after the import
            retrieve(f"warm-up question {i} about the deploy pipeline")
        samples, ranked = [], []
        peer_samples, peer_ranked = [], []

        def ask_colony(text: str) -> None:
            t0 = time.perf_counter()
            ranked.append(retrieve(text))
            samples.append((time.perf_counter() - t0) * 1000)

        def ask_peer(text: str) -> None:
            ms, found = peer.search(text)
            peer_samples.append(ms)
            peer_ranked.append(found)

        for i, q in enumerate(qs):
            order = (ask_colony,) if peer is None else (ask_peer, ask_colony) if i % 2 == 0 else (ask_colony, ask_peer)
            for ask in order:
                ask(q["query"])
        contribute_samples = []
        for i in range(contribute):
            body = {
                "prompt": f"Benchmark contribution {i}: the {random.Random(i).choice(['cache', 'queue', 'index'])} "
                f"layer needed a restart after deploy number {i}, and a retry fixed it.",
                "session_id": "bench-compare",
            }
            t0 = time.perf_counter()
            timed.post("/api/v1/memory", body)
            contribute_samples.append((time.perf_counter() - t0) * 1000)
        colony = {
            "notes_per_s": len(data) / import_seconds if loaded is None else float("nan"),
            "search_ms": samples,
            "ranked": ranked,
            "contribute_ms": contribute_samples,
        }
        mem0 = None
        if peer is not None:
            mem0 = {"notes_per_s": peer.notes_per_s, "search_ms": peer_samples, "ranked": peer_ranked}
        return colony, mem0
    finally:
        timed.close()
        client.close()
        server.stop()


# --- the table ------------------------------------------------------------------------------------
def print_table(n_notes: int, qs: list[dict], colony: dict, mem0: dict | None) -> None:
    targets = [q["target"] for q in qs]
    rows = []
    for name, result in (("Mem0 OSS search() in-process", mem0), ("Colony GET /memory over HTTP", colony)):
        if result is None:
            continue
        hit, mrr = quality(result["ranked"], targets)
        s = result["search_ms"]
        rows.append(
            (name, percentile(s, 0.5), percentile(s, 0.95), percentile(s, 0.99), result["notes_per_s"], hit, mrr)
        )
    print()
    print(f"{n_notes} notes, {len(qs)} queries, all-MiniLM-L6-v2, one PostgreSQL + pgvector (HNSW cosine)")
    print(f"{'':30} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'notes/s':>9} {'hit@10':>7} {'MRR':>6}")
    for name, p50, p95, p99, rate, hit, mrr in rows:
        print(f"{name:30} {p50:8.1f} {p95:8.1f} {p99:8.1f} {rate:9.0f} {hit:7.1%} {mrr:6.3f}")
    c = colony["contribute_ms"]
    if c:
        print(
            f"{'Colony POST /memory contribute':30} {percentile(c, 0.5):8.1f} {percentile(c, 0.95):8.1f} "
            f"{percentile(c, 0.99):8.1f}"
        )
    if len(rows) == 2:
        m, k = rows
        print(
            f"{'Mem0 / Colony (× faster)':30} {m[1] / k[1]:8.2f} {m[2] / k[2]:8.2f} {m[3] / k[3]:8.2f} "
            f"{k[4] / m[4]:9.2f} {k[5] - m[5]:+7.1%} {k[6] - m[6]:+6.3f}"
        )
    print()
    print("speed targets (docs/performance.md):")
    checks = speed_target_checks(
        n_notes, colony_row=rows[-1], mem0_row=rows[0] if len(rows) == 2 else None, contribute_ms=c
    )
    for label, ok in checks:
        verdict = "not measured (--reuse)" if ok is None else "met    " if ok else "NOT met"
        print(f"  {verdict}  {label}")


def write_samples(path: Path, qs: list[dict], colony: dict, mem0: dict | None) -> None:
    """Every call's time in the order asked (``--samples``): the table's percentiles hide whether a slow
    stretch was a few queries or a few seconds of the machine."""
    samples = {
        "queries": [q["query"] for q in qs],
        "colony_ms": colony["search_ms"],
        "mem0_ms": mem0["search_ms"] if mem0 else None,
        "contribute_ms": colony["contribute_ms"],
    }
    path.write_text(json.dumps(samples))


def speed_target_checks(
    n_notes: int, *, colony_row: tuple, mem0_row: tuple | None, contribute_ms: list[float]
) -> list[tuple[str, bool | None]]:
    """The speed targets for a run of ``n_notes`` (docs/performance.md): (label, met; None = not
    measured, --reuse). A row is (name, p50, p95, p99, notes/s, hit@10, MRR). At 10,000 notes: retrieve
    p50 <= 8 ms and p95 <= 20 ms, contribute+retrieve p50 <= 20 ms; at 100,000 only p50 <= 12 ms; the
    import and Mem0 ratios at any size."""
    at_10k = n_notes <= 10_000
    rates = not math.isnan(colony_row[4])  # --reuse: nothing was imported, no rate to judge
    checks: list[tuple[str, bool | None]] = [
        (f"retrieve p50 <= {8 if at_10k else 12} ms", colony_row[1] <= (8.0 if at_10k else 12.0))
    ]
    if at_10k:
        checks.append(("retrieve p95 <= 20 ms", colony_row[2] <= 20.0))
    checks.append(("import >= 300 notes/s", colony_row[4] >= 300 if rates else None))
    if contribute_ms and at_10k:
        checks.append(("contribute+retrieve p50 <= 20 ms", percentile(contribute_ms, 0.5) <= 20.0))
    if mem0_row is not None:
        checks.append(("retrieve p50 at least 2x faster than Mem0", mem0_row[1] >= 2 * colony_row[1]))
        both_rates = rates and not math.isnan(mem0_row[4])
        checks.append(("import at least 6x Mem0's add rate", colony_row[4] >= 6 * mem0_row[4] if both_rates else None))
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=10_000, help="notes loaded into both (default 10000; 100000)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--contribute", type=int, default=100, help="contribute+retrieve calls timed (Colony)")
    parser.add_argument("--port", type=int, default=8250)
    parser.add_argument("--workers", type=int, default=2, help="web worker processes of Colony's server")
    parser.add_argument("--skip-mem0", action="store_true", help="Colony only")
    parser.add_argument("--database", default=COLONY_DB, help=f"Colony's database (default {COLONY_DB})")
    parser.add_argument(
        "--mem0-add",
        type=int,
        default=10_000,
        help="notes Mem0 loads through add() (its add rate); the rest in bulk through its own embedder and "
        "vector store (default 10000: all of a 10k run)",
    )
    parser.add_argument("--mem0-database", default=MEM0_DB, help=f"Mem0's database (default {MEM0_DB})")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep Colony's and Mem0's databases when they already hold the notes (no import, no adds: no rates)",
    )
    parser.add_argument(
        "--samples",
        type=Path,
        help="also write every call's time, in the order asked, to this JSON file (queries, ms per side)",
    )
    args = parser.parse_args(argv)

    sys.path.insert(0, str(BASE_DIR))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    workdir = BASE_DIR / "var" / "bench-compare"
    workdir.mkdir(parents=True, exist_ok=True)
    data, qs = notes(args.notes), queries(args.notes, args.queries)
    peer = (
        None
        if args.skip_mem0
        else Mem0Peer(
            data, workdir, reuse=args.reuse, database=args.mem0_database, add_first=min(args.mem0_add, args.notes)
        )
    )
    try:
        colony, mem0 = run_colony(
            data,
            qs,
            port=args.port,
            workers=args.workers,
            contribute=args.contribute,
            database=args.database,
            reuse=args.reuse,
            peer=peer,
        )
    finally:
        if peer is not None:
            peer.close()
    print_table(args.notes, qs, colony, mem0)
    if args.samples:
        write_samples(args.samples, qs, colony, mem0)
        print(f"every call's time: {args.samples}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
