"""The lineage chain of ``brain.selectors.lineage.thought_lineage`` as two trees for the thought page.

The chain is flat (depth < 0 ancestors, 0 the thought, > 0 descendants, each with its
``source_ids``). Humans read it as trees: what the thought was built on (parents, their parents…)
and what was built on it (refinements and consolidations, and theirs). A consolidation has several
parents, so a node can appear under each of them; depth strictly grows along every edge, so a tree
can't loop even if an admin edit made the data cyclic.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TreeNode:
    node: dict
    children: list[TreeNode] = field(default_factory=list)


def lineage_trees(chain: list[dict], root_id: str) -> tuple[list[TreeNode], list[TreeNode]]:
    """(ancestors, descendants) of ``root_id``: the root's parents and children, each with their own."""
    by_id = {n["thought_id"]: n for n in chain}
    root = by_id.get(root_id)
    if root is None:
        return [], []

    def parents_of(node: dict) -> list[TreeNode]:
        found = [by_id[s] for s in node["source_ids"] if s in by_id and by_id[s]["depth"] < node["depth"]]
        return [TreeNode(p, parents_of(p)) for p in sorted(found, key=lambda n: n["created_at"])]

    children_index: dict[str, list[dict]] = {}
    for node in chain:
        for source in node["source_ids"]:
            children_index.setdefault(source, []).append(node)

    def children_of(node: dict) -> list[TreeNode]:
        found = [c for c in children_index.get(node["thought_id"], []) if c["depth"] > node["depth"]]
        return [TreeNode(c, children_of(c)) for c in sorted(found, key=lambda n: n["created_at"])]

    return parents_of(root), children_of(root)
