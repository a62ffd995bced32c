"""Judge validation against hand-labelled turns (SPEC 4.2; seeds/004 section 3, "judge validation").

The labelled file is JSON Lines, one turn per line (format: ``quality/fixtures/README.md``)::

    {"turn_id": "v001", "user_prompt": "...", "assistant_response": "...", "tool_calls": [...],
     "items": [{"id": "v001-a", "content": "...", "on_topic": true, "used": true, "contradicted": false}]}

Agreement per metric = share of items where the judge's outcome equals the label, asked and
combined exactly as scoring does (``quality.services.scoring.item_judge``: same response text with
tool calls; an item found used or contradicted counts as on topic). The prompt-only on-topic answer's
confusion counts are kept in ``details["on_topic_prompt_only"]`` for reference.

Every turn belongs to one half: ``tune`` (a judge's thresholds may be chosen on it) or ``held-out``
(never used for tuning). A line's ``"split"`` field says which; without it the fixed rule of
:func:`turn_split` applies (odd turn number = tune). ``quality/fixtures/judge_heldout.jsonl`` is held
out as a whole.

Trust is decided on the held-out turns only (rule ``formulas.JUDGE_TRUST_RULE``): at least 85%
agreement on each of on_topic, used and contradicted over at least ``JUDGE_MIN_HELDOUT_ITEMS`` held-out
items, with at least ``JUDGE_MIN_HELDOUT_EACH_ANSWER`` of them labelled true and as many labelled false
on every metric. Agreeing on the tune half therefore can't make a judge trusted, however well it does
there, and neither can a small file, nor one whose labels all say the same on a metric. Agreement is
reported per half with a 95% Wilson interval.

An item is asked and counted once (:func:`item_key`: the prompt, the response and the excerpt, case and
spacing aside): a copy under another turn id is skipped, and so is a held-out item that is also in the
tune half (the judge was tuned on it). ``details["skipped"]`` counts both.

The run is recorded as a ``JudgeValidation`` under the judge's configured name (``--judge`` or
``QUALITY_JUDGE``), the name scoring looks trust up by; its agreement fields hold the held-out
figures, and the latest record per judge name decides trust (``quality.selectors.judge_trust``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from api.errors import ValidationFailed
from api.parsers import json_lines
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
    split: str = "held-out"


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
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationFailed(
            f"{path} is not UTF-8 (byte {exc.start}): save it as UTF-8 JSON Lines.", code="BAD_LABELLED_FILE"
        ) from None
    for number, line in enumerate(json_lines(text), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationFailed(f"line {number}: not JSON ({exc.msg}).", code="BAD_LABELLED_FILE") from exc
        except (RecursionError, ValueError):
            raise ValidationFailed(f"line {number}: JSON nested too deep to read.", code="BAD_LABELLED_FILE") from None
        _require(isinstance(data, dict), number, "each line must be a JSON object")
        for key in ("turn_id", "user_prompt", "assistant_response"):
            _require(isinstance(data.get(key), str), number, f"{key!r} must be a string")
        _require(isinstance(data.get("tool_calls", []), list), number, "'tool_calls' must be a list")
        _require(
            data.get("split", SPLITS[0]) in SPLITS, number, f"'split' must be one of {', '.join(SPLITS)} (or left out)"
        )
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
                split=data.get("split") or turn_split(data["turn_id"]),
            )
        )
    _require(bool(turns), 0, "the file holds no turns")
    return turns, hashlib.sha256(raw).hexdigest()


def judge_validation_load_many(*, paths: list[Path]) -> tuple[list[LabelledTurn], str]:
    """Several labelled files as one set (turn ids must stay unique); the digest covers all of them."""
    turns: list[LabelledTurn] = []
    digests = []
    for path in paths:
        file_turns, digest = judge_validation_load(path=path)
        turns.extend(file_turns)
        digests.append(digest)
    seen: set[str] = set()
    for turn in turns:
        if turn.turn_id in seen:
            raise ValidationFailed(
                f"turn_id {turn.turn_id!r} appears twice across the files.", code="BAD_LABELLED_FILE"
            )
        seen.add(turn.turn_id)
    digest = digests[0] if len(digests) == 1 else hashlib.sha256("".join(digests).encode()).hexdigest()
    return turns, digest


SPLITS = ("tune", "held-out")


def turn_split(turn_id: str) -> str:
    """The fixed tune/held-out rule for tuning a judge without grading it on what it was tuned on:
    the number in the turn id, odd = ``tune``, even = ``held-out`` (v001 tune, v002 held-out). A
    turn id without digits is held out."""
    digits = "".join(ch for ch in turn_id if ch.isdigit())
    return "tune" if digits and int(digits) % 2 else "held-out"


def item_key(turn: LabelledTurn, item: LabelledItem) -> str:
    """What makes a labelled item the same item: its turn's prompt and response and its excerpt, each
    with case and runs of whitespace folded."""
    response = turn_response_text(assistant_response=turn.assistant_response, tool_calls=turn.tool_calls)
    parts = (" ".join(text.casefold().split()) for text in (turn.user_prompt, response, item.content))
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def _empty_confusion() -> dict[str, dict[str, int]]:
    return {metric: {"tp": 0, "fp": 0, "fn": 0, "tn": 0} for metric in formulas.JUDGE_METRICS}


def agreement_summary(confusion: dict[str, dict[str, int]]) -> dict:
    """Per metric: agreement, its 95% Wilson interval, items, and how many labelled-true cases were found."""
    out = {}
    for metric, counts in confusion.items():
        n = sum(counts.values())
        agreed = counts["tp"] + counts["tn"]
        low, high = formulas.wilson_interval(agreed, n)
        out[metric] = {
            "agreement": agreed / n if n else 0.0,
            "ci95": [low, high],
            "items": n,
            "labelled_true": counts["tp"] + counts["fn"],
            "found": counts["tp"],
        }
    return out


def trust_decide(confusion: dict[str, dict[str, int]]) -> tuple[bool, str]:
    """The trust rule on the held-out confusion counts: (trusted, why)."""
    summary = agreement_summary(confusion)
    items = summary["on_topic"]["items"]
    if items < formulas.JUDGE_MIN_HELDOUT_ITEMS:
        return False, (
            f"only {items} held-out items (needs {formulas.JUDGE_MIN_HELDOUT_ITEMS}): "
            "add held-out labelled turns, e.g. quality/fixtures/judge_heldout.jsonl"
        )
    least = formulas.JUDGE_MIN_HELDOUT_EACH_ANSWER
    for metric in formulas.JUDGE_METRICS:
        labelled_true = summary[metric]["labelled_true"]
        for count, label in ((labelled_true, metric), (items - labelled_true, f"not {metric}")):
            if count < least:
                return False, f"only {count} held-out items labelled {label} (needs {least})"
    below = [m for m in formulas.JUDGE_METRICS if summary[m]["agreement"] < formulas.JUDGE_MIN_AGREEMENT]
    if below:
        return False, f"held-out agreement below {formulas.JUDGE_MIN_AGREEMENT:.0%} on {', '.join(below)}"
    return True, f"held-out agreement >= {formulas.JUDGE_MIN_AGREEMENT:.0%} on every metric over {items} items"


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
    """Ask the judge about every labelled item and return the agreement per metric and per half.

    The agreement fields of the result are the held-out half's (what trust is decided on); the
    tune half and the whole set are in ``details["splits"]``. ``record`` saves it (a run on one
    half, e.g. ``--split``, is not recorded)."""
    by_split = {split: _empty_confusion() for split in SPLITS}
    turns_by_split = dict.fromkeys(SPLITS, 0)
    confusion_raw_on_topic = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}  # the prompt-only answer, for reference
    disagreements = []
    n_turns = n_items = 0
    turns = list(turns)
    tuned_on = {item_key(turn, item) for turn in turns if turn.split == "tune" for item in turn.items}
    asked: set[str] = set()
    skipped = {"repeated": 0, "held_out_in_tune": 0}
    for turn in turns:
        n_turns += 1
        turns_by_split[turn.split] += 1
        confusion = by_split[turn.split]
        response = turn_response_text(assistant_response=turn.assistant_response, tool_calls=turn.tool_calls)
        for item in turn.items:
            key = item_key(turn, item)
            if key in asked:
                skipped["repeated"] += 1
                continue
            asked.add(key)
            if turn.split == "held-out" and key in tuned_on:
                skipped["held_out_in_tune"] += 1
                continue
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
                if label != said and len(disagreements) < 300:
                    disagreements.append(
                        {
                            "turn": turn.turn_id,
                            "split": turn.split,
                            "item": item.id,
                            "metric": metric,
                            "label": label,
                            **verdict,
                        }
                    )
        if on_turn is not None:
            on_turn()
    whole = {
        metric: {key: sum(by_split[split][metric][key] for split in SPLITS) for key in ("tp", "fp", "fn", "tn")}
        for metric in formulas.JUDGE_METRICS
    }
    held_out = by_split["held-out"]
    summary = agreement_summary(held_out)
    trusted, why = trust_decide(held_out)
    validation = JudgeValidation(
        judge_name=judge_name or judge.name,
        source=source[:500],
        source_sha256=source_sha256,
        turns=n_turns,
        items=n_items,
        on_topic_agreement=summary["on_topic"]["agreement"],
        used_agreement=summary["used"]["agreement"],
        contradicted_agreement=summary["contradicted"]["agreement"],
        trusted=trusted,
        details={
            "trust_rule": formulas.JUDGE_TRUST_RULE,
            "trust_reason": why,
            "confusion": held_out,
            "splits": {
                **{
                    split: {
                        "turns": turns_by_split[split],
                        "confusion": by_split[split],
                        **agreement_summary(by_split[split]),
                    }
                    for split in SPLITS
                },
                "all": {"turns": n_turns, "confusion": whole, **agreement_summary(whole)},
            },
            "on_topic_prompt_only": confusion_raw_on_topic,
            "skipped": skipped,
            "disagreements": disagreements,
        },
    )
    if record:
        validation.save()
    return validation
