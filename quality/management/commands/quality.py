"""manage.py quality report [--space SLUG] [--agent NAME] [--days N] | rollup [--days N] | expire | flag-unverified"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from tqdm import tqdm

from api.errors import ApplicationError
from core import services as core_services
from core.choices import DEFAULT_SPACE_SLUG
from core.management.arguments import arguments_refuse_unstorable
from quality.selectors import quality_metrics
from quality.services import rollups

LABELS = {
    "on_topic_rate": "on-topic rate",
    "usage_rate": "usage rate",
    "contradiction_rate": "contradiction rate",
    "discovery_rate": "discovery rate",
    "false_demotion_rate": "false demotion rate",
}
SHORT = {
    "on_topic_rate": "on-topic",
    "usage_rate": "usage",
    "contradiction_rate": "contra",
    "discovery_rate": "discovery",
    "false_demotion_rate": "false-dem",
}
FEEDBACK = {
    "judge_and_explicit": "judge verdicts and explicit feedback",
    "explicit_only": "explicit feedback only",
}


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


class Command(BaseCommand):
    help = "The quality loop: print the metrics (report), recompute rollups, expire turn logs, flag unverified."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        report = sub.add_parser("report", help="the four metrics (rolling 7 days), targets and daily history")
        report.add_argument("--space", default=DEFAULT_SPACE_SLUG)
        report.add_argument("--agent", default=None, help="one agent's metrics instead of the whole space")
        report.add_argument("--days", type=int, default=14, help="days of history (1-365)")
        rollup = sub.add_parser("rollup", help="recompute daily rollups now (default: the recent days)")
        rollup.add_argument("--days", type=int, default=None, help="recompute the last N days (within retention)")
        sub.add_parser("expire", help="delete turn logs older than TURN_LOG_RETENTION_DAYS")
        sub.add_parser("flag-unverified", help="flag thoughts with a contradiction unresolved for 14 days")

    def handle(self, *args, action, **options):
        arguments_refuse_unstorable(options)
        try:
            getattr(self, "_" + action.replace("-", "_"))(**options)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc

    def _report(self, space, agent, days, **_):
        if not 1 <= days <= 365:
            raise CommandError("--days must be between 1 and 365.")
        data = quality_metrics(space=core_services.space_get(slug=space), agent_name=agent, days=days)
        who = f"agent {agent}" if agent else "whole space"
        self.stdout.write(f"Quality of space {data['space']} ({who}), rolling {data['window_days']} days")
        self.stdout.write(
            f"turns {data['turns']} (pending scoring {data['turns_pending']}), items {data['items']}, "
            f"rolled up at {data['rolled_up_at'] or 'never'}"
        )
        judge = data["judge"]
        validation = judge["validation"]
        checked = (
            "never validated"
            if validation is None
            else "validated "
            + validation["at"][:10]
            + ": "
            + ", ".join(f"{metric} {percent(value)}" for metric, value in validation["agreement"].items())
        )
        self.stdout.write(
            f"judge {judge['name']}: {'trusted' if judge['trusted'] else 'NOT trusted'} ({checked}); "
            f"ranking learns from {FEEDBACK[judge['ranking_feedback']]}; "
            f"quality ranking {'on' if data['ranking_enabled'] else 'off'}"
        )
        self.stdout.write("")
        self.stdout.write(f"{'metric':22} {'current':>8} {'target':>8} {'meets':>6} {'n / d':>12} {'pending':>8}")
        for name, metric in data["metrics"].items():
            target = "-" if metric["target"] is None else f"{metric['comparison']}{metric['target'] * 100:.0f}%"
            meets = {True: "yes", False: "NO", None: "-"}[metric["meets_target"]]
            pending = str(metric["pending"]) if "pending" in metric else ""
            fraction = f"{metric['numerator']} / {metric['denominator']}"
            self.stdout.write(
                f"{LABELS[name]:22} {percent(metric['value']):>8} {target:>8} {meets:>6} {fraction:>12} {pending:>8}"
            )
        self.stdout.write("")
        self.stdout.write("daily history (rolling 7-day rates ending that day)")
        header = f"{'day':10} {'turns':>6} {'items':>6} " + " ".join(f"{SHORT[name]:>9}" for name in SHORT)
        self.stdout.write(header)
        for entry in data["history"]:
            rates = " ".join(f"{percent(entry['rolling'][name]):>9}" for name in SHORT)
            self.stdout.write(f"{entry['day']:10} {entry['counts']['turns']:>6} {entry['counts']['items']:>6} {rates}")

    def _rollup(self, days, **_):
        now = timezone.now()
        if days is None:
            wanted = rollups.rollup_recompute_days(now=now)
        else:
            retention = settings.TURN_LOG_RETENTION_DAYS
            if not 1 <= days <= retention:
                raise CommandError(f"--days must be between 1 and the retention ({retention}).")
            wanted = [now.date() - dt.timedelta(days=n) for n in range(days - 1, -1, -1)]
        rows = 0
        for day in tqdm(wanted, desc="rolling up", unit="day", disable=None):
            rows += rollups.quality_rollup_day(day=day, now=now)
        self.stdout.write(f"Recomputed {len(wanted)} day(s): {rows} rollup row(s).")

    def _expire(self, **_):
        self.stdout.write(f"Deleted {rollups.turn_logs_expire()} turn log(s) past retention.")

    def _flag_unverified(self, **_):
        self.stdout.write(f"Flagged {rollups.thoughts_flag_unverified()} thought(s) unverified.")
