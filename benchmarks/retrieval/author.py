"""Turn the hand-written conversation sources (``data/src/cNN.txt``) into the two JSONL files.

    python -m benchmarks.retrieval.author          # rewrite data/conversations.jsonl and data/questions.jsonl
    python -m benchmarks.retrieval.author --check  # fail if the JSONL files differ from the sources

The sources are the conversations as they were written by hand, in a compact notation so that
people can read and edit them; this script only assigns ids and writes JSON. It generates no text.

Notation (one item per line; blank lines and lines starting with ``;`` are ignored)::

    # c01 dev | Title of the conversation
    @ Maya Okafor | human | -            participant: name | human/agent | pdsa/dev/qa/liaison/-
    == 2026-03-02                         a new session on that date
    Maya Okafor: sounds good              chatter (fact: false)
    +rate Maya Okafor: the limit is 40    a fact, with a label questions refer to
    !rate2>rate Maya Okafor: sorry, 45 || limit 40 => limit 45
                                          a fact that corrects the turn labelled ``rate``
                                          (``|| wrong => right`` fills corrected_fact/correct_fact)
    ? single rate | What is the limit?    question: single/para/multi/temp/corr, evidence labels,
    ? multi a b | ...                     (multi: the two facts), temp/corr: NEW OLD (stale last)
    == 2026-03-04 ~                       a haystack session: the team's other work in the same weeks,
    + Forge: billing-api's pool is 25     distractors that answer no question; inside it only
    Forge: sounds good                    unlabelled facts ("+ ") and chatter (ids cNN-hK-tMM)

    python -m benchmarks.retrieval.author --check-source data/src/c01.txt   # parse one source, print its counts
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from benchmarks.retrieval.dataset import CONVERSATIONS_FILE, DATA_DIR, QUESTIONS_FILE, DatasetError, load

SRC_DIR = DATA_DIR / "src"
TYPES = {"single": "single", "para": "paraphrase", "multi": "multihop", "temp": "temporal", "corr": "correction"}


class SourceError(ValueError):
    pass


def parse(path: Path, first_question: int) -> tuple[dict, list[dict]]:
    conv: dict | None = None
    labels: dict[str, str] = {}
    questions: list[dict] = []
    session = None
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        where = f"{path.name}:{number}"
        if not line or line.startswith(";"):
            continue
        if line.startswith("# "):
            m = re.match(r"^# (c\d\d) (dev|test) \| (.+)$", line)
            if not m:
                raise SourceError(f"{where}: header must be '# cNN dev|test | title'")
            conv = {"id": m[1], "split": m[2], "title": m[3], "participants": [], "sessions": []}
            continue
        if conv is None:
            raise SourceError(f"{where}: the file must start with a '# cNN split | title' header")
        if line.startswith("@ "):
            name, kind, role = [p.strip() for p in line[2:].split("|")]
            conv["participants"].append({"name": name, "kind": kind, "role": None if role == "-" else role})
            continue
        if line.startswith("== "):
            date, _, mark = line[3:].strip().partition(" ")
            if mark not in ("", "~"):
                raise SourceError(f"{where}: a session line is '== YYYY-MM-DD' or '== YYYY-MM-DD ~' (haystack)")
            haystack = mark == "~"
            kind = "h" if haystack else "s"
            number = sum(1 for s in conv["sessions"] if s.get("haystack", False) == haystack) + 1
            session = {"id": f"{conv['id']}-{kind}{number}", "date": date}
            if haystack:
                session["haystack"] = True
            session["turns"] = []
            conv["sessions"].append(session)
            continue
        if line.startswith("? "):
            head, _, text = line[2:].partition(" | ")
            parts = head.split()
            if parts[0] not in TYPES or not text:
                raise SourceError(f"{where}: question must be '? TYPE LABEL... | text'")
            qtype = TYPES[parts[0]]
            refs = []
            for label in parts[1:]:
                if label not in labels:
                    raise SourceError(f"{where}: unknown label {label!r}")
                refs.append(labels[label])
            q = {
                "id": f"q{first_question + len(questions):04d}",
                "conversation": conv["id"],
                "split": conv["split"],
                "type": qtype,
                "question": text.strip(),
            }
            if qtype in ("temporal", "correction"):
                if len(refs) < 2:
                    raise SourceError(f"{where}: {parts[0]} needs NEW and OLD labels")
                q["evidence"], q["stale"] = refs[:-1], refs[-1:]
            else:
                q["evidence"] = refs
            questions.append(q)
            continue
        if session is None:
            raise SourceError(f"{where}: a turn before the first '== date' line")
        turn: dict = {"id": f"{session['id']}-t{len(session['turns']) + 1:02d}"}
        if line.startswith("+ "):
            if not session.get("haystack"):
                raise SourceError(f"{where}: a fact needs a label ('+label Speaker: ...') outside haystack sessions")
            turn["fact"] = True
            line, old = line[2:], ""
        elif line[0] in "+!":
            if session.get("haystack"):
                raise SourceError(f"{where}: a haystack session holds only '+ Speaker: ...' facts and chatter")
            marker, _, rest = line.partition(" ")
            label, _, old = marker[1:].partition(">")
            if not label or label in labels:
                raise SourceError(f"{where}: missing or repeated label {label!r}")
            labels[label] = turn["id"]
            turn["fact"] = True
            line = rest
        else:
            turn["fact"] = False
            old = ""
        speaker, sep, text = line.partition(": ")
        if not sep:
            raise SourceError(f"{where}: a turn must be 'Speaker: text'")
        fixes = ""
        if " || " in text:
            text, _, fixes = text.partition(" || ")
        turn["speaker"] = speaker.strip()
        turn["text"] = text.strip()
        if old:
            turn["corrects"] = []
            for label in old.split(","):
                if label not in labels:
                    raise SourceError(f"{where}: corrects unknown label {label!r}")
                turn["corrects"].append(labels[label])
            if fixes:
                wrong, _, right = fixes.partition(" => ")
                turn["corrected_fact"], turn["correct_fact"] = wrong.strip(), right.strip()
        order = ["id", "speaker", "text", "fact", "corrects", "corrected_fact", "correct_fact"]
        session["turns"].append({k: turn[k] for k in order if k in turn})
    if conv is None:
        raise SourceError(f"{path.name}: empty source")
    return conv, questions


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def build() -> tuple[str, str]:
    conversations, questions = [], []
    for path in sorted(SRC_DIR.glob("c*.txt")):
        conv, qs = parse(path, first_question=len(questions) + 1)
        conversations.append(conv)
        questions.extend(qs)
    return _jsonl(conversations), _jsonl(questions)


def check_source(path: Path) -> int:
    """Parse one source and put it through every check of the loader (dataset.load on a temporary copy
    of the two files holding only this conversation); print its counts or the first error."""
    import tempfile

    try:
        conv, questions = parse(path, first_question=1)
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, CONVERSATIONS_FILE.name).write_text(_jsonl([conv]), encoding="utf-8")
            Path(folder, QUESTIONS_FILE.name).write_text(_jsonl(questions), encoding="utf-8")
            ds = load(data_dir=Path(folder))
    except (SourceError, DatasetError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    turns = list(ds.turns.values())
    for kind, haystack in (("core", False), ("haystack", True)):
        sessions = [s for s in ds.conversations[0].sessions if s.haystack == haystack]
        mine = [t for t in turns if t.haystack == haystack]
        print(f"{kind}: {len(sessions)} sessions, {len(mine)} turns ({sum(t.fact for t in mine)} facts)")
    print(f"questions: {len(ds.questions)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the JSONL files match the sources")
    parser.add_argument("--check-source", metavar="FILE", help="parse one source file and print its counts")
    args = parser.parse_args(argv)
    if args.check_source:
        return check_source(Path(args.check_source))
    try:
        conversations, questions = build()
    except SourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        same = CONVERSATIONS_FILE.read_text() == conversations and QUESTIONS_FILE.read_text() == questions
        print(
            "data matches the sources"
            if same
            else "data differs from the sources: run python -m benchmarks.retrieval.author"
        )
        return 0 if same else 1
    CONVERSATIONS_FILE.write_text(conversations, encoding="utf-8")
    QUESTIONS_FILE.write_text(questions, encoding="utf-8")
    ds = load()
    print(json.dumps(ds.counts(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
