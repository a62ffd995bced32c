"""``make bench-scale``: the memory endpoint at a million thoughts (not in CI).

    python -m benchmarks.scale [--thoughts 1000000] [--real 2000] [--queries 300] [--reuse]
        [--build-memory 4GB] [--nice 5] [--port 8260] [--workers 2] [--database bench_scale]
        [--load-only] [--verify-stats] [--json FILE]

Builds the database ``bench_scale`` on the embedded PostgreSQL (or ``BENCH_DATABASE_URL``'s server)
and measures the memory endpoint over HTTP against the production web server:

1. Texts: :func:`scale_text` is ``benchmarks.seed.seed_text`` (component, action, condition, fix)
   plus a detail sentence: a host (6 000 of them), a ticket (200 000) and 3 to 8 words of a 50 000
   pseudo-word vocabulary drawn with Zipf's law, so document frequencies range from every thought to
   a handful, as in real notes (deterministic per row, as are the ids: :func:`thought_id`).
2. Vectors: the first ``--real`` thoughts get the real all-MiniLM-L6-v2 vector of their text; every
   other one the real vector of its "component action condition" sentence (3 900 cluster centres)
   plus Gaussian noise, normalised, so the index sees clusters and the dense side agrees with the
   text. 90% of the rows are in the default space, 10% in a second one, so every query runs with
   the space filter and HNSW's iterative scan, as the endpoint does.
3. Load: the secondary indexes of ``brain_thought`` are dropped (their definitions kept in the table
   ``bench_scale_indexes`` until rebuilt, so an interrupted load resumes with ``--reuse``), the rows
   go in with binary ``COPY`` in batches of :data:`BATCH`, each its own transaction. The BM25
   statistics triggers (migration 0008) stay on: they fire once per COPY statement, so they are
   exact by construction; ``text_stats_compact`` folds their delta rows afterwards. Then VACUUM
   ANALYZE, and every index is rebuilt and timed, the HNSW one last with ``maintenance_work_mem`` =
   ``--build-memory`` and 2 parallel maintenance workers. The loader, its server backend and the
   build's parallel workers run at ``--nice`` (the machine is shared); the queries at normal
   priority.
4. Queries: ``python -m runtime.serve`` (``benchmarks.compare.ColonyServer``) on the database, warmed
   up, then ``--queries`` retrieve-only ``GET /api/v1/memory?contribute=false`` calls over HTTP, one
   client: p50/p95/p99, hit@10 (the target thought in the top 10, for the questions naming its
   ticket or its host and a rare word), how often the best answer has the asked component, action and
   condition, and the memory of the web and PostgreSQL processes while the queries run.

``--reuse`` keeps ``bench_scale`` (only the missing rows are loaded; a loaded database goes straight
to the queries).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import random
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from benchmarks import setup as bench_setup
from benchmarks.setup import server_url
from benchmarks.stats import percentile

BASE_DIR = Path(__file__).resolve().parent.parent
#: The benchmark's database (``--database``).
DATABASE = "bench_scale"
BATCH = 10_000
NOISE = 0.35
OTHER_SPACE = "scale-other"
#: Where the definitions of the dropped indexes wait for their rebuild.
INDEX_TABLE = "bench_scale_indexes"
HOST_ROLES = ["web", "db", "worker", "cache", "queue", "search", "batch", "edge", "auth", "mail", "ci", "etl"]
VOCABULARY = 50_000
TICKETS = 200_000
EPOCH = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)

#: The columns the loader writes and their binary COPY types; the others stay NULL.
#: ``embedding`` goes as pgvector's binary representation (written as bytes).
COLUMNS = [
    ("id", "uuid"),
    ("space_id", "int8"),
    ("content", "text"),
    ("context_metadata", "jsonb"),
    ("contributor_id", "text"),
    ("contributor_name", "text"),
    ("created_at", "timestamptz"),
    ("thought_type", "text"),
    ("source_ids", "uuid[]"),
    ("tags", "varchar[]"),
    ("thought_category", "text"),
    ("topic", "text"),
    ("temporal_scope", "date"),
    ("alternatives_considered", "text"),
    ("corrected_fact", "text"),
    ("correct_fact", "text"),
    ("supersedes", "uuid[]"),
    ("quality_flags", "varchar[]"),
    ("superseded", "bool"),
    ("embedding", "bytea"),
    ("embedding_model", "text"),
    ("pheromone_weight", "float8"),
    ("access_count", "int4"),
    ("accessed_by", "varchar[]"),
    ("co_retrieved_with", "jsonb"),
    ("effective_confidence", "float8"),
]


# --- the corpus -----------------------------------------------------------------------------------
def _vocabulary() -> list[str]:
    """VOCABULARY distinct pseudo-words (consonant-vowel syllables), the same on every run."""
    rng = random.Random(50_000)
    onsets = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "st", "tr"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou"]
    codas = ["", "", "n", "r", "s", "l", "x", "m"]
    words: dict[str, None] = {}
    while len(words) < VOCABULARY:
        syllables = rng.choice((2, 2, 3, 3, 4))
        word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(syllables)) + rng.choice(codas)
        words.setdefault(word)
    return list(words)


_WORDS: list[str] = []
_RANKS: dict[str, int] = {}


def words() -> list[str]:
    if not _WORDS:
        _WORDS.extend(_vocabulary())
        _RANKS.update((word, rank) for rank, word in enumerate(_WORDS))
    return _WORDS


def thought_id(i: int) -> uuid.UUID:
    """Row ``i``'s id: random-looking (as uuid4s are, for the primary key's b-tree) and reproducible."""
    digest = hashlib.blake2b(i.to_bytes(8, "little"), digest_size=16, person=b"colony-scale").digest()
    return uuid.UUID(bytes=digest, version=4)


def triple(i: int) -> tuple[int, int, int]:
    """Indexes of row ``i``'s component, action and condition (the draws ``seed_text(i)`` makes)."""
    from benchmarks import seed

    rng = random.Random(i)
    return (
        rng.randrange(len(seed.COMPONENTS)),
        rng.randrange(len(seed.ACTIONS)),
        rng.randrange(len(seed.CONDITIONS)),
    )


def triple_sentence(component: int, action: int, condition: int) -> str:
    from benchmarks import seed

    text = f"{seed.COMPONENTS[component]} {seed.ACTIONS[action]} {seed.CONDITIONS[condition]}"
    return text[0].upper() + text[1:]


def detail(i: int) -> tuple[str, str, list[str]]:
    """Row ``i``'s host, ticket and words (Zipf: a word's probability is proportional to 1/rank)."""
    vocabulary = words()
    rng = random.Random(i + 2**40)
    host = f"{rng.choice(HOST_ROLES)}-{rng.randrange(1, 501)}"
    ticket = f"OPS-{rng.randrange(1, TICKETS + 1)}"
    picked = [vocabulary[int(VOCABULARY ** rng.random()) - 1] for _ in range(rng.randint(3, 8))]
    return host, ticket, picked


def scale_text(i: int) -> dict:
    """``seed_text(i)`` with the detail sentence appended to the content."""
    from benchmarks.seed import seed_text

    fields = seed_text(i)
    host, ticket, picked = detail(i)
    fields["content"] += f" Seen on {host}, ticket {ticket}; notes: {' '.join(picked)}."
    return fields


def vector_bytes(vectors) -> list[bytes]:
    """pgvector's binary input (dimensions, 0, big-endian float4s) for each row of ``vectors``."""
    import numpy as np

    header = len(vectors[0]).to_bytes(2, "big") + b"\0\0" if len(vectors) else b""
    body = np.ascontiguousarray(vectors, dtype=">f4")
    return [header + row.tobytes() for row in body]


def copy_rows(cursor, start: int, stop: int, *, spaces: tuple[int, int], vectors, label: str) -> None:
    """Rows ``start``..``stop`` of the corpus with one binary COPY (``cursor``: a psycopg cursor).
    Every tenth row goes to ``spaces[1]``, the others to ``spaces[0]``; ``vectors`` holds one
    normalised vector per row."""
    from psycopg.types.json import Jsonb

    names = ", ".join(name for name, _ in COLUMNS)
    empty: list = []
    with cursor.copy(f"COPY brain_thought ({names}) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types([kind for _, kind in COLUMNS])
        for i, vector in zip(range(start, stop), vector_bytes(vectors), strict=True):
            fields = scale_text(i)
            copy.write_row(
                (
                    thought_id(i),
                    spaces[1] if i % 10 == 9 else spaces[0],
                    fields["content"],
                    Jsonb({"note": i}),
                    "bench-seed",
                    "Benchmark seed",
                    EPOCH + dt.timedelta(seconds=30 * i),
                    "original",
                    empty,
                    fields["tags"],
                    fields["thought_category"],
                    fields["topic"],
                    fields["temporal_scope"],
                    "",
                    "",
                    "",
                    empty,
                    empty,
                    False,
                    vector,
                    label,
                    1.0,
                    0,
                    empty,
                    Jsonb({}),
                    1.0,
                )
            )


def corpus_vectors(start: int, stop: int, *, real, centres, rng):
    """Vectors of rows ``start``..``stop``: ``real[i]`` for the first ``len(real)`` rows, the row's
    cluster centre plus noise for the others."""
    import numpy as np

    rows = np.arange(start, stop)
    picks = np.array([np.ravel_multi_index(triple(int(i)), centres.shape[:3]) for i in rows])
    flat = centres.reshape(-1, centres.shape[-1])
    vectors = flat[picks] + rng.normal(0, NOISE / np.sqrt(flat.shape[1]), (len(rows), flat.shape[1]))
    own = rows < len(real)
    vectors[own] = real[rows[own]]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


# --- the database ---------------------------------------------------------------------------------
def _url() -> str:
    return server_url(DATABASE)


def setup(reuse: bool) -> str:
    url = _url()
    bench_setup.ensure_database(url, fresh=not reuse)
    os.environ.setdefault("DEBUG", "false")
    bench_setup.use_database(url)
    return url


def secondary_indexes_drop(cursor) -> list[tuple[str, str]]:
    """Drop brain_thought's indexes that back no constraint; their definitions go to INDEX_TABLE
    first (same transaction). Returns every definition waiting there."""
    cursor.execute(f"CREATE TABLE IF NOT EXISTS {INDEX_TABLE} (name text PRIMARY KEY, definition text NOT NULL)")
    cursor.execute(
        """
        SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
        WHERE x.indrelid = 'brain_thought'::regclass
          AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)
        ORDER BY i.relname
        """
    )
    for name, definition in cursor.fetchall():
        cursor.execute(f"INSERT INTO {INDEX_TABLE} VALUES (%s, %s) ON CONFLICT DO NOTHING", [name, definition])
        cursor.execute(f'DROP INDEX "{name}"')
    cursor.execute(f"SELECT name, definition FROM {INDEX_TABLE} ORDER BY name")
    return cursor.fetchall()


def secondary_indexes_build(cursor, *, build_memory: str, report=None) -> list[tuple[str, float, list[str]]]:
    """Rebuild every index INDEX_TABLE holds, the HNSW ones last, and forget each once built.
    Returns (name, seconds, the server's notices) per index, each also given to ``report``."""
    cursor.execute(f"SELECT to_regclass('{INDEX_TABLE}') IS NOT NULL")
    if not cursor.fetchone()[0]:
        return []
    cursor.execute(f"SELECT name, definition FROM {INDEX_TABLE}")
    pending = sorted(cursor.fetchall(), key=lambda item: ("USING hnsw" in item[1], item[0]))
    notices: list[str] = []
    raw = cursor.connection

    def keep(diagnostic) -> None:
        notices.append(diagnostic.message_primary)

    raw.add_notice_handler(keep)
    built = []
    try:
        cursor.execute(f"SET maintenance_work_mem = '{build_memory}'")
        cursor.execute("SET max_parallel_maintenance_workers = 2")
        for name, definition in pending:
            notices.clear()
            started = time.perf_counter()
            cursor.execute(definition)
            cursor.execute(f"DELETE FROM {INDEX_TABLE} WHERE name = %s", [name])
            built.append((name, time.perf_counter() - started, list(notices)))
            if report:
                report(*built[-1])
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute("RESET max_parallel_maintenance_workers")
    finally:
        raw.remove_notice_handler(keep)
    return built


def _renice(pid: int, niceness: int) -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, pid, niceness)
    except OSError:
        pass  # not ours to renice (another user's process, or gone)


@contextmanager
def niced(cursor, niceness: int):
    """Run the block at ``niceness``: this process, its server backend and, while it runs, the
    backend's parallel workers (an index build's), when the server is on this machine."""
    local = not os.environ.get("BENCH_DATABASE_URL")
    cursor.execute("SELECT pg_backend_pid()")
    backend = cursor.fetchone()[0]
    before = os.getpriority(os.PRIO_PROCESS, 0)
    stop = threading.Event()

    def watch() -> None:
        import psycopg

        with psycopg.connect(_url(), autocommit=True) as conn:
            while not stop.wait(0.3):
                for (pid,) in conn.execute("SELECT pid FROM pg_stat_activity WHERE leader_pid = %s", [backend]):
                    _renice(pid, niceness)

    watcher = threading.Thread(target=watch, daemon=True)
    if niceness:
        _renice(0, niceness)
        if local:
            _renice(backend, niceness)
            watcher.start()
    try:
        yield
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join()
        if local:
            _renice(backend, 0)
        _renice(0, before)


def load(*, thoughts: int, real: int, build_memory: str, niceness: int) -> dict:
    """Load the corpus up to ``thoughts`` rows and build the indexes; returns the figures."""
    from django.db import connection

    from brain.services.text_stats import text_stats_compact
    from core.models import Space
    from core.services import space_get_or_create_default

    figures: dict = {}
    main = space_get_or_create_default()
    other, _ = Space.objects.get_or_create(slug=OTHER_SPACE, defaults={"name": "Other space"})
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor  # psycopg's own (COPY, notices)
        cursor.execute("SELECT count(*) FROM brain_thought")
        have = cursor.fetchone()[0]
        if have >= thoughts:
            print(f"{have} thoughts already loaded (--reuse).")
        with niced(cursor, niceness):
            if have < thoughts:
                figures.update(_insert(cursor, have, thoughts, real=real, spaces=(main.pk, other.pk)))
                started = time.perf_counter()
                written = text_stats_compact()
                figures["stats_compact_s"] = time.perf_counter() - started
                print(f"text statistics compacted in {figures['stats_compact_s']:.1f} s ({written} rows)", flush=True)
                started = time.perf_counter()
                cursor.execute("VACUUM (ANALYZE) brain_thought")
                figures["vacuum_s"] = time.perf_counter() - started
                print(f"VACUUM ANALYZE in {figures['vacuum_s']:.0f} s", flush=True)

            def report(name: str, seconds: float, notices: list[str]) -> None:
                print(f"  index {name} built in {seconds:.1f} s" + "".join(f"\n    notice: {n}" for n in notices))

            print(f"(re)building any dropped index (maintenance_work_mem {build_memory}, 2 parallel workers)")
            built = secondary_indexes_build(cursor, build_memory=build_memory, report=report)
            if built:
                figures["indexes"] = built
                figures["indexes_s"] = sum(seconds for _, seconds, _ in built)
                figures["build_memory"] = build_memory
                cursor.execute("ANALYZE brain_thought")
    connection.close()  # the next backend runs at normal priority
    return figures


def _insert(cursor, have: int, thoughts: int, *, real: int, spaces: tuple[int, int]) -> dict:
    import numpy as np
    from tqdm import tqdm

    from benchmarks import seed
    from brain import embedding

    dropped = secondary_indexes_drop(cursor)
    print(f"dropped {len(dropped)} secondary indexes of brain_thought (rebuilt after the load)", flush=True)
    real = min(real, thoughts)
    started = time.perf_counter()
    shape = (len(seed.COMPONENTS), len(seed.ACTIONS), len(seed.CONDITIONS))
    sentences = [triple_sentence(*np.unravel_index(k, shape)) + "." for k in range(int(np.prod(shape)))]
    print(f"embedding {len(sentences)} cluster centres and {real} real thoughts ...", flush=True)
    centres = np.array(embedding.embed_many(sentences), dtype=np.float64).reshape(*shape, -1)
    texts = [scale_text(i)["content"] for i in range(real)]
    real_vectors = np.array(embedding.embed_many(texts), dtype=np.float64).reshape(real, -1)
    embed_s = time.perf_counter() - started
    print(f"embedded in {embed_s:.0f} s", flush=True)
    label = embedding.current_model_label()
    cursor.execute("SET synchronous_commit = off")
    started = time.perf_counter()
    with tqdm(total=thoughts, initial=have, unit="thought", desc="COPY", smoothing=0.05) as bar:
        for start in range(have, thoughts, BATCH):
            stop = min(thoughts, start + BATCH)
            rng = np.random.default_rng(start)
            vectors = corpus_vectors(start, stop, real=real_vectors, centres=centres, rng=rng)
            copy_rows(cursor, start, stop, spaces=spaces, vectors=vectors, label=label)
            bar.update(stop - start)
    cursor.execute("RESET synchronous_commit")
    seconds = time.perf_counter() - started
    rows = thoughts - have
    print(f"COPY: {rows} thoughts in {seconds:.0f} s ({rows / seconds:.0f}/s)", flush=True)
    return {"embed_s": embed_s, "copy_rows": rows, "copy_s": seconds}


def sizes() -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), pg_table_size('brain_thought'), pg_relation_size('thought_embedding_hnsw'), "
            "pg_indexes_size('brain_thought'), pg_total_relation_size('brain_thought'), "
            "pg_database_size(current_database()), current_setting('shared_buffers'), "
            "(SELECT COALESCE(pg_relation_size(NULLIF(reltoastrelid, 0)), 0) FROM pg_class "
            "WHERE oid = 'brain_thought'::regclass), "
            "(SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
            "(SELECT count(*) FROM brain_lexemestats), version() FROM brain_thought"
        )
        count, table, hnsw, indexes, total, database, shared, toast, pgvector, lexeme_rows, version = cursor.fetchone()
        cursor.execute(
            "SELECT i.relname, pg_relation_size(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "WHERE x.indrelid = 'brain_thought'::regclass ORDER BY 2 DESC"
        )
        each = cursor.fetchall()
    mb = 2**20
    print(
        f"{count} thoughts: table {table / mb:.0f} MB (of which TOAST {toast / mb:.0f} MB), "
        f"HNSW index {hnsw / mb:.0f} MB, "
        f"all indexes {indexes / mb:.0f} MB, table + indexes {total / mb:.0f} MB, database {database / mb:.0f} MB; "
        f"shared_buffers {shared}; pgvector {pgvector}; {lexeme_rows} LexemeStats rows"
    )
    print("  " + ", ".join(f"{name} {size / mb:.0f} MB" for name, size in each))
    return {
        "thoughts": count,
        "table_mb": table / mb,
        "toast_mb": toast / mb,
        "hnsw_mb": hnsw / mb,
        "indexes_mb": indexes / mb,
        "total_mb": total / mb,
        "database_mb": database / mb,
        "index_mb": {name: size / mb for name, size in each},
        "shared_buffers": shared,
        "pgvector": pgvector,
        "postgres": version.split(" on ")[0],
    }


def stats_verify() -> list[str]:
    from brain.services.text_stats import text_stats_verify
    from core.models import Space

    return [problem for space in Space.objects.all() for problem in text_stats_verify(space.pk)]


# --- the queries ----------------------------------------------------------------------------------
def questions(thoughts: int, n: int) -> list[dict]:
    """``n`` questions, each about one thought of the default space: its component, action and
    condition reworded (``benchmarks.compare.QUERY_FORMS``); two in three also name its ticket, or
    its host and its rarest word, so one thought is the answer (hit@10); the others match hundreds."""
    from benchmarks import seed
    from benchmarks.compare import QUERY_FORMS

    rng = random.Random(2026)
    out = []
    for q in range(n):
        target = rng.randrange(thoughts)
        while target % 10 == 9:
            target = rng.randrange(thoughts)
        c, a, k = triple(target)
        host, ticket, picked = detail(target)
        text = QUERY_FORMS[q % len(QUERY_FORMS)].format(
            component=seed.COMPONENTS[c], action=seed.ACTIONS[a], condition=seed.CONDITIONS[k]
        )
        text = text[0].upper() + text[1:]
        kind = q % 3
        if kind == 1:
            text += f" (ticket {ticket})"
        elif kind == 2:
            rarest = max(picked, key=_RANKS.__getitem__)
            text += f" Seen on {host}, {rarest}."
        out.append({"query": text, "target": str(thought_id(target)), "specific": kind != 0, "about": (c, a, k)})
    return out


def _process_memory(pids: list[int]) -> tuple[float, float]:
    """(RSS, PSS) in MB summed over ``pids`` and their children. PSS splits shared pages (such as
    PostgreSQL's shared buffers) between the processes mapping them, so its sum does not count
    them once per backend as the RSS sum does."""
    import psutil

    rss = pss = 0
    seen = set()
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for proc in procs:
            if proc.pid in seen:
                continue
            seen.add(proc.pid)
            try:
                info = proc.memory_full_info()
            except psutil.Error:
                continue
            rss += info.rss
            pss += getattr(info, "pss", info.rss)
    return rss / 2**20, pss / 2**20


def _postmaster_pid() -> int | None:
    if os.environ.get("BENCH_DATABASE_URL"):
        return None
    from runtime import embedded_db

    pidfile = embedded_db.pgdata_dir() / "postmaster.pid"
    return int(pidfile.read_text().split()[0]) if pidfile.exists() else None


def measure(*, thoughts: int, queries: int, port: int, workers: int) -> dict:
    import httpx

    from benchmarks import seed
    from benchmarks.compare import ColonyServer

    qs = questions(thoughts, queries)
    server = ColonyServer(port=port, workers=workers, database=DATABASE, reuse=True)
    token = server.start()
    postmaster = _postmaster_pid()
    peaks = {"web": (0.0, 0.0), "postgres": (0.0, 0.0)}
    stop = threading.Event()

    def sample() -> None:
        while True:
            for name, pids in (("web", [server.process.pid]), ("postgres", [postmaster] if postmaster else [])):
                rss, pss = _process_memory(pids)
                peaks[name] = (max(peaks[name][0], rss), max(peaks[name][1], pss))
            if stop.wait(1.0):
                return

    try:
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=120
        )

        def ask(text: str) -> tuple[float, list[dict]]:
            started = time.perf_counter()
            response = client.get("/api/v1/memory", params={"prompt": text, "contribute": "false", "limit": 10})
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                raise SystemExit(f"memory GET answered {response.status_code}: {response.text[:300]}")
            return elapsed, response.json()["result"]["sources"]

        warm = [ask(f"warm-up {i}: why does {seed.COMPONENTS[i % 20]} {seed.ACTIONS[i % 15]}?")[0] for i in range(20)]
        print(f"warm-up: 20 calls, last 5 {', '.join(f'{ms:.0f}' for ms in warm[-5:])} ms", flush=True)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        samples, hits, specific, on_topic = [], 0, 0, 0
        for q in qs:
            elapsed, sources = ask(q["query"])
            samples.append(elapsed)
            ids = [s["thought_id"] for s in sources]
            if q["specific"]:
                specific += 1
                hits += q["target"] in ids[:10]
            if sources:
                expected = triple_sentence(*q["about"])
                preview = sources[0]["content_preview"]
                n = min(len(expected), len(preview))
                on_topic += preview[:n] == expected[:n]
        stop.set()
        sampler.join()
    finally:
        server.stop()
    result = {
        "queries": len(samples),
        "workers": workers,
        "p50_ms": percentile(samples, 0.5),
        "p95_ms": percentile(samples, 0.95),
        "p99_ms": percentile(samples, 0.99),
        "mean_ms": sum(samples) / len(samples),
        "hit_at_10": hits / specific if specific else float("nan"),
        "specific_queries": specific,
        "top1_on_topic": on_topic / len(qs),
        "web_rss_mb": peaks["web"][0],
        "web_pss_mb": peaks["web"][1],
        "postgres_rss_mb": peaks["postgres"][0],
        "postgres_pss_mb": peaks["postgres"][1],
    }
    print(
        f"memory endpoint, GET /api/v1/memory?contribute=false over HTTP ({workers} workers, one client): "
        f"n={len(samples)} p50 {result['p50_ms']:.1f} ms  p95 {result['p95_ms']:.1f} ms  "
        f"p99 {result['p99_ms']:.1f} ms  (mean {result['mean_ms']:.1f})\n"
        f"  hit@10 {result['hit_at_10']:.1%} of the {specific} questions naming one thought; "
        f"best answer about the asked component/action/condition: {result['top1_on_topic']:.1%}\n"
        f"  peak memory while querying: web {result['web_rss_mb']:.0f} MB RSS ({result['web_pss_mb']:.0f} MB PSS), "
        f"PostgreSQL {result['postgres_rss_mb']:.0f} MB RSS summed over processes "
        f"({result['postgres_pss_mb']:.0f} MB PSS)",
        flush=True,
    )
    return result


def main(argv: list[str] | None = None) -> int:
    global DATABASE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thoughts", type=int, default=1_000_000)
    parser.add_argument("--real", type=int, default=2000, help="thoughts with their own real vector")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--build-memory", default="4GB", help="maintenance_work_mem for the index builds")
    parser.add_argument("--nice", type=int, default=5, help="niceness of the load and the index builds")
    parser.add_argument("--port", type=int, default=8260)
    parser.add_argument("--workers", type=int, default=2, help="web worker processes (runtime.serve)")
    parser.add_argument("--database", default=DATABASE, help=f"the database (default {DATABASE}), recreated")
    parser.add_argument("--reuse", action="store_true", help="keep the database and the rows it holds")
    parser.add_argument("--load-only", action="store_true", help="no queries")
    parser.add_argument("--verify-stats", action="store_true", help="recount the BM25 statistics after the load")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    args = parser.parse_args(argv)
    DATABASE = args.database
    sys.path.insert(0, str(BASE_DIR))
    started = time.perf_counter()
    setup(args.reuse)
    figures = {"date": dt.date.today().isoformat(), "argv": sys.argv[1:]}
    figures["load"] = load(thoughts=args.thoughts, real=args.real, build_memory=args.build_memory, niceness=args.nice)
    figures["load"]["total_s"] = time.perf_counter() - started
    print(f"setup + load + indexes: {figures['load']['total_s']:.0f} s", flush=True)
    figures["sizes"] = sizes()
    if args.verify_stats:
        t0 = time.perf_counter()
        problems = stats_verify()
        print(f"BM25 statistics vs a recount ({time.perf_counter() - t0:.0f} s): {problems[:5] or 'exact'}")
        figures["stats_exact"] = not problems
    if not args.load_only:
        figures["queries"] = measure(thoughts=args.thoughts, queries=args.queries, port=args.port, workers=args.workers)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
