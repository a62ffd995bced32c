"""Lineage (SPEC 2.4, seeds/001): refine, consolidate, weight inheritance, the lineage walk."""

from __future__ import annotations

import uuid

import pytest

from brain.models import Thought
from brain.services.lineage import lineage_inherited_weight

pytestmark = pytest.mark.django_db


def memory(client, **body):
    response = client.post("/api/v1/memory", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def refine(client, thought, text=None) -> Thought:
    """A refinement of ``thought`` by ``client``: by default its own words and the reason (a refinement of
    another's thought must be about it, brain.services.lineage.unrelated_refuse)."""
    text = text or f"{thought.content} A better version, with the reason spelled out."
    body = memory(client, prompt=text, refines=str(thought.id))
    return Thought.objects.get(pk=body["trace"]["thought_id"])


def lineage(client, thought_id, status=200, **params):
    response = client.get(f"/api/v1/thoughts/{thought_id}/lineage", params)
    assert response.status_code == status, response.content
    return response.json()


def depths(body) -> dict[str, int]:
    return {node["thought_id"]: node["depth"] for node in body["chain"]}


# --- refine and consolidate -----------------------------------------------------------------------
def test_refine_supersedes_the_source(dev, fake_embedder, thought_factory):
    original = thought_factory("Caches expire after five minutes.")
    refinement = refine(dev, original)
    original.refresh_from_db()
    assert refinement.thought_type == "refinement" and refinement.source_ids == [original.id]
    assert original.superseded is True and original.refined_by_id == refinement.id
    assert original.superseded_at is not None and original.superseded_by_id is None
    first_superseded_at = original.superseded_at

    newer = refine(dev, original, "Yet another version: caches expire after ten minutes, since March.")
    original.refresh_from_db()
    assert original.refined_by_id == newer.id  # the newest refiner
    assert original.superseded_at == first_superseded_at  # first time it was superseded


def test_consolidate_supersedes_every_source(dev, fake_embedder, thought_factory):
    sources = [thought_factory(f"Fragment {i} about the release process.") for i in range(3)]
    body = memory(dev, prompt="Release process, merged.", consolidates=[str(s.id) for s in sources])
    merged = Thought.objects.get(pk=body["trace"]["thought_id"])
    assert merged.thought_type == "consolidation" and merged.source_ids == [s.id for s in sources]
    for source in sources:
        source.refresh_from_db()
        assert source.superseded and source.refined_by_id == merged.id


@pytest.mark.parametrize(
    "thought_type, weights, expected",
    [
        ("original", [], 1.0),
        ("refinement", [4.0], 2.0),
        ("refinement", [1.5], 1.0),
        ("refinement", [10.0], 5.0),
        ("consolidation", [6.0, 2.0], 2.0),
        ("consolidation", [1.0, 1.2], 1.0),
        ("consolidation", [10.0, 10.0, 4.0], 4.0),
    ],
)
def test_weight_inheritance_formulas(thought_type, weights, expected):
    assert lineage_inherited_weight(thought_type=thought_type, source_weights=weights) == pytest.approx(expected)


def test_inherited_weight_is_stored(dev, fake_embedder, thought_factory):
    heavy = thought_factory("A heavily used thought about deploys.", pheromone_weight=6.0)
    other = thought_factory("Another thought about deploys.", pheromone_weight=3.0)
    assert refine(dev, heavy).pheromone_weight == pytest.approx(3.0)
    # That call's retrieval reinforced what it returned; the consolidation inherits the current weights.
    weights = [Thought.objects.get(pk=t.pk).pheromone_weight for t in (heavy, other)]
    body = memory(
        dev, prompt="Merged: a heavily used thought about deploys.", consolidates=[str(heavy.id), str(other.id)]
    )
    merged = Thought.objects.get(pk=body["trace"]["thought_id"])
    assert merged.pheromone_weight == pytest.approx(max(1.0, sum(weights) / 2 * 0.5))


def test_lineage_summary_in_the_trace(dev, fake_embedder, thought_factory):
    a = thought_factory("Version one of the backup policy.")
    b = refine(dev, a, "Version two of the backup policy, with retention of thirty days.")
    body = memory(dev, prompt="Version three of the backup policy: thirty days, plus WAL archiving.", refines=str(b.id))
    summary = body["trace"]["lineage_summary"]
    assert summary["has_lineage"] is True and summary["chain_length"] == 3
    assert summary["deepest_ancestor"] == str(a.id)
    assert summary["latest_refinement"] == body["trace"]["thought_id"]


def test_no_lineage_summary_without_lineage(dev, fake_embedder, thought_factory):
    thought_factory("An original thought about the backup policy.")
    assert memory(dev, prompt="backup policy")["trace"]["lineage_summary"] is None


# --- the lineage walk -----------------------------------------------------------------------------
@pytest.fixture
def chain(thought_factory):
    """t0 <- t1 <- ... <- t6, each refining the previous one."""
    thoughts = [thought_factory("Chain link 0.")]
    for i in range(1, 7):
        thoughts.append(thought_factory(f"Chain link {i}.", thought_type="refinement", source_ids=[thoughts[-1].id]))
    return thoughts


def test_ancestors_negative_descendants_positive(dev, chain):
    body = lineage(dev, chain[3].id)
    assert body["thought_id"] == str(chain[3].id) and body["truncated"] is False
    assert depths(body) == {str(t.id): i - 3 for i, t in enumerate(chain)}
    assert [n["depth"] for n in body["chain"]] == [-3, -2, -1, 0, 1, 2, 3]
    node = body["chain"][0]
    assert set(node) >= {
        "thought_id",
        "thought_type",
        "content_preview",
        "contributor",
        "created_at",
        "source_ids",
        "depth",
    }


@pytest.mark.parametrize(
    "max_depth, expected_depths, truncated",
    [
        (0, [0], True),
        (2, [0, 1, 2], True),
        (5, [0, 1, 2, 3, 4, 5], True),
        (6, list(range(7)), False),
        (50, list(range(7)), False),
    ],
)
def test_depth_cap_and_truncation_downwards(dev, chain, max_depth, expected_depths, truncated):
    body = lineage(dev, chain[0].id, max_depth=max_depth)
    assert [n["depth"] for n in body["chain"]] == expected_depths
    assert body["truncated"] is truncated


def test_depth_cap_and_truncation_upwards(dev, chain):
    body = lineage(dev, chain[6].id, max_depth=2)
    assert [n["depth"] for n in body["chain"]] == [-2, -1, 0] and body["truncated"] is True
    body = lineage(dev, chain[6].id, max_depth=6)
    assert [n["depth"] for n in body["chain"]] == [-6, -5, -4, -3, -2, -1, 0] and body["truncated"] is False


def test_default_depth_is_ten(dev, thought_factory):
    thoughts = [thought_factory("Link 0.")]
    for i in range(1, 13):
        thoughts.append(thought_factory(f"Link {i}.", thought_type="refinement", source_ids=[thoughts[-1].id]))
    body = lineage(dev, thoughts[0].id)
    assert max(n["depth"] for n in body["chain"]) == 10 and body["truncated"] is True


def test_consolidation_has_several_ancestors(dev, thought_factory):
    a, b = thought_factory("Part A."), thought_factory("Part B.")
    merged = thought_factory("A and B.", thought_type="consolidation", source_ids=[a.id, b.id])
    assert depths(lineage(dev, merged.id)) == {str(a.id): -1, str(b.id): -1, str(merged.id): 0}
    assert depths(lineage(dev, a.id)) == {str(a.id): 0, str(merged.id): 1}


def test_walk_is_cycle_safe(dev, chain):
    Thought.objects.filter(pk=chain[0].pk).update(source_ids=[chain[6].id])  # an admin edit closes a loop
    body = lineage(dev, chain[3].id, max_depth=100)
    ids = [n["thought_id"] for n in body["chain"]]
    assert len(ids) == len(set(ids)) == 7
    assert body["truncated"] is False


def test_walk_does_not_cross_spaces(dev, thought_factory, other_space):
    mine = thought_factory("Mine.")
    thought_factory("Theirs, pointing at mine.", in_space=other_space, thought_type="refinement", source_ids=[mine.id])
    assert depths(lineage(dev, mine.id)) == {str(mine.id): 0}


@pytest.mark.parametrize("max_depth", ["-1", "ten", "101"])
def test_bad_max_depth_is_400(dev, chain, max_depth):
    response = dev.get(f"/api/v1/thoughts/{chain[0].id}/lineage", {"max_depth": max_depth})
    assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_unknown_malformed_and_foreign_ids_are_404(dev, thought_factory, other_space):
    foreign = thought_factory("Theirs.", in_space=other_space)
    for thought_id in (uuid.uuid4(), "not-a-uuid", foreign.id):
        response = dev.get(f"/api/v1/thoughts/{thought_id}/lineage")
        assert response.status_code == 404 and response.json()["error"]["code"] == "THOUGHT_NOT_FOUND"


def test_a_thought_reached_by_two_paths_keeps_its_smallest_depth(dev, thought_factory):
    """a <- b <- c, and d consolidates a and c: a is d's parent and also c's grandparent."""
    a = thought_factory("A.")
    b = thought_factory("B.", thought_type="refinement", source_ids=[a.id])
    c = thought_factory("C.", thought_type="refinement", source_ids=[b.id])
    d = thought_factory("D.", thought_type="consolidation", source_ids=[a.id, c.id])
    body = lineage(dev, d.id, max_depth=2)
    assert depths(body) == {str(d.id): 0, str(a.id): -1, str(c.id): -1, str(b.id): -2}
    assert body["truncated"] is False  # a again at depth 3 is not "more beyond the cap"
    body = lineage(dev, d.id, max_depth=1)
    assert depths(body) == {str(d.id): 0, str(a.id): -1, str(c.id): -1} and body["truncated"] is True
    assert depths(lineage(dev, a.id)) == {str(a.id): 0, str(b.id): 1, str(d.id): 1, str(c.id): 2}
