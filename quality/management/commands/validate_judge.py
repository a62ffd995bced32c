"""manage.py validate_judge FILE.jsonl [FILE.jsonl ...] [--judge embedding|llm] [--split tune|held-out]:
agreement per metric with hand labels, per half (tune / held-out) with a 95% Wilson interval.

Trust is decided on the held-out turns only (``quality.services.validation.trust_decide``): the tune
half, whose turns thresholds were chosen on, is printed for reference and can't make a judge trusted.
``--split`` runs one half and does not record it."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from api.errors import ApplicationError
from quality import formulas
from quality.services.scoring import judge_resolve
from quality.services.validation import SPLITS, judge_validate, judge_validation_load_many

DEFAULT_FILES = ("quality/fixtures/judge_validation.jsonl", "quality/fixtures/judge_heldout.jsonl")


class Command(BaseCommand):
    help = (
        "Ask a judge about every hand-labelled turn of the files, print its agreement per metric and half "
        "(tune / held-out, 95% Wilson interval) and record it. Ranking uses a judge's verdicts only if its latest "
        f"validation reached 85% on every metric on at least {formulas.JUDGE_MIN_HELDOUT_ITEMS} distinct held-out "
        f"items, {formulas.JUDGE_MIN_HELDOUT_EACH_ANSWER} of them labelled true and as many false on every metric."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "files",
            type=Path,
            nargs="*",
            help=f"labelled turns, JSON Lines (see quality/fixtures/README.md); default: {' '.join(DEFAULT_FILES)}",
        )
        parser.add_argument("--judge", choices=["embedding", "llm"], default=None, help="default: QUALITY_JUDGE")
        parser.add_argument(
            "--split",
            choices=SPLITS,
            default=None,
            help="only the turns of this half (a line's 'split', else odd turn number = tune); printed, not recorded",
        )

    def handle(self, *args, files: list[Path], judge: str | None, split: str | None = None, **options):
        if not files:
            files = [Path(settings.BASE_DIR) / name for name in DEFAULT_FILES]
        try:
            turns, sha256 = judge_validation_load_many(paths=files)
            if split is not None:
                turns = [turn for turn in turns if turn.split == split]
                if not turns:
                    raise CommandError(f"No turn of {' '.join(map(str, files))} falls in the {split} half.")
            name = judge or settings.QUALITY_JUDGE
            the_judge = judge_resolve(name)
            with tqdm(total=len(turns), desc=f"judging ({name})", unit="turn", disable=None) as bar:
                validation = judge_validate(
                    turns=turns,
                    judge=the_judge,
                    judge_name=name,
                    source=" + ".join(str(file) for file in files),
                    source_sha256=sha256,
                    on_turn=bar.update,
                    record=split is None,
                )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        threshold = formulas.JUDGE_MIN_AGREEMENT
        half = f" ({split} half, not recorded)" if split else ""
        self.stdout.write(f"Judge {validation.judge_name} on {validation.turns} turns, {validation.items} items{half}:")
        skipped = validation.details["skipped"]
        if skipped["repeated"] or skipped["held_out_in_tune"]:
            self.stdout.write(
                f" not asked: {skipped['repeated']} items repeating an earlier one (an item counts once), "
                f"{skipped['held_out_in_tune']} held-out items that are also tuning items (the judge was tuned on them)"
            )
        splits = validation.details["splits"]
        for part in (*SPLITS, "all"):
            if not splits[part]["on_topic"]["items"]:
                continue
            role = {
                "tune": "tuning half: for reference, never decides trust",
                "held-out": "decides trust",
                "all": "whole set: for reference",
            }[part]
            self.stdout.write(
                f" {part} ({splits[part]['turns']} turns, {splits[part]['on_topic']['items']} items; {role}):"
            )
            for metric in formulas.JUDGE_METRICS:
                figures = splits[part][metric]
                value, (low, high) = figures["agreement"], figures["ci95"]
                counts = splits[part]["confusion"][metric]
                mark = "ok" if value >= threshold else "BELOW 85%"
                self.stdout.write(
                    f"  {metric:13} {value * 100:5.1f}%  95% CI {low * 100:5.1f}-{high * 100:5.1f}%  {mark:10} "
                    f"(tp {counts['tp']}, fp {counts['fp']}, fn {counts['fn']}, tn {counts['tn']}; "
                    f"found {figures['found']} of {figures['labelled_true']} labelled true)"
                )
                if value >= threshold and figures["labelled_true"] and figures["found"] == 0:
                    # Agreement on a rare class can reach the threshold by always answering "no".
                    self.stdout.write(
                        f"  warning: {metric} agreement comes from answering no: "
                        f"it found none of the {figures['labelled_true']} cases."
                    )
        prompt_only = validation.details["on_topic_prompt_only"]
        if validation.items:
            self.stdout.write(
                f"  (on_topic from the prompt alone, before 'used or contradicted means on topic', all turns: "
                f"{(prompt_only['tp'] + prompt_only['tn']) / validation.items * 100:.1f}%)"
            )
        if split:
            self.stdout.write("Result not recorded: trust is decided by a run over the held-out turns.")
            return
        if validation.trusted:
            verdict = "TRUSTED for ranking"
        else:
            verdict = "NOT trusted: ranking uses explicit feedback only (and the LLM judge, if validated)"
        self.stdout.write(f"Result: {verdict}: {validation.details['trust_reason']}.")
