"""manage.py reembed --missing | --all [--batch-size N] [--restart]

``--missing`` embeds thoughts without a vector or embedded by another model (after changing
``EMBEDDING_MODEL``); it resumes by nature, since finished thoughts leave the set. ``--all``
re-embeds every thought in id order and keeps a checkpoint in ``$COLONY_DATA_DIR``, so a run that
was interrupted continues where it stopped (``--restart`` ignores the checkpoint). The checkpoint is
replaced whole (a temporary file renamed over it); one that can't be read is ignored, with a warning.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q
from tqdm import tqdm

from brain import embedding as embedder
from brain.models import Thought
from brain.services.thoughts import thoughts_embed_batch


def checkpoint_path() -> Path:
    return Path(settings.COLONY_DATA_DIR) / "reembed-all.json"


def _checkpoint_write(path: Path, state: dict) -> None:
    """Write ``state`` to ``path`` whole: to a new file beside it, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".partial")
    try:
        with open(descriptor, "w", encoding="utf-8") as out:
            out.write(json.dumps(state))
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def _checkpoint_valid(state: dict) -> bool:
    done = state.get("done", 0)
    if not isinstance(done, int) or isinstance(done, bool) or done < 0:
        return False
    after = state.get("after")
    if after is None:
        return True
    try:
        uuid.UUID(after)
    except (TypeError, ValueError, AttributeError):
        return False
    return True


#: The most thoughts one batch embeds (one model call, one transaction).
BATCH_SIZE_MAX = 10_000


class Command(BaseCommand):
    help = "Compute thought embeddings: --missing (no vector or another model) or --all, with a progress bar."

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--missing", action="store_true", help="thoughts without a vector of the current model")
        which.add_argument("--all", action="store_true", help="every thought (resumes an interrupted run)")
        parser.add_argument("--batch-size", type=int, default=64)
        parser.add_argument("--restart", action="store_true", help="with --all: ignore the checkpoint")

    def handle(self, *args, missing, all, batch_size, restart, **options):
        if not 1 <= batch_size <= BATCH_SIZE_MAX:
            raise CommandError(f"--batch-size must be 1 to {BATCH_SIZE_MAX} (one model call embeds a batch).")
        try:
            done = self._missing(batch_size) if missing else self._all(batch_size, restart)
        except embedder.EmbeddingError as exc:
            raise CommandError(f"{exc} Fix the model and run the command again; it resumes.") from exc
        self.stdout.write(f"Embedded {done} thought(s) with {embedder.current_model_label()}.")

    def _progress(self, total: int, initial: int = 0) -> tqdm:
        return tqdm(total=total, initial=initial, unit="thought", file=self.stderr, dynamic_ncols=True)

    def _missing(self, batch_size: int) -> int:
        label = embedder.current_model_label()
        pending = Thought.objects.filter(Q(embedding__isnull=True) | ~Q(embedding_model=label))
        done = 0
        with self._progress(pending.count()) as bar:
            while ids := [str(i) for i in pending.order_by("id").values_list("id", flat=True)[:batch_size]]:
                written = thoughts_embed_batch(thought_ids=ids)
                done += written
                bar.update(written)
        return done

    def _checkpoint_read(self, path: Path) -> dict:
        """The checkpoint's state, or {} (start over, said on stderr) when it is not what this command
        writes: an object with ``after`` (a thought id), ``model`` and ``done`` (a count)."""
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = None
        if not (isinstance(state, dict) and _checkpoint_valid(state)):
            self.stderr.write(f"The checkpoint {path} can't be read; starting over.")
            return {}
        return state

    def _all(self, batch_size: int, restart: bool) -> int:
        label = embedder.current_model_label()
        path = checkpoint_path()
        state = {}
        if path.exists() and not restart:
            state = self._checkpoint_read(path)
            if state.get("model") != label:
                state = {}
        after = state.get("after")
        done_before = state.get("done", 0)
        if after:
            self.stdout.write(f"Resuming after thought {after} ({done_before} done before); --restart starts over.")
        total = Thought.objects.count()
        done = 0
        with self._progress(total, initial=min(done_before, total)) as bar:
            while True:
                batch = Thought.objects.order_by("id")
                if after:
                    batch = batch.filter(id__gt=after)
                ids = [str(i) for i in batch.values_list("id", flat=True)[:batch_size]]
                if not ids:
                    break
                written = thoughts_embed_batch(thought_ids=ids)
                done += written
                after = ids[-1]
                _checkpoint_write(path, {"after": after, "model": label, "done": done_before + done})
                bar.update(written)
        path.unlink(missing_ok=True)
        return done
