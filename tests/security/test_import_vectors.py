"""An operator's restore may carry its own embeddings (any 384 finite numbers; an agent's import is
embedded by the server whatever it carries). A vector of zeros has no direction (its cosine is NaN) and
one at float32's edge overflows a naive norm: neither may break a search or bend the ranking of the rest
of the space (contrast uses the best hits' vectors)."""

from __future__ import annotations

import math

import pytest

from brain.transfer.serializers import FLOAT32_MAX


def memory(client, prompt: str) -> list[dict]:
    response = client.get("/api/v1/memory", {"prompt": prompt, "contribute": "false", "limit": 10})
    assert response.status_code == 200, response.content
    return response.json()["result"]["sources"]


@pytest.mark.django_db
@pytest.mark.parametrize("vector", [[0.0] * 384, [FLOAT32_MAX] * 384, [-FLOAT32_MAX, FLOAT32_MAX] * 192])
def test_an_imported_vector_without_a_usable_direction_breaks_no_search(dev, thought_factory, fake_embedder, vector):
    for text in (
        "The deploy pipeline runs migrations before it restarts the workers.",
        "Deploy freezes start on Friday at noon.",
        "The pipeline caches wheels between deploy runs.",
        "Backups run nightly and are kept for thirty days.",
    ):
        thought_factory(text)
    prompt = "how does the deploy pipeline run migrations"
    before = memory(dev, prompt)

    from brain.transfer.services import ImportMode, thoughts_import

    items = [{"content": "deploy pipeline migrations deploy pipeline migrations", "embedding": vector}]
    thoughts_import(space=dev.agent.space, agent=None, items=items, mode=ImportMode.OPERATOR)
    after = memory(dev, prompt)

    assert all(math.isfinite(s["score"]) and 0.0 <= s["relevance"] <= 1.0 for s in after)
    assert after[0]["thought_id"] == before[0]["thought_id"] or after[0]["content"].startswith("deploy pipeline")
    kept = [s["thought_id"] for s in after if s["thought_id"] in {b["thought_id"] for b in before}]
    assert kept == [s["thought_id"] for s in before]
