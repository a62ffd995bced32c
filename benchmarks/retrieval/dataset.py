"""Load and validate the retrieval benchmark's data (``data/conversations.jsonl``, ``data/questions.jsonl``).

    from benchmarks.retrieval.dataset import load
    ds = load()             # every conversation and question
    dev = load("dev")       # only the dev split (tune here)
    test = load("test")     # only the test split (report here, never tune)

``load`` checks the whole file before filtering by split and raises :class:`DatasetError`
naming the line and the field when something is wrong, so a broken edit is caught at once.
The format is described in ``benchmarks/retrieval/README.md``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

DATA_DIR = Path(__file__).resolve().parent / "data"
CONVERSATIONS_FILE = DATA_DIR / "conversations.jsonl"
QUESTIONS_FILE = DATA_DIR / "questions.jsonl"

SPLITS = ("dev", "test")
QUESTION_TYPES = ("single", "paraphrase", "multihop", "temporal", "correction")
PARTICIPANT_KINDS = ("human", "agent")
ROLES = ("pdsa", "dev", "qa", "liaison", None)

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class DatasetError(ValueError):
    """The benchmark data is malformed; the message names the file, line and what to fix."""


@dataclass(frozen=True)
class Participant:
    name: str
    kind: str
    role: str | None


@dataclass(frozen=True)
class Turn:
    id: str
    conversation: str
    session: str
    date: str
    speaker: str
    text: str
    fact: bool
    corrects: tuple[str, ...] = ()
    corrected_fact: str | None = None
    correct_fact: str | None = None
    haystack: bool = False  # in a haystack session: a distractor, never evidence


@dataclass(frozen=True)
class Session:
    id: str
    date: str
    turns: tuple[Turn, ...]
    haystack: bool = False  # the team's other work in the same weeks; answers no question


@dataclass(frozen=True)
class Conversation:
    id: str
    split: str
    title: str
    participants: tuple[Participant, ...]
    sessions: tuple[Session, ...]

    @property
    def turns(self) -> list[Turn]:
        """Every turn in order (sessions in date order, turns in the order they were said)."""
        return [turn for session in self.sessions for turn in session.turns]


@dataclass(frozen=True)
class Question:
    id: str
    conversation: str
    split: str
    type: str
    question: str
    evidence: tuple[str, ...]
    stale: tuple[str, ...] = ()


@dataclass
class Dataset:
    conversations: list[Conversation]
    questions: list[Question]
    turns: dict[str, Turn] = field(default_factory=dict)
    #: The question types :meth:`counts` counts (the long-conversation benchmark has its own).
    question_types: ClassVar[tuple[str, ...]] = QUESTION_TYPES

    def conversation(self, conversation_id: str) -> Conversation:
        for conversation in self.conversations:
            if conversation.id == conversation_id:
                return conversation
        raise KeyError(conversation_id)

    def questions_for(self, conversation_id: str) -> list[Question]:
        return [q for q in self.questions if q.conversation == conversation_id]

    @property
    def fact_turns(self) -> list[Turn]:
        return [t for t in self.turns.values() if t.fact]

    def counts(self) -> dict:
        """Counts per split and question type (what the README's table shows)."""
        out: dict = {}
        for split in SPLITS:
            convs = [c for c in self.conversations if c.split == split]
            turns = [t for c in convs for t in c.turns]
            qs = [q for q in self.questions if q.split == split]
            out[split] = {
                "conversations": len(convs),
                "sessions": sum(len(c.sessions) for c in convs),
                "turns": len(turns),
                "fact_turns": sum(1 for t in turns if t.fact),
                "haystack_turns": sum(1 for t in turns if t.haystack),
                "questions": len(qs),
                **{qtype: sum(1 for q in qs if q.type == qtype) for qtype in self.question_types},
            }
        return out


def _fail(path: Path, line: int, message: str) -> DatasetError:
    return DatasetError(f"{path.name} line {line}: {message}")


def read_jsonl(path: Path) -> list[tuple[int, dict]]:
    if not path.exists():
        raise DatasetError(f"{path} is missing; the benchmark data ships with the repository (git checkout it).")
    rows = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _fail(path, number, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict):
            raise _fail(path, number, "each line must be one JSON object")
        rows.append((number, row))
    return rows


def _require(path: Path, line: int, row: dict, key: str, kind, allow_none: bool = False):
    if key not in row:
        raise _fail(path, line, f"missing field {key!r}")
    value = row[key]
    if value is None and allow_none:
        return None
    if not isinstance(value, kind) or (kind is str and not value.strip()):
        raise _fail(path, line, f"field {key!r} must be a non-empty {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _id_list(path: Path, line: int, row: dict, key: str, required: bool) -> tuple[str, ...]:
    if key not in row:
        if required:
            raise _fail(path, line, f"missing field {key!r}")
        return ()
    value = row[key]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(path, line, f"field {key!r} must be a list of turn ids, got {value!r}")
    if len(set(value)) != len(value):
        raise _fail(path, line, f"field {key!r} repeats a turn id: {value!r}")
    return tuple(value)


def _parse_conversations(path: Path) -> tuple[list[Conversation], dict[str, Turn]]:
    conversations: list[Conversation] = []
    turns: dict[str, Turn] = {}
    seen: set[str] = set()
    for line, row in read_jsonl(path):
        cid = _require(path, line, row, "id", str)
        if cid in seen:
            raise _fail(path, line, f"conversation id {cid!r} is used twice")
        seen.add(cid)
        split = _require(path, line, row, "split", str)
        if split not in SPLITS:
            raise _fail(path, line, f"{cid}: split must be one of {SPLITS}, got {split!r}")
        title = _require(path, line, row, "title", str)
        participants = []
        for p in _require(path, line, row, "participants", list):
            if not isinstance(p, dict):
                raise _fail(path, line, f"{cid}: each participant must be an object")
            name = _require(path, line, p, "name", str)
            kind = _require(path, line, p, "kind", str)
            role = _require(path, line, p, "role", str, allow_none=True)
            if kind not in PARTICIPANT_KINDS:
                raise _fail(path, line, f"{cid}: participant {name!r} kind must be one of {PARTICIPANT_KINDS}")
            if role not in ROLES:
                raise _fail(path, line, f"{cid}: participant {name!r} role must be one of {ROLES}")
            participants.append(Participant(name=name, kind=kind, role=role))
        names = {p.name for p in participants}
        if len(names) != len(participants):
            raise _fail(path, line, f"{cid}: a participant name is listed twice")
        sessions = []
        last_date = ""
        numbers = {"s": 0, "h": 0}  # conversation sessions and haystack sessions are numbered apart
        for s in _require(path, line, row, "sessions", list):
            if not isinstance(s, dict):
                raise _fail(path, line, f"{cid}: each session must be an object")
            sid = _require(path, line, s, "id", str)
            haystack = s.get("haystack", False)
            if not isinstance(haystack, bool):
                raise _fail(path, line, f"{sid}: field 'haystack' must be true or false")
            kind = "h" if haystack else "s"
            numbers[kind] += 1
            if sid != f"{cid}-{kind}{numbers[kind]}":
                raise _fail(path, line, f"{cid}: this session must have id {cid}-{kind}{numbers[kind]}, got {sid!r}")
            date = _require(path, line, s, "date", str)
            if not _DATE.match(date):
                raise _fail(path, line, f"{sid}: date must be YYYY-MM-DD, got {date!r}")
            if date < last_date:
                raise _fail(path, line, f"{sid}: sessions must be in date order ({date} comes before {last_date})")
            last_date = date
            session_turns = []
            for tindex, t in enumerate(_require(path, line, s, "turns", list), start=1):
                if not isinstance(t, dict):
                    raise _fail(path, line, f"{sid}: each turn must be an object")
                tid = _require(path, line, t, "id", str)
                if tid != f"{sid}-t{tindex:02d}":
                    raise _fail(path, line, f"{sid}: turn {tindex} must have id {sid}-t{tindex:02d}, got {tid!r}")
                speaker = _require(path, line, t, "speaker", str)
                if speaker not in names:
                    raise _fail(path, line, f"{tid}: speaker {speaker!r} is not a participant ({sorted(names)})")
                text = _require(path, line, t, "text", str)
                fact = t.get("fact")
                if not isinstance(fact, bool):
                    raise _fail(path, line, f"{tid}: field 'fact' must be true or false")
                corrects = _id_list(path, line, t, "corrects", required=False)
                corrected_fact = t.get("corrected_fact")
                correct_fact = t.get("correct_fact")
                if (corrected_fact is not None or correct_fact is not None) and not corrects:
                    raise _fail(path, line, f"{tid}: corrected_fact/correct_fact only go with 'corrects'")
                for cref in corrects:
                    if cref not in turns:
                        raise _fail(path, line, f"{tid}: corrects {cref!r}, which is not an earlier turn of {cid}")
                    if turns[cref].conversation != cid:
                        raise _fail(path, line, f"{tid}: corrects {cref!r} from another conversation")
                if corrects and not fact:
                    raise _fail(path, line, f"{tid}: a correcting turn states the right fact, so 'fact' must be true")
                if corrects and haystack:
                    raise _fail(path, line, f"{tid}: a haystack turn corrects nothing")
                turn = Turn(
                    id=tid,
                    conversation=cid,
                    session=sid,
                    date=date,
                    speaker=speaker,
                    text=text,
                    fact=fact,
                    corrects=corrects,
                    corrected_fact=corrected_fact,
                    correct_fact=correct_fact,
                    haystack=haystack,
                )
                if tid in turns:
                    raise _fail(path, line, f"turn id {tid!r} is used twice")
                turns[tid] = turn
                session_turns.append(turn)
            if not session_turns:
                raise _fail(path, line, f"{sid} has no turns")
            sessions.append(Session(id=sid, date=date, turns=tuple(session_turns), haystack=haystack))
        if not sessions:
            raise _fail(path, line, f"{cid} has no sessions")
        conversations.append(
            Conversation(id=cid, split=split, title=title, participants=tuple(participants), sessions=tuple(sessions))
        )
    return conversations, turns


def _parse_questions(path: Path, conversations: list[Conversation], turns: dict[str, Turn]) -> list[Question]:
    by_id = {c.id: c for c in conversations}
    questions = []
    seen: set[str] = set()
    seen_text: dict[tuple[str, str], str] = {}
    for line, row in read_jsonl(path):
        qid = _require(path, line, row, "id", str)
        if not re.match(r"^q\d{4}$", qid):
            raise _fail(path, line, f"question id must look like q0001, got {qid!r}")
        if qid in seen:
            raise _fail(path, line, f"question id {qid!r} is used twice")
        seen.add(qid)
        cid = _require(path, line, row, "conversation", str)
        if cid not in by_id:
            raise _fail(path, line, f"{qid}: conversation {cid!r} is not in conversations.jsonl")
        split = _require(path, line, row, "split", str)
        if split != by_id[cid].split:
            raise _fail(path, line, f"{qid}: split {split!r} differs from its conversation's ({by_id[cid].split!r})")
        qtype = _require(path, line, row, "type", str)
        if qtype not in QUESTION_TYPES:
            raise _fail(path, line, f"{qid}: type must be one of {QUESTION_TYPES}, got {qtype!r}")
        text = _require(path, line, row, "question", str)
        key = (cid, text.strip().lower())
        if key in seen_text:
            raise _fail(path, line, f"{qid}: same question as {seen_text[key]} in {cid}")
        seen_text[key] = qid
        evidence = _id_list(path, line, row, "evidence", required=True)
        stale = _id_list(path, line, row, "stale", required=qtype in ("temporal", "correction"))
        if not evidence:
            raise _fail(path, line, f"{qid}: evidence must name at least one turn")
        for ref in evidence + stale:
            if ref not in turns:
                raise _fail(path, line, f"{qid}: turn {ref!r} does not exist")
            if turns[ref].conversation != cid:
                raise _fail(path, line, f"{qid}: turn {ref!r} belongs to {turns[ref].conversation}, not {cid}")
            if not turns[ref].fact:
                raise _fail(path, line, f"{qid}: turn {ref!r} is chatter (fact: false); evidence must be facts")
            if turns[ref].haystack:
                raise _fail(path, line, f"{qid}: turn {ref!r} is in a haystack session, which answers no question")
        if set(evidence) & set(stale):
            raise _fail(path, line, f"{qid}: a turn is both evidence and stale")
        if qtype == "multihop":
            if len(evidence) != 2:
                raise _fail(path, line, f"{qid}: a multihop question needs exactly two evidence turns")
        if qtype in ("temporal", "correction"):
            if not stale:
                raise _fail(path, line, f"{qid}: a {qtype} question needs the superseded turn in 'stale'")
            latest_stale = max(_turn_order(turns[s]) for s in stale)
            for ref in evidence:
                if _turn_order(turns[ref]) <= latest_stale:
                    raise _fail(path, line, f"{qid}: evidence {ref} must be said after the stale turn(s) {list(stale)}")
        if qtype == "correction":
            if not any(set(turns[ref].corrects) & set(stale) for ref in evidence):
                raise _fail(path, line, f"{qid}: one evidence turn must correct a stale turn (its 'corrects' names it)")
        if qtype == "temporal" and any(turns[ref].corrects for ref in evidence):
            raise _fail(path, line, f"{qid}: evidence corrects an error; make it a 'correction' question")
        if stale and qtype not in ("temporal", "correction"):
            raise _fail(path, line, f"{qid}: only temporal and correction questions have 'stale' turns")
        questions.append(
            Question(id=qid, conversation=cid, split=split, type=qtype, question=text, evidence=evidence, stale=stale)
        )
    return questions


def _turn_order(turn: Turn) -> tuple[str, int, int]:
    session_no = int(turn.session.rsplit("-s", 1)[1])
    turn_no = int(turn.id.rsplit("-t", 1)[1])
    return (turn.date, session_no, turn_no)


def load(split: str | None = None, *, data_dir: Path | None = None, haystack: bool = True) -> Dataset:
    """Read and check both files; return everything, or only one split (``"dev"`` or ``"test"``).

    ``haystack=False`` leaves out the haystack sessions: the conversations alone (the "core" protocol,
    ``--core``).
    """
    if split is not None and split not in SPLITS:
        raise DatasetError(f"unknown split {split!r}; use one of {SPLITS} or None for both")
    directory = Path(data_dir) if data_dir is not None else DATA_DIR
    conversations, turns = _parse_conversations(directory / CONVERSATIONS_FILE.name)
    questions = _parse_questions(directory / QUESTIONS_FILE.name, conversations, turns)
    if split is not None:
        conversations = [c for c in conversations if c.split == split]
        keep = {c.id for c in conversations}
        questions = [q for q in questions if q.conversation in keep]
        turns = {tid: t for tid, t in turns.items() if t.conversation in keep}
    if not haystack:
        conversations = [replace(c, sessions=tuple(s for s in c.sessions if not s.haystack)) for c in conversations]
        turns = {tid: t for tid, t in turns.items() if not t.haystack}
    return Dataset(conversations=conversations, questions=questions, turns=turns)
