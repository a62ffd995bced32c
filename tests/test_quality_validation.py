"""manage.py validate_judge: agreement per metric, the record it leaves, trust, bad files; the shipped file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import CommandError

from quality.models import JudgeValidation
from quality.selectors import judge_trust
from quality.services.validation import judge_validation_load

pytestmark = pytest.mark.django_db
SHIPPED = Path(django_settings.BASE_DIR) / "quality" / "fixtures" / "judge_validation.jsonl"


def write(tmp_path: Path, turns: list[dict]) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(json.dumps(turn) for turn in turns) + "\n")
    return path


def item(content: str, on_topic: bool, used: bool, contradicted: bool) -> dict:
    return {"content": content, "on_topic": on_topic, "used": used, "contradicted": contradicted}


TURNS = [
    {
        "turn_id": "a",
        "user_prompt": "p",
        "assistant_response": "r",
        "items": [
            item("[on] [used] agreed everywhere", True, True, False),
            item("[on] [contra] agreed everywhere", True, False, True),
        ],
    },
    {
        "turn_id": "b",
        "user_prompt": "p",
        "assistant_response": "r",
        "tool_calls": [{"name": "Bash"}],
        "items": [
            item("off topic, the label says on topic", True, False, False),  # judge: on_topic False
            # judge: used True, hence on topic too (scoring's rule), against both labels
            item("[used] but the label says unused", False, False, False),
        ],
    },
]


def test_agreement_per_metric_is_printed_and_recorded(tmp_path, settings, capsys):
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    call_command("validate_judge", str(write(tmp_path, TURNS)), "--judge", "embedding")
    out = capsys.readouterr().out
    assert "Judge embedding on 2 turns, 4 items:" in out
    assert re.search(r"on_topic\s+50\.0%\s+BELOW 85%", out)
    assert re.search(r"used\s+75\.0%\s+BELOW 85%", out)
    assert re.search(r"contradicted\s+100\.0%\s+ok", out)
    assert "NOT trusted" in out
    validation = JudgeValidation.objects.get()
    assert (validation.judge_name, validation.turns, validation.items) == ("embedding", 2, 4)
    assert (validation.on_topic_agreement, validation.used_agreement, validation.contradicted_agreement) == (
        0.5,
        0.75,
        1.0,
    )
    assert validation.trusted is False
    assert validation.details["confusion"]["used"] == {"tp": 1, "fp": 1, "fn": 0, "tn": 2}
    assert validation.details["confusion"]["on_topic"] == {"tp": 2, "fp": 1, "fn": 1, "tn": 0}
    # the prompt-only answer, before "used or contradicted means on topic"
    assert validation.details["on_topic_prompt_only"] == {"tp": 2, "fp": 0, "fn": 1, "tn": 1}
    assert {(d["turn"], d["metric"]) for d in validation.details["disagreements"]} == {("b", "on_topic"), ("b", "used")}
    assert judge_trust(judge_name="embedding").trusted is False


def test_a_judge_agreeing_on_every_metric_becomes_trusted(tmp_path, settings, capsys):
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    settings.QUALITY_JUDGE = "llm"
    call_command("validate_judge", str(write(tmp_path, TURNS[:1])))  # --judge defaults to QUALITY_JUDGE
    assert "TRUSTED for ranking" in capsys.readouterr().out
    assert judge_trust(judge_name="llm").trusted is True
    assert judge_trust(judge_name="embedding").trusted is False


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"turn_id": "a", "user_prompt": "p", "assistant_response": "r", "items": []}', "line 1: 'items'"),
        ("{not json", "line 1: not JSON"),
        ('{"turn_id": "a", "user_prompt": "p", "assistant_response": "r", "items": [{"content": "c"}]}', "on_topic"),
        ('{"turn_id": 1, "user_prompt": "p", "assistant_response": "r", "items": []}', "'turn_id' must be a string"),
        ("\n\n", "no turns"),
    ],
)
def test_bad_files_are_refused_with_the_line(tmp_path, settings, content, message):
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(CommandError, match=message):
        call_command("validate_judge", str(path))
    assert JudgeValidation.objects.count() == 0


def test_missing_file(tmp_path):
    with pytest.raises(CommandError, match="Can't read"):
        call_command("validate_judge", str(tmp_path / "nope.jsonl"))


def test_shipped_labelled_file():
    turns, sha256 = judge_validation_load(path=SHIPPED)
    assert len(turns) >= 50 and len(sha256) == 64
    assert len({turn.turn_id for turn in turns}) == len(turns)
    items = [item for turn in turns for item in turn.items]
    for metric in ("on_topic", "used", "contradicted"):
        positives = sum(item.labels[metric] for item in items)
        assert 0 < positives < len(items), metric  # both classes present: agreement is not trivial
    for item in items:  # the labelling rules of quality/fixtures/README.md
        assert item.labels["on_topic"] or not (item.labels["used"] or item.labels["contradicted"])


def test_agreement_reached_by_always_answering_no_is_called_out(tmp_path, settings, capsys):
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    rare = [
        {
            "turn_id": str(n),
            "user_prompt": "p",
            "assistant_response": "r",
            "items": [item("[on] plain", True, False, n == 0)],  # 1 contradiction in 10: judge never says so
        }
        for n in range(10)
    ]
    call_command("validate_judge", str(write(tmp_path, rare)))
    out = capsys.readouterr().out
    assert re.search(r"contradicted\s+90\.0%\s+ok", out)
    assert "found 0 of 1 labelled true" in out
    assert "warning: contradicted agreement comes from answering no" in out


def test_a_split_runs_one_half_and_records_nothing(tmp_path, settings, capsys):
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    turns = [{**TURNS[0], "turn_id": "v001"}, {**TURNS[1], "turn_id": "v002"}]
    path = write(tmp_path, turns)
    call_command("validate_judge", str(path), "--judge", "embedding", "--split", "tune")
    out = capsys.readouterr().out
    assert "on 1 turns, 2 items (tune half, not recorded)" in out
    assert re.search(r"on_topic\s+100\.0%", out)
    call_command("validate_judge", str(path), "--judge", "embedding", "--split", "held-out")
    out = capsys.readouterr().out
    assert "on 1 turns, 2 items (held-out half, not recorded)" in out
    assert re.search(r"on_topic\s+0\.0%", out)
    assert not JudgeValidation.objects.exists()  # trust is decided on the whole file only
    with pytest.raises(CommandError, match="No turn"):
        call_command("validate_judge", str(write(tmp_path, [{**TURNS[0], "turn_id": "v001"}])), "--split", "held-out")
