"""``python -m benchmarks.retrieval.run --dataset longmem``: the long-conversation benchmark through the
retrieval harness prints every question type for the three methods, the injection shares, and writes
one calibration row per question (here on a few sessions of m01, with fake vectors, in the test
database)."""

import dataclasses
import json

import pytest

from benchmarks.longmem.dataset import QUESTION_TYPES, load
from benchmarks.retrieval import run


def _small(*conversation_ids: str):
    """Each conversation cut to the sessions that hold the evidence of one question of each type, plus one
    no-answer prompt."""
    ds = load("dev")
    conversations, questions = [], []
    for conversation_id in conversation_ids:
        conversation = ds.conversation(conversation_id)
        chosen = []
        for qtype in QUESTION_TYPES:
            candidates = [q for q in ds.questions_for(conversation_id) if q.type == qtype]
            chosen.append(min(candidates, key=lambda q: max((ds.turns[e].session for e in q.evidence), default="")))
        needed = {ds.turns[e].session for q in chosen for e in q.evidence}
        sessions = tuple(s for s in conversation.sessions if s.id in needed or s.id == conversation.sessions[0].id)
        conversations.append(dataclasses.replace(conversation, sessions=sessions))
        questions += chosen
    return dataclasses.replace(ds, conversations=conversations, questions=questions)


def _small_m01():
    return _small("m01")


@pytest.mark.django_db
def test_longmem_prints_every_type_for_every_method_and_writes_rows(monkeypatch, fake_embedder, tmp_path, capsys):
    small = _small_m01()
    monkeypatch.setattr(run, "setup_database", lambda *, fresh: None)  # the test database, not the bench one
    monkeypatch.setattr(run, "load_dataset", lambda name, *, core=False: small)
    rows_file = tmp_path / "rows.jsonl"

    assert run.main(["--dataset", "longmem", "--split", "dev", "--rows", str(rows_file)]) == 0

    out = capsys.readouterr().out
    assert "== longmem dev ==" in out
    for method in run.METHODS:
        for qtype in [*(t for t in QUESTION_TYPES if t != run.NOANSWER), "overall"]:
            assert any(
                line.split()[:3] == [method, qtype, "1" if qtype != "overall" else "5"] for line in out.splitlines()
            )
    assert "noanswer" not in out.split("Injection")[0]  # no-answer prompts are not in recall
    assert "silence on 0.0% of 1 no-answer prompts" in out  # today Colony always returns its top k

    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert [r["type"] for r in rows] == list(QUESTION_TYPES)
    assert {r["dataset"] for r in rows} == {"longmem"} and {r["split"] for r in rows} == {"dev"}
    source = rows[0]["sources"][0]
    assert {
        "rank",
        "thought_id",
        "turn_id",
        "score",
        "cosine",
        "dense_rank",
        "bm25",
        "lexical_rank",
        "evidence",
    } <= set(source)
    assert source["rank"] == 1 and source["turn_id"].startswith("m01-")
    assert not any(s["evidence"] for s in rows[-1]["sources"])  # the no-answer prompt has no evidence


@pytest.mark.django_db
def test_each_space_is_also_asked_another_teams_questions_as_no_answer_prompts(monkeypatch, fake_embedder, capsys):
    """With two spaces, each is asked the other conversation's answerable questions: none of them is answered
    there, so they count as no-answer prompts (silence), and the JSON figures carry them."""
    small = _small("m01", "m03")
    monkeypatch.setattr(run, "setup_database", lambda *, fresh: None)
    monkeypatch.setattr(run, "load_dataset", lambda name, *, core=False: small)
    asked = []
    colony = run.colony

    def asking(bench, question):
        asked.append((bench, question))
        return colony(bench, question)

    monkeypatch.setattr(run, "colony", asking)

    assert run.main(["--dataset", "longmem", "--split", "dev"]) == 0

    answerable = len(QUESTION_TYPES) - 1
    out = capsys.readouterr().out
    assert f"Injection mode, {2 * answerable} questions of another team's conversation asked in each space" in out
    assert "(0.0% unfiltered)" in out  # the top k is returned whatever its relevance
    spaces = {bench.space.pk: bench for bench, _ in asked}
    own = {q.question: q.conversation for q in small.questions}
    foreign = asked[len(small.questions) :]  # after every space's own questions
    assert len(foreign) == 2 * answerable and len(spaces) == 2
    assert all(own[q] not in b.conversation_ids for b, q in foreign)


def test_a_thought_that_holds_identical_turns_counts_as_evidence_for_any_of_them():
    """One row per fact stores identical turns once: the thought stands for whichever of its turns the
    question needs, not only for the first or the last one posted."""
    from types import SimpleNamespace

    from benchmarks.retrieval.run import Space

    bench = Space(conversations=[], space=None)
    bench.turns_of_thought = {"t1": ["m01-s1-t03", "m01-s4-t07"], "t2": ["m01-s2-t01"]}
    question = SimpleNamespace(evidence=("m01-s4-t07",))
    assert bench.turns_for(["t2", "t1", "t9"], question) == ["m01-s2-t01", "m01-s4-t07", "?"]
    other = SimpleNamespace(evidence=("m01-s2-t05",))
    assert bench.turns_for(["t1"], other) == ["m01-s1-t03"]


def test_calibrate_counts_injection_as_the_harness_does():
    """calibrate.py's trade-off table counts a rows file with run.Injection: silence on no-answer prompts,
    evidence among the top INJECT_K sources at or above the threshold, mean sources per prompt."""
    from benchmarks.retrieval import calibrate

    def source(turn, p):
        return {"turn_id": turn, "p": p}

    rows = [
        {"type": "noanswer", "evidence": [], "sources": [source("a", 0.2), source("b", 0.1)]},
        {"type": "noanswer", "evidence": [], "sources": [source("a", 0.6)]},
        {"type": "single", "evidence": ["e"], "sources": [source("x", 0.7), source("e", 0.4)]},
        # the evidence is sixth: beyond what the hook injects, whatever its relevance
        {"type": "single", "evidence": ["e"], "sources": [*(source(t, 0.9) for t in "uvwxy"), source("e", 0.9)]},
    ]
    assert calibrate.INJECT_K == run.INJECT_K == 5
    silence, evidence, mean = calibrate.injection(rows, 0.3)
    assert (silence, evidence, mean) == (50.0, 50.0, (0 + 1 + 2 + 5) / 4)
    assert calibrate.injection(rows, 0.5) == (50.0, 0.0, (0 + 1 + 1 + 5) / 4)


def test_calibrate_predicts_with_the_brains_formula():
    from benchmarks.retrieval import calibrate
    from brain import ranking

    row = {"sources": [{"score": 0.9, "cosine": 0.8, "rank": 1}, {"score": 0.5, "cosine": None, "rank": 2}]}
    calibrate.predict([row], ranking.RELEVANCE_INTERCEPT, list(ranking.RELEVANCE_WEIGHTS))
    features = ranking.relevance_features(score=0.5, similarity=0.0, top_score=0.9, position=2)
    assert row["sources"][1]["p"] == ranking.calibrated_relevance(features)
    calibrate.predict([row], 1000.0, [0.0, 0.0, 0.0, 0.0])  # an extreme fit is clamped, not an overflow
    assert row["sources"][0]["p"] == pytest.approx(1.0)
    assert (ranking.RELEVANCE_INTERCEPT, ranking.RELEVANCE_WEIGHTS) != (1000.0, (0.0, 0.0, 0.0, 0.0))
