"""Embedding backends (ONNX Runtime and torch behind one function), the query cache, and the notice
that stored vectors need re-embedding after the embedder changed. Real model throughout."""

from __future__ import annotations

import json
import logging
import math

import pytest
from django.test import override_settings

from brain import embedding
from brain.models import Thought

SENTENCES = [
    "The deploy pipeline runs migrations before restarting the Celery workers.",
    "how do deploys work?",
    "Redis is the Celery broker; when it is down locally, kombu's filesystem broker takes over.",
    "Gerhard Quiring (joint venture) is the coach, not Thomas.",
    "ok",
    "The HNSW index on brain_thought.embedding uses vector_cosine_ops with m=16 and ef_construction=64. " * 8,
]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture(autouse=True)
def fresh_cache():
    embedding.query_cache.clear()
    yield
    embedding.query_cache.clear()


def _vectors(backend: str, quantize: str = "none") -> list[list[float]]:
    with override_settings(EMBEDDING_BACKEND=backend, EMBEDDING_QUANTIZE=quantize):
        batch = embedding.embed_many(SENTENCES)
        singles = [embedding.embed(text) for text in SENTENCES]
    return batch, singles


def test_onnx_fp32_gives_the_torch_vectors_on_real_sentences():
    torch_batch, torch_singles = _vectors("torch")
    onnx_batch, onnx_singles = _vectors("onnx")
    for i, text in enumerate(SENTENCES):
        assert len(onnx_batch[i]) == 384
        assert cosine(onnx_batch[i], torch_batch[i]) >= 0.99, text
        assert cosine(onnx_singles[i], torch_singles[i]) >= 0.99, text
        # A padded batch and a single text agree too (padding is masked out of the pooling).
        assert cosine(onnx_batch[i], onnx_singles[i]) >= 0.999, text
    # Normalised: cosine is the dot product.
    assert abs(sum(x * x for x in onnx_batch[0]) - 1.0) < 1e-4
    # Related sentences stay closer than unrelated ones.
    assert cosine(onnx_batch[0], onnx_batch[1]) > cosine(onnx_batch[0], onnx_batch[3])


def test_int8_stays_close_to_fp32_and_has_its_own_label():
    fp32, _ = _vectors("onnx")
    int8, _ = _vectors("onnx", "int8")
    for a, b, text in zip(fp32, int8, SENTENCES, strict=True):
        assert cosine(a, b) >= 0.8, text  # ~0.96 on sentences, ~0.84 on a bare 'ok'
    with override_settings(EMBEDDING_BACKEND="onnx", EMBEDDING_QUANTIZE="int8"):
        assert embedding.current_model_label() == "all-MiniLM-L6-v2 int8"
    with override_settings(EMBEDDING_BACKEND="torch", EMBEDDING_QUANTIZE="int8"):  # torch ignores it
        assert embedding.current_model_label() == "all-MiniLM-L6-v2"
    with override_settings(EMBEDDING_BACKEND="onnx", EMBEDDING_QUANTIZE="none"):
        assert embedding.current_model_label() == "all-MiniLM-L6-v2"


@override_settings(EMBEDDING_CACHE_SIZE=3)
def test_query_cache_is_bounded_and_least_recently_used_goes_first():
    texts = [f"query number {i} about deploys" for i in range(5)]
    first = embedding.embed(texts[0])
    for text in texts[1:3]:
        embedding.embed(text)
    assert embedding.embed(texts[0]) == first  # a hit, and texts[0] is now the most recent
    assert embedding.query_cache.hits == 1
    for text in texts[3:]:
        embedding.embed(text)
    assert len(embedding.query_cache) == 3
    misses = embedding.query_cache.misses
    embedding.embed(texts[0])  # kept: used recently
    assert embedding.query_cache.misses == misses
    embedding.embed(texts[1])  # evicted: least recently used
    assert embedding.query_cache.misses == misses + 1
    assert len(embedding.query_cache) == 3


def test_cached_vectors_are_copies_and_per_embedder():
    vector = embedding.embed("the broker is Redis")
    vector[0] = 42.0
    assert embedding.embed("the broker is Redis")[0] != 42.0
    with override_settings(EMBEDDING_QUANTIZE="int8"):
        int8 = embedding.embed("the broker is Redis")
    with override_settings(EMBEDDING_QUANTIZE="none"):
        assert int8 != embedding.embed("the broker is Redis")


@override_settings(EMBEDDING_CACHE_SIZE=0)
def test_cache_size_zero_keeps_nothing():
    embedding.embed("nothing is kept")
    assert len(embedding.query_cache) == 0


@pytest.mark.django_db
@override_settings(EMBEDDING_QUANTIZE="none")
def test_switching_to_int8_says_stored_vectors_need_reembed(thought_factory, anon, caplog):
    for text in ("Deploys run migrations first.", "Redis is the broker."):
        thought_factory(text)
    assert set(Thought.objects.values_list("embedding_model", flat=True)) == {"all-MiniLM-L6-v2"}

    # torch and fp32 ONNX share the vectors: switching between them needs nothing.
    for backend in ("torch", "onnx"):
        with override_settings(EMBEDDING_BACKEND=backend):
            notice = embedding.stored_vectors_notice()
            assert notice["reembed_needed"] is False and notice["message"] is None

    with override_settings(EMBEDDING_QUANTIZE="int8"):
        notice = embedding.stored_vectors_notice()
        assert notice["reembed_needed"] is True
        assert notice["other_labels"] == {"all-MiniLM-L6-v2": 2}
        assert "manage.py reembed --missing" in notice["message"]
        health = anon.get("/api/v1/health").json()["embedding"]
        assert health["reembed_needed"] is True and "reembed" in health["message"]
        assert "int8" in health["embedder"]
        # A process that loads its model warns once in its log.
        embedding._notice_checked = False
        with caplog.at_level(logging.WARNING, logger="colony.embedding"):
            embedding._loaded_once()
        assert any("reembed --missing" in record.getMessage() for record in caplog.records)

    assert anon.get("/api/v1/health").json()["embedding"]["reembed_needed"] is False


def test_first_export_into_an_empty_data_folder_says_what_it_does(tmp_path, capsys):
    with override_settings(COLONY_DATA_DIR=tmp_path):
        path = embedding.onnx_export(quantize="int8")
        assert path == tmp_path / "models" / path.name and path.exists() and path.name.endswith("-int8.onnx")
        assert embedding.onnx_path("none").exists()
        err = capsys.readouterr().err
        assert "Exporting the embedding model" in err and "offline" in err and "Quantizing it to int8" in err
        assert embedding.onnx_export(quantize="int8") == path  # cached: no second export
        assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("batch_threads", "expected"), [(0, 0), (1, 1)])
def test_a_batch_runs_on_embedding_batch_threads_and_a_prompt_on_embedding_threads(
    monkeypatch, batch_threads, expected
):
    model = embedding._onnx_model()
    asked: list[int] = []
    real_session = model.session

    def session(threads):
        asked.append(threads)
        return real_session(threads)

    monkeypatch.setattr(model, "session", session)
    with override_settings(EMBEDDING_BATCH_THREADS=batch_threads, EMBEDDING_THREADS=1, EMBEDDING_CACHE_SIZE=0):
        vectors = embedding.embed_many([f"an imported note about deploy {i}" for i in range(20)])
        embedding.embed("a question about the deploy")
    assert asked == [expected, 1]
    assert len(vectors) == 20 and all(len(v) == 384 for v in vectors)


@pytest.mark.parametrize(("cores", "workers", "threads"), [(2, 2, 1), (4, 2, 2), (8, 3, 2), (1, 4, 1)])
def test_the_production_server_shares_the_cores_among_its_workers_batches(monkeypatch, cores, workers, threads):
    from runtime import serve

    monkeypatch.setattr(serve.os, "cpu_count", lambda: cores)
    assert serve.batch_threads(workers) == threads


def test_the_production_server_hands_its_workers_the_batch_thread_setting(monkeypatch):
    import uvicorn

    from runtime import serve

    ran = {}
    # main() sets process-wide variables (COLONY_WEB_PROCESS...): give it a copy of the environment.
    monkeypatch.setattr(serve.os, "environ", dict(serve.os.environ))
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: ran.update(options))
    monkeypatch.setattr(serve.os, "cpu_count", lambda: 4)
    monkeypatch.setenv("WEB_WORKERS", "2")
    monkeypatch.delenv("EMBEDDING_BATCH_THREADS", raising=False)
    monkeypatch.chdir(serve.BASE_DIR)
    assert serve.main() == 0
    assert ran["workers"] == 2
    assert serve.os.environ["EMBEDDING_BATCH_THREADS"] == "2"
    monkeypatch.setenv("EMBEDDING_BATCH_THREADS", "3")  # an explicit setting wins
    assert serve.main() == 0
    assert serve.os.environ["EMBEDDING_BATCH_THREADS"] == "3"


@pytest.mark.django_db
def test_an_import_embeds_its_notes_in_model_runs_of_batch_size(dev, space, monkeypatch):
    """Runs of BATCH_SIZE texts, not one run of the whole batch: a run of 128 texts was 25-35% slower
    per note on one thread than runs of 8-32 (the activations leave the core's cache)."""
    model = embedding._onnx_model()
    runs: list[int] = []
    real_session = model.session

    class Recording:
        def __init__(self, session):
            self.session = session

        def run(self, outputs, feed):
            runs.append(len(feed["input_ids"]))
            return self.session.run(outputs, feed)

    monkeypatch.setattr(model, "session", lambda threads: Recording(real_session(threads)))
    n = 2 * embedding.BATCH_SIZE + 6
    items = [{"content": f"imported note {i} about the staging deploy"} for i in range(n)]
    response = dev.post("/api/v1/thoughts/import", data=json.dumps(items), content_type="application/json")
    assert response.status_code == 201, response.json()
    assert runs == [embedding.BATCH_SIZE, embedding.BATCH_SIZE, 6]
    assert Thought.objects.filter(space=space, embedding__isnull=False).count() == n
