"""manage.py validate_judge FILE.jsonl [--judge embedding|llm] [--split tune|held-out]: agreement per
metric with hand labels. ``--split`` runs one half of the file (``quality.services.validation.turn_split``)
and does not record it: thresholds are tuned on one half and checked on the other."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from core.errors import ApplicationError
from quality import formulas
from quality.services.scoring import judge_resolve
from quality.services.validation import SPLITS, judge_validate, judge_validation_load, turn_split


class Command(BaseCommand):
    help = (
        "Ask a judge about every hand-labelled turn of FILE.jsonl, print its agreement per metric and record it. "
        "Ranking uses a judge's verdicts only if its latest validation reached 85% on every metric."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="labelled turns, JSON Lines (see quality/fixtures/README.md)")
        parser.add_argument("--judge", choices=["embedding", "llm"], default=None, help="default: QUALITY_JUDGE")
        parser.add_argument(
            "--split",
            choices=SPLITS,
            default=None,
            help="only the turns of this half (odd turn number = tune, even = held-out); printed, not recorded",
        )

    def handle(self, *args, file: Path, judge: str | None, split: str | None = None, **options):
        try:
            turns, sha256 = judge_validation_load(path=file)
            if split is not None:
                turns = [turn for turn in turns if turn_split(turn.turn_id) == split]
                if not turns:
                    raise CommandError(f"No turn of {file} falls in the {split} half.")
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
                    record=split is None,
                )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        threshold = formulas.JUDGE_MIN_AGREEMENT
        half = f" ({split} half, not recorded)" if split else ""
        self.stdout.write(f"Judge {validation.judge_name} on {validation.turns} turns, {validation.items} items{half}:")
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
        prompt_only = validation.details["on_topic_prompt_only"]
        self.stdout.write(
            f"  (on_topic from the prompt alone, before 'used or contradicted means on topic': "
            f"{(prompt_only['tp'] + prompt_only['tn']) / validation.items * 100:.1f}%)"
        )
        if split:
            self.stdout.write("Result not recorded: trust is decided by a run on the whole file.")
            return
        verdict = "TRUSTED for ranking" if validation.trusted else "NOT trusted: ranking uses explicit feedback only"
        self.stdout.write(f"Result: {verdict} (>= {threshold * 100:.0f}% on every metric: {validation.trusted}).")
