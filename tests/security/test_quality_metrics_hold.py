"""Attacks on the quality loop's read side and on judge validation: the metrics endpoint's parameters, and
``manage.py validate_judge`` given a hostile labels file."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from quality.models import JudgeValidation, QualityRollup
from quality.services import rollups
from quality.services.scoring import turn_score
from tests.quality_support import ScriptedJudge, make_thought, make_turn, new_session
from tests.web_support import ada  # noqa: F401 - a fixture (pytest finds it by name)

pytestmark = pytest.mark.django_db
METRICS_URL = "/api/v1/quality/metrics"


def item(content: str, on_topic: bool, used: bool, contradicted: bool) -> dict:
    return {"content": content, "on_topic": on_topic, "used": used, "contradicted": contradicted}


def write_lines(tmp_path: Path, lines: list[str], name: str = "labels.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("days", ["0", "-1", "1000000000", "1e3", "NaN", "366", "30.5", "[]"])
def test_metrics_days_out_of_range_or_odd_is_a_400(dev, days):
    """Holds: ``days`` outside 1..365 or not an integer is refused with 400, never a 500 nor a year-long
    history walk."""
    response = dev.get(METRICS_URL, {"days": days})
    assert response.status_code == 400, (response.status_code, response.content[:300])


@pytest.mark.parametrize("agent", ["*", "%", "dev%", "_ev", ".*", "DEV"])
def test_metrics_agent_name_with_wildcards_is_not_a_pattern(dev, agent):
    """Holds: the agent filter is an exact name: wildcards name no agent (404), they don't match one."""
    response = dev.get(METRICS_URL, {"agent": agent})
    assert response.status_code in (404, 400), (response.status_code, response.content[:300])


def test_metrics_of_another_spaces_agent_is_a_404(dev, other_space):
    """Holds: an agent of another space is unknown here: 404, never that space's figures."""
    from tests.conftest import make_agent_client

    make_agent_client(space=other_space, name="spy", role="dev")
    response = dev.get(METRICS_URL, {"agent": "spy"})
    assert response.status_code == 404, response.content[:300]


def test_a_deeply_nested_labels_line_is_refused_with_its_line(tmp_path, settings):
    """A labels line nested 100,000 deep is bad input: the command must refuse it naming the line
    (``CommandError``, nothing recorded), not die in a RecursionError traceback from ``json.loads``."""
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    deep = "[" * 100_000 + "]" * 100_000
    line = '{"turn_id": "a", "user_prompt": "p", "assistant_response": "r", "tool_calls": ' + deep + ', "items": []}'
    with pytest.raises(CommandError, match="line 1"):
        call_command("validate_judge", str(write_lines(tmp_path, [line])))
    assert JudgeValidation.objects.count() == 0


def test_a_labels_file_not_in_utf8_is_refused(tmp_path, settings):
    """A labels file that is not UTF-8 (a Latin-1 export) must be refused as a bad labelled file
    (``CommandError``), not crash with a UnicodeDecodeError traceback."""
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"turn_id": "a", "user_prompt": "caf\xe9", "assistant_response": "r", "items": []}\n')
    with pytest.raises(CommandError):
        call_command("validate_judge", str(path))
    assert JudgeValidation.objects.count() == 0


def _turn(client, session_id: str, turn_id: str, **feedback):
    response = client.post(
        "/api/v1/turns",
        {"session_id": session_id, "turn_id": turn_id, "user_prompt": "Deploy staging.",
         "assistant_response": "I restarted the workers.", **feedback},
        format="json",
    )  # fmt: skip
    assert response.status_code == 202, response.content
    turn_score(turn_log_id=response.json()["turn_log_id"], judge=ScriptedJudge())


@pytest.mark.parametrize("query", ["days=1000000000", "days=-1", "days=NaN", "days=1e3", "agent=spy", "agent=%25"])
def test_dashboard_odd_parameters_are_refused_without_other_spaces_figures(client, ada, space, other_space, query):  # noqa: F811
    """Holds: the dashboard's ``days`` is one of 14/30/90 and ``agent`` one of the space's agents with
    figures: an odd value, or another space's agent, draws the page without error (no 500) and without that
    agent's figures."""
    QualityRollup.objects.create(
        day=timezone.now().date(), space=other_space, agent_name="spy", computed_at=timezone.now(),
        items=10, on_topic=10, used=10,
    )  # fmt: skip
    response = client.get(f"/quality/?{query}")
    assert response.status_code in (200, 400), response.status_code
    assert b"spy" not in response.content or query == "agent=spy"
    assert "100.0%" not in response.content.decode()


def test_one_agent_naming_the_same_shown_thoughts_turn_after_turn_does_not_set_the_spaces_rates(agent_factory, space):
    """Attack: an honest agent's turn was shown 10 thoughts and used 1 (10%). Another agent, shown 5
    thoughts once, logs 40 turns of one session that each name the same 5 as injected and used. Counted
    once per turn, the space's usage rate read 95.7% (201 of 210 items) and "meets target".
    Instead: a thought counts once per session and day, so the 40 turns add 5 items, not 200."""
    honest, mallory = agent_factory("dev").agent, agent_factory("qa").agent
    thoughts = [make_thought(space, f"Fact number {i} about the deploy pipeline.") for i in range(10)]
    now = timezone.now()
    make_turn(honest, now, [(t, True, i == 0, False) for i, t in enumerate(thoughts)])
    session = new_session()
    for n in range(40):
        make_turn(mallory, now, [(t, True, True, False) for t in thoughts[:5]], session_id=session, turn_id=f"t{n}")
    rollups.quality_rollup_day(day=now.date(), now=now)
    row = QualityRollup.objects.get(space=space, day=now.date(), agent_name="")
    assert (row.items, row.used) == (15, 6), (row.items, row.used)


def _json_lines(turns: list[dict]) -> list[str]:
    import json

    return [json.dumps(turn) for turn in turns]


def test_two_labelled_items_copied_under_many_turn_ids_confer_no_trust(tmp_path, settings, capsys):
    """Attack: a labels file of three items (one used, one contradicted, one off topic), copied
    under 160 held-out turn ids, reads as 320 held-out items with 160 contradictions: without the rule the
    judge that gets those three items right is trusted for ranking. Instead: an item counts once however many
    turns repeat it (the prompt, the response and the excerpt, case and spacing aside), so the file holds
    3 items and confers no trust."""
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    copies = [
        {"turn_id": f"h{k:04d}", "split": "held-out", "user_prompt": "p", "assistant_response": "r",
         "items": [item("[on] [used] fact", True, True, False), item("[on] [contra] stale  FACT", True, False, True),
                   item("off", False, False, False)]}
        for k in range(160)
    ]  # fmt: skip
    for k, turn in enumerate(copies):
        if k % 2:
            turn["items"][1]["content"] = "[on] [contra] Stale fact"  # the same item, re-cased and re-spaced
    call_command("validate_judge", str(write_lines(tmp_path, _json_lines(copies))), "--judge", "embedding")
    out = capsys.readouterr().out
    assert "NOT trusted" in out and "only 3 held-out items" in out, out[-600:]
    assert JudgeValidation.objects.get().trusted is False


def test_a_held_out_item_copied_from_the_tuning_half_does_not_count(tmp_path, settings, capsys):
    """Attack: the tuning half's items copied into the held-out half under new turn ids: the judge is
    graded on what it was tuned on. Instead: a held-out item that is also a tuning item does not count."""
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    tune, held = [], []
    for k in range(160):
        items = [item(f"[on] [used] fact {k}", True, True, False), item(f"[on] [contra] stale {k}", True, False, True),
                 item(f"off {k}", False, False, False)]  # fmt: skip
        tune.append({"turn_id": f"t{k:04d}", "split": "tune", "user_prompt": "p", "assistant_response": "r",
                     "items": items})  # fmt: skip
        held.append({"turn_id": f"h{k:04d}", "split": "held-out", "user_prompt": "p", "assistant_response": "r",
                     "items": items})  # fmt: skip
    call_command("validate_judge", str(write_lines(tmp_path, _json_lines(tune + held))), "--judge", "embedding")
    out = capsys.readouterr().out
    assert "NOT trusted" in out and "only 0 held-out items" in out, out[-600:]


@pytest.mark.parametrize(
    ("metric", "labels"),
    [
        ("used", (True, False, False)),  # no item labelled used: a judge that never says "used" agrees 100%
        ("on_topic", (True, True, False)),  # every item on topic: a judge that always says "on topic" agrees
    ],
)
def test_a_held_out_set_without_both_answers_of_a_metric_confers_no_trust(tmp_path, settings, capsys, metric, labels):
    """Attack: a held-out set in which no item is labelled ``used`` (or none off topic) grades a judge
    that never says "used" (always says "on topic") at 100% on that metric: without the rule it is
    trusted, and scoring then counts no use of anything. Instead: each metric needs enough held-out items
    labelled true and enough labelled false."""
    settings.QUALITY_JUDGE_FACTORY = "tests.quality_support.marker_judge_factory"
    on_topic, used, _ = labels
    marks = ("[on] " if on_topic else "") + ("[used] " if used else "")
    second = "[on] second" if metric == "on_topic" else "second"
    turns = [
        {"turn_id": f"h{k:04d}", "split": "held-out", "user_prompt": "p", "assistant_response": "r",
         "items": [item(f"{marks}first {k}", on_topic, used, False),
                   item(f"[on] [contra] stale {k}", True, False, True),
                   item(f"{second} {k}", metric == "on_topic", False, False)]}
        for k in range(160)
    ]  # fmt: skip
    call_command("validate_judge", str(write_lines(tmp_path, _json_lines(turns))), "--judge", "embedding")
    out = capsys.readouterr().out
    assert "NOT trusted" in out, out[-600:]
    assert JudgeValidation.objects.get().trusted is False
