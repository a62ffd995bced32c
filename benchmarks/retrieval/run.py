"""``make bench-retrieval``: recall@1/5/10 and MRR of dense-only, lexical-only and Colony's ranking.

    python -m benchmarks.retrieval.run [--split dev|test|both] [--conversations c01,c02] [--json FILE]
                                       [--pooled] [--core]
    python -m benchmarks.retrieval.run --sweep      # the dev-only sweep of brain/ranking.py's constants

What it does, per conversation of the chosen split(s):

1. a fresh space (in the database ``colony_retrieval_bench``, dropped and re-created each run, so a
   run never sees an earlier one's rows) and one agent with its own token per participant;
2. every turn, in order, through the real ``POST /api/v1/memory`` (DRF view, serializer, token
   auth, service, PostgreSQL): ``store: true`` so short turns are kept, the session's date and the
   conversation's title as ``context``, the speaker as ``agent_name``; a turn that corrects earlier
   turns is sent as a ``correction`` that ``supersedes`` their thoughts, with its corrected and
   correct fact and the conversation id as topic;
3. every question through ``GET /api/v1/memory`` with ``contribute=false`` and ``limit=10`` (a pure
   search: it retrieves, reinforces and logs, like an agent's search, and stores nothing). Questions
   are asked in file order, so the reinforcement of earlier questions is part of what is measured.

The two baselines rank the same stored thoughts of the space with the same model's vectors:

- dense: exact cosine similarity of the question's all-MiniLM-L6-v2 vector with each thought's;
- lexical: Okapi BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N − df + 0.5)/(df + 0.5))) over the
  lexemes PostgreSQL's ``english`` configuration gives (the ones Colony indexes), OR semantics.

Metrics per question type and overall: recall@k = share of questions with at least one evidence turn
in the top k; MRR = mean of 1/rank of the first evidence turn within the top 10 (0 if none there);
"stale>evid" = share of temporal/correction questions where a stale (superseded) turn ranks above
every evidence turn (an evidence turn missing from the top 10 counts as ranked below).
Ties are broken by turn order, HNSW is the only approximate part; a run is otherwise deterministic.

Celery jobs the endpoint schedules (contradiction checks) go to an in-memory broker and are dropped:
they don't change ranking and would need a worker.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field

from benchmarks import setup as bench_setup
from benchmarks.retrieval.score import LIMIT, Score
from benchmarks.setup import agent_client
from benchmarks.stats import percentile

BENCH_DATABASE = "colony_retrieval_bench"
BM25_K1 = 1.2
BM25_B = 0.75
ASKER = "bench-asker"


# --- database -------------------------------------------------------------------------------------
def setup_database(*, fresh: bool) -> None:
    """Point Django at the benchmark database (re-created when ``fresh``), migrate it."""
    url = bench_setup.bench_url(BENCH_DATABASE, env="BENCH_RETRIEVAL_DATABASE_URL")
    bench_setup.ensure_database(url, fresh=fresh)
    bench_setup.use_database(url)
    from config.celery import app

    app.conf.task_always_eager = False
    app.conf.broker_url = "memory://"
    app.conf.result_backend = "cache+memory://"


# --- ingestion ------------------------------------------------------------------------------------
@dataclass
class Space:
    conversations: list
    space: object
    thought_of_turn: dict[str, str] = field(default_factory=dict)  # turn id -> thought id
    turn_of_thought: dict[str, str] = field(default_factory=dict)
    asker: object = None

    @property
    def conversation_ids(self) -> set[str]:
        return {conversation.id for conversation in self.conversations}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "x"


def _client(*, space, name: str, role: str):
    return agent_client(space=space, name=name, role=role)[2]


def _post(client, payload: dict) -> dict:
    response = client.post("/api/v1/memory", payload, format="json")
    if response.status_code != 200:
        raise SystemExit(f"POST /api/v1/memory answered {response.status_code}: {response.content[:500]!r}")
    return response.json()


def ingest(conversations: list, *, slug: str, name: str, progress) -> Space:
    """Contribute every turn of ``conversations`` (in order, one after the other) into one new space."""
    from core.models import Space as SpaceModel

    space = SpaceModel.objects.create(slug=f"bench-{_slug(slug)}", name=name[:200])
    result = Space(conversations=list(conversations), space=space)
    result.asker = _client(space=space, name=ASKER, role="dev")
    clients: dict[str, object] = {}
    total = sum(len(conversation.turns) for conversation in conversations)
    done = 0
    for conversation in conversations:
        for participant in conversation.participants:
            if participant.name not in clients:
                role = participant.role or "liaison"
                clients[participant.name] = _client(space=space, name=_slug(participant.name), role=role)
        for turn in conversation.turns:
            session = next(s for s in conversation.sessions if s.id == turn.session)
            payload = {
                "prompt": turn.text,
                "store": True,
                "agent_name": turn.speaker,
                "context": f"{conversation.title}; session of {session.date}",
                "session_id": f"{conversation.id}:{session.id}",
            }
            if turn.corrects:
                payload.update(
                    {
                        "thought_category": "correction",
                        "topic": conversation.id,
                        "supersedes": [result.thought_of_turn[t] for t in turn.corrects],
                        "corrected_fact": turn.corrected_fact or "; ".join(turns_text(conversation, turn.corrects)),
                        "correct_fact": turn.correct_fact or turn.text,
                    }
                )
                payload.pop("store")
            body = _post(clients[turn.speaker], payload)
            thought_id = body["trace"]["thought_id"]
            if not thought_id:
                raise SystemExit(f"turn {turn.id} was not stored: {body['trace']['operations']}")
            result.thought_of_turn[turn.id] = thought_id
            result.turn_of_thought[thought_id] = turn.id
            done += 1
            progress(done, total)
    return result


def ingest_split(conversations: list, *, split: str, pooled: bool) -> list[Space]:
    """One space per conversation (the standard protocol) or, ``pooled``, one space for the split."""
    if pooled:
        return [
            ingest(conversations, slug=f"pooled-{split}", name=f"{split} split, pooled", progress=_progress_bar(split))
        ]
    return [ingest([c], slug=c.id, name=c.title, progress=_progress_bar(c.id)) for c in conversations]


def turns_text(conversation, ids) -> list[str]:
    by_id = {t.id: t for t in conversation.turns}
    return [by_id[i].text for i in ids]


# --- the three methods ----------------------------------------------------------------------------
def _stored(space) -> tuple[list[str], object, list[dict[str, int]]]:
    """Thought ids (creation order), their unit vectors (numpy), their lexeme counts."""
    import numpy as np
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT t.id::text, t.embedding::text,
                   COALESCE((SELECT jsonb_object_agg(u.lexeme, COALESCE(array_length(u.positions, 1), 1))
                             FROM unnest(t.search_vector) AS u), '{}'::jsonb)
            FROM brain_thought t WHERE t.space_id = %s ORDER BY t.created_at, t.id
            """,
            [space.pk],
        )
        rows = cursor.fetchall()
    ids = [row[0] for row in rows]
    vectors = np.array([json.loads(row[1]) for row in rows], dtype=np.float64)
    counts = [row[2] if isinstance(row[2], dict) else json.loads(row[2]) for row in rows]
    return ids, vectors, counts


def query_lexemes(text: str) -> list[str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", [text])
        return list(cursor.fetchone()[0] or [])


class Baselines:
    def __init__(self, space):
        self.ids, self.vectors, self.counts = _stored(space)
        self.lengths = [sum(c.values()) for c in self.counts]
        self.avgdl = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0
        self.df: dict[str, int] = defaultdict(int)
        for counts in self.counts:
            for lexeme in counts:
                self.df[lexeme] += 1

    def dense(self, vector) -> list[str]:
        import numpy as np

        scores = self.vectors @ np.asarray(vector, dtype=np.float64)
        order = sorted(range(len(self.ids)), key=lambda i: (-scores[i], i))
        return [self.ids[i] for i in order[:LIMIT]]

    def lexical(self, text: str) -> list[str]:
        n = len(self.ids)
        scores = []
        for i, counts in enumerate(self.counts):
            score = 0.0
            for lexeme in set(query_lexemes_cached(text)):
                tf = counts.get(lexeme, 0)
                if not tf:
                    continue
                df = self.df[lexeme]
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                norm = 1 - BM25_B + BM25_B * self.lengths[i] / self.avgdl
                score += idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * norm)
            scores.append(score)
        order = sorted((i for i in range(n) if scores[i] > 0), key=lambda i: (-scores[i], i))
        return [self.ids[i] for i in order[:LIMIT]]


_lexeme_cache: dict[str, list[str]] = {}


def query_lexemes_cached(text: str) -> list[str]:
    if text not in _lexeme_cache:
        _lexeme_cache[text] = query_lexemes(text)
    return _lexeme_cache[text]


def colony(bench: Space, question: str) -> tuple[list[str], float]:
    started = time.perf_counter()
    response = bench.asker.get("/api/v1/memory", {"prompt": question, "contribute": "false", "limit": LIMIT})
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"GET /api/v1/memory answered {response.status_code}: {response.content[:500]!r}")
    body = response.json()
    if body["trace"]["thoughts_contributed"]:
        raise SystemExit("a contribute=false question stored a thought: the benchmark would be polluted")
    return [source["thought_id"] for source in body["result"]["sources"]], elapsed


METHODS = ("dense", "lexical", "colony")


def print_tables(split: str, scores: dict[str, dict[str, Score]], types: list[str]) -> None:
    print(f"\n== {split} ==")
    header = f"{'method':8}  {'type':11}  {'n':>4}  {'R@1':>5}  {'R@5':>5}  {'R@10':>5}  {'MRR':>5}  {'stale>evid':>10}"
    print(header)
    print("-" * len(header))
    for method in METHODS:
        for qtype in [*types, "overall"]:
            s = scores[method].get(qtype)
            if s is None or not s.ranks:
                continue
            print(
                f"{method:8}  {qtype:11}  {len(s.ranks):>4}  {s.recall(1):>5.1f}  {s.recall(5):>5.1f}  "
                f"{s.recall(10):>5.1f}  {s.mrr():>5.3f}  {s.stale_share():>10}"
            )
        print()


def question_vectors(texts: list[str]) -> list[list[float]]:
    """The dense baseline's query vectors: each question in a model run of its own, as the endpoint
    embeds a prompt. The int8 model quantizes each run's activations with one scale, so a text's
    vector depends on what shares its run (the dense row moved 91.0 -> 91.3 on both splits when
    batch runs went from 64 to 32 texts, with nothing else changed)."""
    from brain import embedding

    return embedding.embed_many(texts, batch_size=1)


def evaluate(benches: list[Space], questions, *, progress=None) -> tuple[dict, list[float]]:
    """Ask every question of every space with the three methods; returns scores and Colony's timings."""
    scores: dict[str, dict[str, Score]] = {m: defaultdict(Score) for m in METHODS}
    timings = []
    for bench in benches:
        qs = [q for q in questions if q.conversation in bench.conversation_ids]
        baselines = Baselines(bench.space)
        vectors = question_vectors([q.question for q in qs])
        for question, vector in zip(qs, vectors, strict=True):
            ranked = {
                "dense": baselines.dense(vector),
                "lexical": baselines.lexical(question.question),
            }
            ranked["colony"], elapsed = colony(bench, question.question)
            timings.append(elapsed)
            for method, ids in ranked.items():
                turns = [bench.turn_of_thought.get(i, "?") for i in ids]
                scores[method][question.type].add(turns, question)
                scores[method]["overall"].add(turns, question)
        if progress:
            progress(bench)
    return scores, timings


def _progress_bar(label: str):
    """A bar redrawn in place on a terminal; written to a log or a pipe, one line per tenth of the turns
    (a redrawn bar there is one line of thousands of frames)."""
    interactive = sys.stderr.isatty()

    def show(done: int, total: int) -> None:
        width, total = 30, max(1, total)
        filled = int(width * done / total)
        line = f"  {label:<6} ingesting [{'#' * filled}{'.' * (width - filled)}] {done}/{total} turns"
        if interactive:
            sys.stderr.write("\r" + line + ("\n" if done == total else ""))
        elif 10 * done // total > 10 * (done - 1) // total:  # a tenth reached (the last one: done == total)
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    return show


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=["dev", "test", "both"], default="both")
    parser.add_argument("--conversations", help="comma-separated conversation ids (default: all of the split)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument(
        "--pooled",
        action="store_true",
        help="all conversations of a split in ONE space (~200 thoughts, distractors from every conversation)",
    )
    parser.add_argument(
        "--core",
        action="store_true",
        help="leave out the haystack sessions: the conversations as first written (~35 turns a space)",
    )
    parser.add_argument("--sweep", action="store_true", help="dev only: sweep ranking constants (sweep.py)")
    args = parser.parse_args(argv)

    from benchmarks.retrieval.dataset import load

    dataset = load(haystack=not args.core)
    splits = ["dev"] if args.sweep else (["dev", "test"] if args.split == "both" else [args.split])
    wanted = set(args.conversations.split(",")) if args.conversations else None
    print(f"Retrieval benchmark: splits {', '.join(splits)}; setting up database {BENCH_DATABASE} ...", file=sys.stderr)
    setup_database(fresh=True)
    from brain import embedding

    embedding.embed("warm up")  # the model loads once, before anything is timed
    results: dict = {}
    for split in splits:
        conversations = [c for c in dataset.conversations if c.split == split and (wanted is None or c.id in wanted)]
        ids = {c.id for c in conversations}
        questions = [q for q in dataset.questions if q.split == split and q.conversation in ids]
        print(f"{split}: {len(conversations)} conversations, {len(questions)} questions", file=sys.stderr)
        benches = ingest_split(conversations, split=split, pooled=args.pooled)
        if args.sweep:
            from benchmarks.retrieval import sweep

            sweep.run(benches, questions)
            return 0
        scores, timings = evaluate(benches, questions)
        types = [t for t in ("single", "paraphrase", "multihop", "temporal", "correction") if scores["colony"].get(t)]
        label = split + (", pooled" if args.pooled else "") + (", core (no haystack)" if args.core else "")
        print_tables(label, scores, types)
        p50 = percentile(timings, 0.5)
        print(
            f"Colony GET /api/v1/memory (contribute=false, in-process, real model): p50 {p50:.1f} ms "
            f"over {len(timings)} questions"
        )
        results[split] = {m: {t: s.as_dict() for t, s in scores[m].items()} for m in METHODS}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
