"""manage.py validate_judge FILE.jsonl [--judge embedding|llm]: agreement per metric with hand labels."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from core.errors import ApplicationError
from quality import formulas
from quality.services.scoring import judge_resolve
from quality.services.validation import judge_validate, judge_validation_load


class Command(BaseCommand):
    help = (
        "Ask a judge about every hand-labelled turn of FILE.jsonl, print its agreement per metric and record it. "
        "Ranking uses a judge's verdicts only if its latest validation reached 85% on every metric."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="labelled turns, JSON Lines (see quality/fixtures/README.md)")
        parser.add_argument("--judge", choices=["embedding", "llm"], default=None, help="default: QUALITY_JUDGE")

    def handle(self, *args, file: Path, judge: str | None, **options):
        try:
            turns, sha256 = judge_validation_load(path=file)
            name = judge or settings.QUALITY_JUDGE
            the_judge = judge_resolve(name)
            with tqdm(total=len(turns), desc=f"judging ({name})", unit="turn", disable=None) as bar:
                validation = judge_validate(
                    turns=turns,
                    judge=the_judge,
                    judge_name=name,
                    source=str(file),
                    source_sha256=sha256,
                    on_turn=bar.update,
                )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        threshold = formulas.JUDGE_MIN_AGREEMENT
        self.stdout.write(f"Judge {validation.judge_name} on {validation.turns} turns, {validation.items} items:")
        for metric in formulas.JUDGE_METRICS:
            value = getattr(validation, f"{metric}_agreement")
            counts = validation.details["confusion"][metric]
            mark = "ok" if value >= threshold else "BELOW 85%"
            positives = counts["tp"] + counts["fn"]
            self.stdout.write(
                f"  {metric:13} {value * 100:5.1f}%  {mark:10} "
                f"(tp {counts['tp']}, fp {counts['fp']}, fn {counts['fn']}, tn {counts['tn']}; "
                f"found {counts['tp']} of {positives} labelled true)"
            )
            if value >= threshold and positives and counts["tp"] == 0:
                # Agreement on a rare class can reach the threshold by always answering "no".
                self.stdout.write(
                    f"  warning: {metric} agreement comes from answering no: it found none of the {positives} cases."
                )
        verdict = "TRUSTED for ranking" if validation.trusted else "NOT trusted: ranking uses explicit feedback only"
        self.stdout.write(f"Result: {verdict} (>= {threshold * 100:.0f}% on every metric: {validation.trusted}).")
