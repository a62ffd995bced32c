"""Load and check the long-conversation benchmark (``data/conversations.jsonl``, ``data/questions.jsonl``).

    from benchmarks.longmem.dataset import load
    dev = load("dev")     # tune here
    test = load("test")   # report here, never tune

The objects are the retrieval benchmark's own types (``Conversation``, ``Turn``, ``Question``...,
imported from ``benchmarks.retrieval.dataset``), so code written for that benchmark reads this one.
Two differences: the question types (:data:`QUESTION_TYPES`), and ``noanswer`` questions, whose
evidence is empty: no turn of the conversation answers them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from benchmarks.retrieval.dataset import (
    Conversation,
    Dataset,
    DatasetError,
    Participant,
    Question,
    Session,
    Turn,
    read_jsonl,
)

__all__ = ["DATA_DIR", "QUESTION_TYPES", "SPLITS", "DatasetError", "LongmemDataset", "load"]

DATA_DIR = Path(__file__).resolve().parent / "data"
SPLITS = ("dev", "test")
QUESTION_TYPES = ("speaker", "temporal_when", "multihop", "inference", "single", "noanswer")
ROLES = ("pdsa", "dev", "qa", "liaison", None)


@dataclass
class LongmemDataset(Dataset):
    """The retrieval benchmark's dataset with this benchmark's question types."""

    question_types: ClassVar[tuple[str, ...]] = QUESTION_TYPES


def _conversations(path: Path) -> tuple[list[Conversation], dict[str, Turn]]:
    conversations, turns = [], {}
    for line, row in read_jsonl(path):
        where = f"{path.name} line {line}"
        cid, split = row["id"], row["split"]
        if split not in SPLITS:
            raise DatasetError(f"{where}: split must be one of {SPLITS}")
        participants = tuple(Participant(p["name"], p["kind"], p["role"]) for p in row["participants"])
        if any(p.role not in ROLES or p.kind not in ("human", "agent") for p in participants):
            raise DatasetError(f"{where}: a participant has an unknown kind or role")
        names = {p.name for p in participants}
        sessions, last = [], ""
        for number, s in enumerate(row["sessions"], start=1):
            if s["id"] != f"{cid}-s{number}" or not re.match(r"^\d{4}-\d{2}-\d{2}$", s["date"]) or s["date"] < last:
                raise DatasetError(f"{where}: session {s['id']} is misnumbered or out of date order")
            last = s["date"]
            session_turns = []
            for index, t in enumerate(s["turns"], start=1):
                if t["id"] != f"{s['id']}-t{index:02d}" or t["speaker"] not in names or not t["text"].strip():
                    raise DatasetError(f"{where}: turn {t['id']} is misnumbered, empty or by a non-participant")
                turn = Turn(t["id"], cid, s["id"], s["date"], t["speaker"], t["text"], bool(t["fact"]))
                turns[turn.id] = turn
                session_turns.append(turn)
            sessions.append(Session(s["id"], s["date"], tuple(session_turns)))
        conversations.append(Conversation(cid, split, row["title"], participants, tuple(sessions)))
    return conversations, turns


def _questions(path: Path, conversations: list[Conversation], turns: dict[str, Turn]) -> list[Question]:
    split_of = {c.id: c.split for c in conversations}
    questions, seen = [], set()
    for line, row in read_jsonl(path):
        where = f"{path.name} line {line}"
        qid, cid, qtype, evidence = row["id"], row["conversation"], row["type"], tuple(row["evidence"])
        if qid in seen or cid not in split_of or row["split"] != split_of[cid]:
            raise DatasetError(f"{where}: {qid} is repeated, or its conversation or split is wrong")
        seen.add(qid)
        if qtype not in QUESTION_TYPES:
            raise DatasetError(f"{where}: type must be one of {QUESTION_TYPES}, got {qtype!r}")
        if (qtype == "noanswer") != (not evidence):
            raise DatasetError(f"{where}: a noanswer question has no evidence; every other type has some")
        for ref in evidence:
            if ref not in turns or turns[ref].conversation != cid or not turns[ref].fact:
                raise DatasetError(f"{where}: evidence {ref!r} is not a fact turn of {cid}")
        questions.append(Question(qid, cid, row["split"], qtype, row["question"], evidence))
    return questions


def load(split: str | None = None, *, data_dir: Path | None = None) -> LongmemDataset:
    """Read and check both files; return everything, or only ``"dev"`` or ``"test"``."""
    if split is not None and split not in SPLITS:
        raise DatasetError(f"unknown split {split!r}; use one of {SPLITS} or None for both")
    directory = Path(data_dir) if data_dir is not None else DATA_DIR
    try:
        conversations, turns = _conversations(directory / "conversations.jsonl")
        questions = _questions(directory / "questions.jsonl", conversations, turns)
    except KeyError as exc:
        raise DatasetError(f"a required field is missing: {exc}") from None
    if split is not None:
        conversations = [c for c in conversations if c.split == split]
        questions = [q for q in questions if q.split == split]
        keep = {c.id for c in conversations}
        turns = {tid: t for tid, t in turns.items() if t.conversation in keep}
    return LongmemDataset(conversations=conversations, questions=questions, turns=turns)
