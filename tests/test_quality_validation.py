"""manage.py validate_judge: agreement per metric, the record it leaves, trust, bad files; the shipped file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import CommandError

from quality import formulas
from quality.models import JudgeValidation
from quality.selectors import judge_trust
from quality.services.validation import judge_validation_load

pytestmark = pytest.mark.django_db
SHIPPED = Path(django_settings.BASE_DIR) / "quality" / "fixtures" / "judge_validation.jsonl"
HELD_OUT = Path(django_settings.BASE_DIR) / "quality" / "fixtures" / "judge_heldout.jsonl"
CI = r"{}\s+{}%\s+95% CI\s+[\d.]+-\s*[\d.]+%"  # metric, agreement, then its Wilson interval


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
    assert re.search(CI.format("on_topic", "50\\.0") + r"\s+BELOW 85%", out)
    assert re.search(CI.format("used", "75\\.0") + r"\s+BELOW 85%", out)
    assert re.search(CI.format("contradicted", "100\\.0") + r"\s+ok", out)
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


def held_out_turns(n: int, *, wrong_every: int = 0, start: int = 1) -> list[dict]:
    """``n`` held-out turns of two distinct items each (one used, one contradicted), and an off-topic one
    every fourth turn, which the marker judge gets right, except in every ``wrong_every``-th turn, whose
    first two items' labels say the opposite of what the judge says."""
    turns = []
    for k in range(start, start + n):
        wrong = bool(wrong_every) and k % wrong_every == 0
        turns.append(
            {
                "turn_id": f"h{k:04d}",
                "split": "held-out",
                "user_prompt": "p",
                "assistant_response": "r",
                "items": [
                    item(f"[on] [used] fact {k}", True, not wrong, False),
                    item(f"[on] [contra] stale fact {k}", True, False, not wrong),
                    *([item(f"off topic note {k}", False, False, False)] if k % 4 == 0 else []),
                ],
            }
        )
    return turns


def tune_turns(n: int) -> list[dict]:
    """``n`` turns of the tuning half (odd turn numbers, no split field), all agreed by the marker judge."""
    return [
        {
            "turn_id": f"v{2 * k + 1:04d}",
            "user_prompt": "p",
            "assistant_response": "r",
            "items": [item(f"[on] [used] a {k}", True, True, False), item(f"[on] [contra] b {k}", True, False, True)],
        }
        for k in range(n)
    ]


def test_a_judge_agreeing_on_enough_held_out_turns_becomes_trusted(tmp_path, settings, capsys):
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    settings.QUALITY_JUDGE = "llm"
    call_command("validate_judge", str(write(tmp_path, held_out_turns(160))))  # --judge defaults to QUALITY_JUDGE
    out = capsys.readouterr().out
    assert "TRUSTED for ranking" in out and "over 360 items" in out
    assert judge_trust(judge_name="llm").trusted is True
    assert judge_trust(judge_name="embedding").trusted is False


def test_agreeing_on_the_tuning_half_cannot_make_a_judge_trusted(tmp_path, settings, capsys):
    """A gamed judge: perfect on the half the judge was tuned on, below the bar on
    the held-out half, above the bar on the whole file (which the old rule read). It stays untrusted."""
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    turns = tune_turns(400) + held_out_turns(160, wrong_every=2)  # held-out: 80 of 160 turns disagree
    call_command("validate_judge", str(write(tmp_path, turns)), "--judge", "embedding")
    out = capsys.readouterr().out
    validation = JudgeValidation.objects.get()
    splits = validation.details["splits"]
    assert splits["tune"]["used"]["agreement"] == 1.0
    assert splits["all"]["used"]["agreement"] == pytest.approx(1 - 80 / 1160)  # 93.1%: the old rule trusted this
    assert splits["held-out"]["used"]["agreement"] == pytest.approx(280 / 360)  # 77.8%
    assert (validation.used_agreement, validation.contradicted_agreement) == (280 / 360, 280 / 360)  # held-out
    assert validation.on_topic_agreement == 1.0
    assert validation.trusted is False
    assert judge_trust(judge_name="embedding").trusted is False
    assert "NOT trusted" in out and "held-out agreement below 85% on used, contradicted" in out
    # every half is printed with its 95% Wilson interval; only the held-out one decides
    assert "tune (400 turns, 800 items; tuning half: for reference, never decides trust):" in out
    assert "held-out (160 turns, 360 items; decides trust):" in out
    low, high = formulas.wilson_interval(280, 360)
    assert re.search(CI.format("used", "77\\.8") + r"\s+BELOW 85%", out)
    assert f"95% CI {low * 100:5.1f}-{high * 100:5.1f}%" in out  # 73.2-81.7%
    assert validation.details["splits"]["held-out"]["used"]["ci95"] == [low, high]


def test_a_small_or_contradiction_free_held_out_set_confers_no_trust(tmp_path, settings, capsys):
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    call_command("validate_judge", str(write(tmp_path, held_out_turns(40))), "--judge", "embedding")
    assert "only 90 held-out items (needs 300)" in capsys.readouterr().out
    assert judge_trust(judge_name="embedding").trusted is False
    no_contradictions = [
        {"turn_id": f"h{k:04d}", "split": "held-out", "user_prompt": "p", "assistant_response": "r",
         "items": [item(f"[on] [used] a {k}", True, True, False), item(f"off {k}", False, False, False)]}
        for k in range(200)
    ]  # fmt: skip
    call_command("validate_judge", str(write(tmp_path, no_contradictions)), "--judge", "embedding")
    assert "only 0 held-out items labelled contradicted (needs 40)" in capsys.readouterr().out
    assert judge_trust(judge_name="embedding").trusted is False


def test_a_validation_recorded_under_the_old_whole_file_rule_confers_no_trust():
    JudgeValidation.objects.create(
        judge_name="embedding",
        source="quality/fixtures/judge_validation.jsonl",
        source_sha256="0" * 64,
        turns=53,
        items=148,
        on_topic_agreement=0.905,
        used_agreement=0.872,
        contradicted_agreement=0.899,
        trusted=True,
    )
    assert judge_trust(judge_name="embedding").trusted is False


def test_wilson_interval():
    assert formulas.wilson_interval(50, 100) == (pytest.approx(0.4038, abs=1e-4), pytest.approx(0.5962, abs=1e-4))
    assert formulas.wilson_interval(0, 20)[0] == 0.0 and formulas.wilson_interval(20, 20)[1] == 1.0
    assert formulas.wilson_interval(20, 20)[0] == pytest.approx(0.8389, abs=1e-4)
    assert formulas.wilson_interval(0, 0) == (0.0, 1.0)


def test_several_files_are_one_set_and_turn_ids_must_not_repeat(tmp_path, settings, capsys):
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = write(tmp_path / "a", tune_turns(2))
    second = write(tmp_path / "b", held_out_turns(3))
    call_command("validate_judge", str(first), str(second), "--judge", "embedding")
    out = capsys.readouterr().out
    assert "on 5 turns, 10 items:" in out and "held-out (3 turns, 6 items" in out
    with pytest.raises(CommandError, match="appears twice"):
        call_command("validate_judge", str(first), str(first))


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
            "items": [item(f"[on] plain {n}", True, False, n == 0)],  # 1 contradiction in 10: judge never says so
        }
        for n in range(10)
    ]
    call_command("validate_judge", str(write(tmp_path, rare)))
    out = capsys.readouterr().out
    assert re.search(CI.format("contradicted", "90\\.0") + r"\s+ok", out)
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


def test_shipped_held_out_file():
    """200+ realistic held-out turns, 40+ contradictions, labelled by the written rules, never tuned on."""
    turns, _ = judge_validation_load(path=HELD_OUT)
    tuning, _ = judge_validation_load(path=SHIPPED)
    assert len(turns) >= 200
    assert {turn.split for turn in turns} == {"held-out"}
    assert not {turn.turn_id for turn in turns} & {turn.turn_id for turn in tuning}
    items = [item for turn in turns for item in turn.items]
    assert sum(item.labels["contradicted"] for item in items) >= 40
    assert 0 < sum(item.labels["used"] for item in items) < len(items)
    assert 0 < sum(item.labels["on_topic"] for item in items) < len(items)
    for item in items:  # the labelling rules of quality/fixtures/README.md
        assert item.labels["on_topic"] or not (item.labels["used"] or item.labels["contradicted"]), item.id
        assert not (item.labels["used"] and item.labels["contradicted"]), item.id  # rejected is not used
    assert len({turn.assistant_response for turn in turns}) == len(turns)  # no copied responses


def test_a_labelled_turn_holding_a_line_separator_is_one_line(tmp_path):
    """A prompt pasted from a PDF keeps its U+2028 unescaped when written with ensure_ascii=False."""
    turns = [dict(TURNS[0], user_prompt="first line\u2028second line"), TURNS[1]]
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(json.dumps(turn, ensure_ascii=False) for turn in turns) + "\n", encoding="utf-8")
    loaded, _ = judge_validation_load(path=path)
    assert [turn.turn_id for turn in loaded] == ["a", "b"]
    assert loaded[0].user_prompt == "first line\u2028second line"
