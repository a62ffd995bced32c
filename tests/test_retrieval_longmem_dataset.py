"""The long-conversation benchmark's data (benchmarks/longmem/data) is complete, consistent, split by
conversation, and exactly what its generator writes."""

import json

import pytest

from benchmarks.longmem import author
from benchmarks.longmem.dataset import DATA_DIR, QUESTION_TYPES, DatasetError, load
from benchmarks.retrieval.dataset import Dataset

# Fixed split: tuning happens on dev only; changing it invalidates every figure measured so far.
DEV = {"m01", "m03", "m05"}
TEST = {"m02", "m04", "m06"}
MIN_TURNS_PER_CONVERSATION = 400
MIN_SESSIONS_PER_CONVERSATION = 15
MIN_NOANSWER = 150
MIN_NOANSWER_PER_SPLIT = 75
ROLES = {"pdsa", "dev", "qa", "liaison"}


@pytest.fixture(scope="module")
def ds():
    return load()


def test_files_match_the_generator():
    conversations, questions = author.build()
    assert (DATA_DIR / "conversations.jsonl").read_text(encoding="utf-8") == conversations
    assert (DATA_DIR / "questions.jsonl").read_text(encoding="utf-8") == questions


def test_the_generator_is_deterministic():
    assert author.build() == author.build()


def test_split_is_fixed_by_conversation(ds):
    assert {c.id for c in ds.conversations if c.split == "dev"} == DEV
    assert {c.id for c in ds.conversations if c.split == "test"} == TEST
    split_of = {c.id: c.split for c in ds.conversations}
    assert all(q.split == split_of[q.conversation] for q in ds.questions)
    assert {q.conversation for q in load("dev").questions} == DEV
    assert {q.conversation for q in load("test").questions} == TEST


def test_loader_returns_the_retrieval_benchmarks_types(ds):
    assert isinstance(ds, Dataset)
    conversation = ds.conversations[0]
    assert ds.questions_for(conversation.id)
    assert conversation.turns[0].date == conversation.sessions[0].date


def test_conversations_are_long_dated_and_between_people_and_agents(ds):
    for conversation in ds.conversations:
        assert len(conversation.turns) >= MIN_TURNS_PER_CONVERSATION, conversation.id
        assert len(conversation.sessions) >= MIN_SESSIONS_PER_CONVERSATION, conversation.id
        dates = [s.date for s in conversation.sessions]
        assert dates == sorted(dates) and len(set(dates)) == len(dates), conversation.id
        kinds = {p.kind for p in conversation.participants}
        assert kinds == {"human", "agent"}, conversation.id
        assert {p.role for p in conversation.participants if p.kind == "agent"} == ROLES, conversation.id


def test_turns_are_short_and_mostly_chatter(ds):
    turns = list(ds.turns.values())
    words = sorted(len(t.text.split()) for t in turns)
    assert words[len(words) // 2] <= 12  # median turn is short
    assert max(words) <= 30
    assert sum(1 for t in turns if not t.fact) / len(turns) > 0.6


def test_every_type_is_in_each_split_and_noanswer_is_large_enough(ds):
    counts = ds.counts()
    for split in ("dev", "test"):
        for qtype in QUESTION_TYPES:
            assert counts[split][qtype] >= 20, (split, qtype)
        assert counts[split]["noanswer"] >= MIN_NOANSWER_PER_SPLIT
    assert counts["dev"]["noanswer"] + counts["test"]["noanswer"] >= MIN_NOANSWER


def test_evidence_exists_in_the_questions_conversation_and_noanswer_has_none(ds):
    for q in ds.questions:
        if q.type == "noanswer":
            assert q.evidence == (), q.id
            continue
        assert q.evidence, q.id
        for ref in q.evidence:
            assert ref in ds.turns, (q.id, ref)
            assert ds.turns[ref].conversation == q.conversation, (q.id, ref)
            assert ds.turns[ref].fact, (q.id, ref)


def test_multihop_and_inference_span_turns(ds):
    for q in ds.questions:
        if q.type == "multihop":
            assert len({ds.turns[ref].session for ref in q.evidence}) >= 2, q.id
        if q.type in ("multihop", "inference", "speaker"):
            assert len(q.evidence) >= 2, q.id


def test_questions_are_unique_within_a_conversation(ds):
    seen = set()
    for q in ds.questions:
        key = (q.conversation, q.question.lower())
        assert key not in seen, q.id
        seen.add(key)


def test_loader_rejects_evidence_on_a_noanswer_question(tmp_path):
    (tmp_path / "conversations.jsonl").write_text((DATA_DIR / "conversations.jsonl").read_text())
    rows = [json.loads(line) for line in (DATA_DIR / "questions.jsonl").read_text().splitlines()]
    noanswer = next(r for r in rows if r["type"] == "noanswer")
    fact = next(t for t in load().turns.values() if t.fact and t.conversation == noanswer["conversation"])
    noanswer["evidence"] = [fact.id]
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetError):
        load(data_dir=tmp_path)
