"""Judge validation against hand-labelled turns (SPEC 4.2; seeds/004 section 3, "judge validation").

The labelled file is JSON Lines, one turn per line (format: ``quality/fixtures/README.md``)::

    {"turn_id": "v001", "user_prompt": "...", "assistant_response": "...", "tool_calls": [...],
     "items": [{"id": "v001-a", "content": "...", "on_topic": true, "used": true, "contradicted": false}]}

Agreement per metric = share of items where the judge's outcome equals the label, asked and
combined exactly as scoring does (``quality.services.scoring.item_judge``: same response text with
tool calls; an item found used or contradicted counts as on topic). The prompt-only on-topic answer's
confusion counts are kept in ``details["on_topic_prompt_only"]`` for reference.

The run is recorded as a ``JudgeValidation`` under the judge's configured name (``--judge`` or
``QUALITY_JUDGE``), the name scoring looks trust up by; the latest one per judge name decides trust
(``quality.selectors.judge_trust``): at least 85% on each of on_topic, used and contradicted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import ValidationFailed
from quality import formulas
from quality.models import JudgeValidation
from quality.services.scoring import JudgeLike, item_judge, turn_response_text


@dataclass(frozen=True)
class LabelledItem:
    id: str
    content: str
    labels: dict[str, bool]


@dataclass(frozen=True)
class LabelledTurn:
    turn_id: str
    user_prompt: str
    assistant_response: str
    tool_calls: list = field(default_factory=list)
    items: tuple[LabelledItem, ...] = ()


def _require(condition: bool, line: int, message: str) -> None:
    if not condition:
        raise ValidationFailed(f"line {line}: {message}", code="BAD_LABELLED_FILE")


def judge_validation_load(*, path: Path) -> tuple[list[LabelledTurn], str]:
    """Parse and check a labelled file; returns (turns, sha256 of the file)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValidationFailed(f"Can't read {path}: {exc.strerror}.", code="BAD_LABELLED_FILE") from exc
    turns = []
    for number, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationFailed(f"line {number}: not JSON ({exc.msg}).", code="BAD_LABELLED_FILE") from exc
        _require(isinstance(data, dict), number, "each line must be a JSON object")
        for key in ("turn_id", "user_prompt", "assistant_response"):
            _require(isinstance(data.get(key), str), number, f"{key!r} must be a string")
        _require(isinstance(data.get("tool_calls", []), list), number, "'tool_calls' must be a list")
        _require(isinstance(data.get("items"), list) and data["items"], number, "'items' must be a non-empty list")
        items = []
        for index, item in enumerate(data["items"]):
            _require(isinstance(item, dict), number, f"items[{index}] must be an object")
            _require(isinstance(item.get("content"), str), number, f"items[{index}].content must be a string")
            for metric in formulas.JUDGE_METRICS:
                _require(isinstance(item.get(metric), bool), number, f"items[{index}].{metric} must be true or false")
            items.append(
                LabelledItem(
                    id=str(item.get("id", f"{data['turn_id']}-{index}")),
                    content=item["content"],
                    labels={metric: item[metric] for metric in formulas.JUDGE_METRICS},
                )
            )
        turns.append(
            LabelledTurn(
                turn_id=data["turn_id"],
                user_prompt=data["user_prompt"],
                assistant_response=data["assistant_response"],
                tool_calls=data.get("tool_calls", []),
                items=tuple(items),
            )
        )
    _require(bool(turns), 0, "the file holds no turns")
    return turns, hashlib.sha256(raw).hexdigest()


SPLITS = ("tune", "held-out")


def turn_split(turn_id: str) -> str:
    """The fixed tune/held-out rule for tuning a judge without grading it on what it was tuned on:
    the number in the turn id, odd = ``tune``, even = ``held-out`` (v001 tune, v002 held-out). A
    turn id without digits is held out."""
    digits = "".join(ch for ch in turn_id if ch.isdigit())
    return "tune" if digits and int(digits) % 2 else "held-out"


def judge_validate(
    *,
    turns: Iterable[LabelledTurn],
    judge: JudgeLike,
    judge_name: str | None = None,
    source: str,
    source_sha256: str,
    on_turn: Callable[[], None] | None = None,
    record: bool = True,
) -> JudgeValidation:
    """Ask the judge about every labelled item and return the agreement per metric; ``record``
    saves it (a run on part of a file, e.g. one split, is not recorded: trust needs the whole file)."""
    confusion = {metric: {"tp": 0, "fp": 0, "fn": 0, "tn": 0} for metric in formulas.JUDGE_METRICS}
    confusion_raw_on_topic = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}  # the prompt-only answer, for reference
    disagreements = []
    n_turns = n_items = 0
    for turn in turns:
        n_turns += 1
        response = turn_response_text(assistant_response=turn.assistant_response, tool_calls=turn.tool_calls)
        for item in turn.items:
            n_items += 1
            verdicts, outcome = item_judge(
                judge=judge, prompt=turn.user_prompt, response_text=response, excerpt=item.content
            )
            raw_on_topic = verdicts["on_topic"]["verdict"]
            raw = confusion_raw_on_topic
            raw[("t" if raw_on_topic == item.labels["on_topic"] else "f") + ("p" if raw_on_topic else "n")] += 1
            for metric, verdict in verdicts.items():
                label, said = item.labels[metric], outcome[metric]
                confusion[metric][("t" if label == said else "f") + ("p" if said else "n")] += 1
                if label != said and len(disagreements) < 200:
                    disagreements.append(
                        {"turn": turn.turn_id, "item": item.id, "metric": metric, "label": label, **verdict}
                    )
        if on_turn is not None:
            on_turn()
    agreement = {
        metric: (counts["tp"] + counts["tn"]) / n_items if n_items else 0.0 for metric, counts in confusion.items()
    }
    validation = JudgeValidation(
        judge_name=judge_name or judge.name,
        source=source[:500],
        source_sha256=source_sha256,
        turns=n_turns,
        items=n_items,
        on_topic_agreement=agreement["on_topic"],
        used_agreement=agreement["used"],
        contradicted_agreement=agreement["contradicted"],
        trusted=all(value >= formulas.JUDGE_MIN_AGREEMENT for value in agreement.values()),
        details={
            "confusion": confusion,
            "on_topic_prompt_only": confusion_raw_on_topic,
            "disagreements": disagreements,
        },
    )
    if record:
        validation.save()
    return validation
