"""``make bench-retrieval``: recall@1/5/10 and MRR of dense-only, lexical-only and Colony's ranking.

    python -m benchmarks.retrieval.run [--dataset retrieval|longmem|both] [--split dev|test|both]
                                       [--conversations c01,m02] [--json FILE] [--rows FILE]
                                       [--pooled] [--core]
    python -m benchmarks.retrieval.run --sweep      # the dev-only sweep of brain/ranking.py's constants

Two datasets, one after the other: ``retrieval`` (benchmarks/retrieval/data) and ``longmem``
(benchmarks/longmem/data, long chatty conversations with ``noanswer`` prompts). What it does, per
conversation of the chosen split(s):

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

No-answer prompts are asked like every question but left out of recall and MRR. For them and the
answerable ones, the injection lines give what Colony's top 5 would inject, unfiltered and in the
injection mode the prompt hook uses (sources with ``relevance`` ≥ ``INJECT_MIN_RELEVANCE``): the share
of no-answer prompts with nothing injected ("silence") and the share of answerable questions with an
evidence turn injected. With two spaces or more, each is then asked the next space's answerable
questions as another team's no-answer prompts (:func:`ask_other_teams`). ``--rows FILE`` writes one JSON
line per question (ids, type, split, evidence, and per Colony source its rank, score, dense cosine and
rank, BM25 and lexical rank, its calibrated relevance, and whether it is evidence): what ``python -m
benchmarks.retrieval.calibrate ROWS`` fits the relevance constants of brain/ranking.py on (dev rows).

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
from dataclasses import dataclass, field, replace

from benchmarks import setup as bench_setup
from benchmarks.retrieval.score import LIMIT, Score
from benchmarks.setup import agent_client
from benchmarks.stats import percentile
from contrib.colony_hooks import SOURCES_DEFAULT

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
    #: Every turn a thought holds: a turn whose text a live thought already holds is stored once (one row
    #: per fact), so identical turns share a thought, and it is evidence if any of them is.
    turns_of_thought: dict[str, list[str]] = field(default_factory=dict)
    asker: object = None

    def turns_for(self, thought_ids: list[str], question) -> list[str]:
        """The turn each thought stands for in ``question``'s scoring: an evidence turn it holds, else its
        first turn ("?" for a thought of no turn)."""
        evidence = set(question.evidence)
        found = []
        for thought_id in thought_ids:
            turns = self.turns_of_thought.get(thought_id, ["?"])
            found.append(next((turn for turn in turns if turn in evidence), turns[0]))
        return found

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
            result.turns_of_thought.setdefault(thought_id, []).append(turn.id)
            done += 1
            progress(done, total)
    return result


def ingest_split(conversations: list, *, split: str, pooled: bool, prefix: str = "") -> list[Space]:
    """One space per conversation (the standard protocol) or, ``pooled``, one space for the split."""
    if pooled:
        return [
            ingest(
                conversations,
                slug=f"{prefix}pooled-{split}",
                name=f"{prefix}{split} split, pooled",
                progress=_progress_bar(split),
            )
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

    def dense_scores(self, vector):
        """Cosine of the question's unit vector with every stored thought's (numpy, creation order)."""
        import numpy as np

        return self.vectors @ np.asarray(vector, dtype=np.float64)

    def lexical_scores(self, text: str) -> list[float]:
        """BM25 of the question against every stored thought (0 where no lexeme is shared)."""
        n = len(self.ids)
        lexemes = set(query_lexemes_cached(text))
        scores = []
        for i, counts in enumerate(self.counts):
            score = 0.0
            for lexeme in lexemes:
                tf = counts.get(lexeme, 0)
                if not tf:
                    continue
                df = self.df[lexeme]
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                norm = 1 - BM25_B + BM25_B * self.lengths[i] / self.avgdl
                score += idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * norm)
            scores.append(score)
        return scores

    def dense_order(self, scores) -> list[int]:
        """Indexes by cosine, best first; ties by creation order."""
        return sorted(range(len(self.ids)), key=lambda i: (-scores[i], i))

    def lexical_order(self, scores) -> list[int]:
        """Indexes by BM25, best first; ties by creation order; zero scores left out (BM25's OR)."""
        return sorted((i for i in range(len(self.ids)) if scores[i] > 0), key=lambda i: (-scores[i], i))


_lexeme_cache: dict[str, list[str]] = {}


def query_lexemes_cached(text: str) -> list[str]:
    if text not in _lexeme_cache:
        _lexeme_cache[text] = query_lexemes(text)
    return _lexeme_cache[text]


def colony(bench: Space, question: str) -> tuple[list[dict], float]:
    started = time.perf_counter()
    response = bench.asker.get("/api/v1/memory", {"prompt": question, "contribute": "false", "limit": LIMIT})
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"GET /api/v1/memory answered {response.status_code}: {response.content[:500]!r}")
    body = response.json()
    if body["trace"]["thoughts_contributed"]:
        raise SystemExit("a contribute=false question stored a thought: the benchmark would be polluted")
    return body["result"]["sources"], elapsed


METHODS = ("dense", "lexical", "colony")
DATASETS = ("retrieval", "longmem")
#: The question type with no evidence to find: asked, but not scored for recall.
NOANSWER = "noanswer"
#: How many sources Colony's UserPromptSubmit hook injects at most, by default.
INJECT_K = SOURCES_DEFAULT


def print_tables(split: str, scores: dict[str, dict[str, Score]], types: list[str]) -> None:
    print(f"\n== {split} ==")
    width = max([11, *(len(t) for t in types)])
    header = (
        f"{'method':8}  {'type':{width}}  {'n':>4}  {'R@1':>5}  {'R@5':>5}  {'R@10':>5}  {'MRR':>5}  {'stale>evid':>10}"
    )
    print(header)
    print("-" * len(header))
    for method in METHODS:
        for qtype in [*types, "overall"]:
            s = scores[method].get(qtype)
            if s is None or not s.ranks:
                continue
            print(
                f"{method:8}  {qtype:{width}}  {len(s.ranks):>4}  {s.recall(1):>5.1f}  {s.recall(5):>5.1f}  "
                f"{s.recall(10):>5.1f}  {s.mrr():>5.3f}  {s.stale_share():>10}"
            )
        print()


def question_vectors(texts: list[str]) -> list[list[float]]:
    """The dense baseline's query vectors: each question in a model run of its own, as the endpoint
    embeds a prompt. The int8 model quantizes each run's activations with one scale, so a text's
    vector depends on what shares its run (batch runs of 32 texts instead of 64 move the dense row
    from 91.0 to 91.3 on both splits, with nothing else different)."""
    from brain import embedding

    return embedding.embed_many(texts, batch_size=1)


def _percent(part: int, whole: int) -> float:
    return 100.0 * part / max(1, whole)


@dataclass
class Injection:
    """What Colony's prompt hook would inject: its top :data:`INJECT_K`, with and without the
    injection mode's filter (``inject: true``: sources with ``relevance`` ≥ ``threshold``, by default
    ``brain.ranking.INJECT_MIN_RELEVANCE``). Silence: a no-answer prompt with nothing injected;
    evidence: an answerable question with an evidence turn among what is injected."""

    threshold: float | None = None
    noanswer: int = 0
    silent: int = 0
    answerable: int = 0
    with_evidence: int = 0
    inject_silent: int = 0
    inject_with_evidence: int = 0
    injected: int = 0  # sources injected in the injection mode, over all prompts

    def __post_init__(self) -> None:
        if self.threshold is None:
            from brain.ranking import INJECT_MIN_RELEVANCE

            self.threshold = INJECT_MIN_RELEVANCE

    def add(self, question, turns: list[str | None], relevances: list[float]) -> None:
        """One prompt: ``turns`` are what Colony's sources stand for (best first), ``relevances`` theirs."""
        top = turns[:INJECT_K]
        kept = [turn for turn, p in zip(top, relevances, strict=False) if p >= self.threshold]
        self.injected += len(kept)
        if question.type == NOANSWER:
            self.noanswer += 1
            self.silent += not top
            self.inject_silent += not kept
        else:
            self.answerable += 1
            self.with_evidence += any(turn in question.evidence for turn in top)
            self.inject_with_evidence += any(turn in question.evidence for turn in kept)

    def mode_shares(self) -> tuple[float, float, float]:
        """The injection mode's (silence %, evidence injected %, mean sources per prompt), unrounded."""
        return (
            _percent(self.inject_silent, self.noanswer),
            _percent(self.inject_with_evidence, self.answerable),
            self.injected / max(1, self.noanswer + self.answerable),
        )

    def as_dict(self) -> dict:
        inject_silence, inject_evidence, inject_mean = self.mode_shares()
        return {
            "noanswer": self.noanswer,
            "silence": round(_percent(self.silent, self.noanswer), 1),
            "answerable": self.answerable,
            f"evidence_in_top{INJECT_K}": round(_percent(self.with_evidence, self.answerable), 1),
            "inject_silence": round(inject_silence, 1),
            "inject_evidence": round(inject_evidence, 1),
            "inject_mean_sources": round(inject_mean, 2),
        }


@dataclass
class Ranked:
    """One question's baseline scores and orders (indexes into ``Baselines.ids``)."""

    dense: object  # numpy cosines
    lexical: list[float]
    dense_order: list[int]
    lexical_order: list[int]


def _ranks(order: list[int]) -> dict[int, int]:
    return {index: rank for rank, index in enumerate(order, start=1)}


def question_row(
    bench: Space, baselines: Baselines, position: dict[str, int], question, sources: list[dict], ranked: Ranked
) -> dict:
    """One calibration row: the question and, per source Colony returned, what the harness sees of it
    (``position``: each thought id's index in ``baselines.ids``)."""
    dense, lexical = ranked.dense, ranked.lexical
    dense_rank, lexical_rank = _ranks(ranked.dense_order), _ranks(ranked.lexical_order)
    rows = []
    for rank, source in enumerate(sources, start=1):
        i = position.get(source["thought_id"])
        turn = bench.turns_for([source["thought_id"]], question)[0]
        turn = None if turn == "?" else turn
        rows.append(
            {
                "rank": rank,
                "thought_id": source["thought_id"],
                "turn_id": turn,
                "score": source["score"],
                "relevance": source.get("relevance"),
                "cosine": None if i is None else round(float(dense[i]), 4),
                "dense_rank": dense_rank.get(i),
                "bm25": None if i is None else round(lexical[i], 4),
                "lexical_rank": lexical_rank.get(i),
                "matching_reason": source.get("matching_reason"),
                "effective_confidence": source.get("effective_confidence"),
                "superseded": source.get("superseded"),
                "evidence": turn in question.evidence,
            }
        )
    return {
        "question_id": question.id,
        "conversation": question.conversation,
        "split": question.split,
        "type": question.type,
        "question": question.question,
        "evidence": list(question.evidence),
        "space_thoughts": len(baselines.ids),
        "top_cosine": round(float(max(dense)), 4) if len(dense) else None,
        "top_bm25": round(max(lexical), 4) if lexical else None,
        "sources": rows,
    }


def evaluate(benches: list[Space], questions, *, rows=None) -> tuple[dict, list[float], Injection]:
    """Ask every question of every space with the three methods; returns scores, Colony's timings and
    the injection shares. No-answer prompts are not in the scores (they have no evidence to find).
    ``rows``, a list, receives one :func:`question_row` per question."""
    scores: dict[str, dict[str, Score]] = {m: defaultdict(Score) for m in METHODS}
    timings = []
    injection = Injection()
    for bench in benches:
        qs = [q for q in questions if q.conversation in bench.conversation_ids]
        baselines = Baselines(bench.space)
        position = {thought_id: i for i, thought_id in enumerate(baselines.ids)}
        vectors = question_vectors([q.question for q in qs])
        for question, vector in zip(qs, vectors, strict=True):
            dense = baselines.dense_scores(vector)
            lexical = baselines.lexical_scores(question.question)
            scored = Ranked(dense, lexical, baselines.dense_order(dense), baselines.lexical_order(lexical))
            sources, elapsed = colony(bench, question.question)
            timings.append(elapsed)
            ranked = {
                "dense": [baselines.ids[i] for i in scored.dense_order[:LIMIT]],
                "lexical": [baselines.ids[i] for i in scored.lexical_order[:LIMIT]],
                "colony": [source["thought_id"] for source in sources],
            }
            turns = {method: bench.turns_for(ids, question) for method, ids in ranked.items()}
            injection.add(question, turns["colony"], [source["relevance"] for source in sources])
            if rows is not None:
                rows.append(question_row(bench, baselines, position, question, sources, scored))
            if question.type == NOANSWER:
                continue
            for method, method_turns in turns.items():
                scores[method][question.type].add(method_turns, question)
                scores[method]["overall"].add(method_turns, question)
    return scores, timings, injection


def ask_other_teams(benches: list[Space], questions) -> Injection:
    """The answerable questions of the next space's conversation (in split order, the last space's go to the
    first), asked in each space, as no-answer prompts: questions about another team's work, where the team's own
    no-answer prompts use its own words. Run after :func:`evaluate` (their reinforcement can't touch its
    figures); needs two spaces or more (not ``--pooled``)."""
    other_teams = Injection()
    for index, bench in enumerate(benches):
        theirs = benches[(index + 1) % len(benches)].conversation_ids
        for question in questions:
            if question.conversation in theirs and question.type != NOANSWER:
                sources, _ = colony(bench, question.question)
                unanswerable = replace(question, type=NOANSWER, evidence=())
                other_teams.add(
                    unanswerable,
                    bench.turns_for([s["thought_id"] for s in sources], unanswerable),
                    [s["relevance"] for s in sources],
                )
    return other_teams


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
    parser.add_argument(
        "--dataset",
        choices=[*DATASETS, "both"],
        default="both",
        help="retrieval (benchmarks/retrieval), longmem (benchmarks/longmem) or both, one after the other",
    )
    parser.add_argument("--split", choices=["dev", "test", "both"], default="both")
    parser.add_argument("--conversations", help="comma-separated conversation ids (default: all of the split)")
    parser.add_argument("--json", help="also write the figures to this JSON file ({dataset: {split: ...}})")
    parser.add_argument("--rows", help="also write one JSON line per question: Colony's sources and their features")
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

    if args.core and args.dataset == "longmem":
        parser.error("--core applies to the retrieval dataset only (longmem has no haystack sessions)")
    names = list(DATASETS) if args.dataset == "both" else [args.dataset]
    if args.sweep:
        names = names[:1]  # the sweep tunes on one dataset's dev split: retrieval unless longmem is named
    splits = ["dev"] if args.sweep else (["dev", "test"] if args.split == "both" else [args.split])
    wanted = set(args.conversations.split(",")) if args.conversations else None
    print(f"Retrieval benchmark: {', '.join(names)}; splits {', '.join(splits)}", file=sys.stderr)
    setup_database(fresh=True)
    from brain import embedding

    embedding.embed("warm up")  # the model loads once, before anything is timed
    results: dict = {}
    rows: list[dict] | None = [] if args.rows else None
    for name in names:
        dataset = load_dataset(name, core=args.core)
        for split in splits:
            conversations = [
                c for c in dataset.conversations if c.split == split and (wanted is None or c.id in wanted)
            ]
            if not conversations:
                continue
            ids = {c.id for c in conversations}
            questions = [q for q in dataset.questions if q.split == split and q.conversation in ids]
            print(f"{name} {split}: {len(conversations)} conversations, {len(questions)} questions", file=sys.stderr)
            started = time.perf_counter()
            benches = ingest_split(conversations, split=split, pooled=args.pooled, prefix=f"{name}-")
            if args.sweep:
                from benchmarks.retrieval import sweep

                sweep.run(benches, questions)
                return 0
            split_rows: list[dict] | None = [] if rows is not None else None
            scores, timings, injection = evaluate(benches, questions, rows=split_rows)
            if rows is not None:
                rows.extend({"dataset": name, **row} for row in split_rows)
            types = [t for t in dataset.question_types if t != NOANSWER and scores["colony"].get(t)]
            label = (
                ("" if name == "retrieval" else f"{name} ")
                + split
                + (", pooled" if args.pooled else "")
                + (", core (no haystack)" if args.core else "")
            )
            print_tables(label, scores, types)
            print_injection(injection)
            other_teams = ask_other_teams(benches, questions) if len(benches) > 1 else None
            if other_teams is not None:
                shares = other_teams.as_dict()
                print(
                    f"Injection mode, {other_teams.noanswer} questions of another team's conversation asked in each "
                    f"space: silence on {shares['inject_silence']:.1f}% ({shares['silence']:.1f}% unfiltered)"
                )
            p50 = percentile(timings, 0.5)
            print(
                f"Colony GET /api/v1/memory (contribute=false, in-process, real model): p50 {p50:.1f} ms "
                f"over {len(timings)} questions; {split} ingested and asked in {time.perf_counter() - started:.0f} s"
            )
            figures = {m: {t: s.as_dict() for t, s in scores[m].items()} for m in METHODS}
            results.setdefault(name, {})[split] = {
                **figures,
                "injection": injection.as_dict(),
                **({"injection_other_teams": other_teams.as_dict()} if other_teams is not None else {}),
            }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)
    if args.rows:
        with open(args.rows, "w", encoding="utf-8") as out:
            out.writelines(json.dumps(row) + "\n" for row in rows)
        print(f"{len(rows)} question rows written to {args.rows}", file=sys.stderr)
    return 0


def load_dataset(name: str, *, core: bool = False):
    if name == "longmem":
        from benchmarks.longmem.dataset import load as load_longmem

        return load_longmem()
    from benchmarks.retrieval.dataset import load

    return load(haystack=not core)


def print_injection(injection: Injection) -> None:
    """What an injection of Colony's top INJECT_K would give: silence on no-answer prompts, evidence otherwise."""
    figures = injection.as_dict()
    parts = []
    if injection.noanswer:
        parts.append(f"silence on {figures['silence']:.1f}% of {injection.noanswer} no-answer prompts")
    parts.append(
        f"an evidence turn in the top {INJECT_K} for {figures[f'evidence_in_top{INJECT_K}']:.1f}% "
        f"of {injection.answerable} answerable questions"
    )
    print(f"Injection, Colony's top {INJECT_K} unfiltered: " + "; ".join(parts))
    from brain.ranking import INJECT_MIN_RELEVANCE

    mode = []
    if injection.noanswer:
        mode.append(f"silence on {figures['inject_silence']:.1f}% of no-answer prompts")
    mode.append(f"evidence injected for {figures['inject_evidence']:.1f}% of answerable questions")
    mode.append(f"{figures['inject_mean_sources']:.2f} sources per prompt")
    print(f"Injection mode (the hook's, relevance >= {INJECT_MIN_RELEVANCE}): " + "; ".join(mode))


if __name__ == "__main__":
    sys.exit(main())
