"""manage.py quality report|rollup|expire|flag-unverified."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from quality.models import QualityRollup, TurnLog
from tests.quality_support import make_thought, make_turn

pytestmark = pytest.mark.django_db


def test_report_prints_the_metrics_table(space, dev, capsys):
    now = timezone.now()
    t = [make_thought(space, f"t{n}") for n in range(4)]
    make_turn(
        dev.agent,
        now,
        [(t[0], True, True, False), (t[1], True, False, False), (t[2], True, True, False), (t[3], False, False, True)],
    )
    call_command("quality", "rollup")
    capsys.readouterr()
    call_command("quality", "report", "--days", "3")
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "Quality of space default (whole space), rolling 7 days" in lines[0]
    assert "judge embedding: NOT trusted (never validated)" in out
    row = next(line for line in lines if line.startswith("on-topic rate"))
    assert row.split()[2:] == ["75.0%", ">=80%", "NO", "3", "/", "4"]
    row = next(line for line in lines if line.startswith("usage rate"))
    assert row.split()[2:5] == ["50.0%", ">=50%", "yes"]
    row = next(line for line in lines if line.startswith("contradiction rate"))
    assert row.split()[2:5] == ["25.0%", "<=5%", "NO"]
    row = next(line for line in lines if line.startswith("discovery rate"))
    assert row.split()[2:] == ["-", ">=70%", "-", "0", "/", "0", "1"]  # one contradiction pending
    history = lines[lines.index("daily history (rolling 7-day rates ending that day)") + 2 :]
    assert len(history) == 3 and history[-1].split()[:3] == [now.date().isoformat(), "1", "4"]

    call_command("quality", "report", "--agent", "dev-1", "--days", "1")
    assert "(agent dev-1)" in capsys.readouterr().out
    with pytest.raises(CommandError, match="No agent 'ghost'"):
        call_command("quality", "report", "--agent", "ghost")
    with pytest.raises(CommandError, match="between 1 and 365"):
        call_command("quality", "report", "--days", "0")
    with pytest.raises(CommandError, match="No space"):
        call_command("quality", "report", "--space", "nowhere")


def test_rollup_expire_and_flag_commands(space, dev, capsys, settings):
    now = timezone.now()
    a = make_thought(space, "a")
    make_turn(dev.agent, now - dt.timedelta(days=40), [(a, True, False, True)])
    call_command("quality", "rollup", "--days", "45")
    assert "Recomputed 45 day(s)" in capsys.readouterr().out
    assert QualityRollup.objects.filter(day=(now - dt.timedelta(days=40)).date(), agent_name="").exists()
    call_command("quality", "flag-unverified")
    assert "Flagged 1 thought(s) unverified." in capsys.readouterr().out
    settings.TURN_LOG_RETENTION_DAYS = 30
    with pytest.raises(CommandError, match="retention"):
        call_command("quality", "rollup", "--days", "45")
    call_command("quality", "expire")
    assert "Deleted 1 turn log(s)" in capsys.readouterr().out
    assert TurnLog.objects.count() == 0
