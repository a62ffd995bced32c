"""The lineage chain of ``brain.selectors.lineage.thought_lineage`` as two trees for the thought page.

The chain is flat (depth < 0 ancestors, 0 the thought, > 0 descendants, each with its
``source_ids``). Humans read it as trees: what the thought was built on (parents, their parents…)
and what was built on it (refinements and consolidations, and theirs). A consolidation has several
parents, so a node can appear under each of them; its own parents or children are drawn under its
first appearance only (the others are marked ``repeated``), so a tree has one entry per link, not
one per path (a lattice of consolidations has exponentially many), and at most ``TREE_ITEMS_MAX``
entries. Depth strictly grows along every edge, so a tree can't loop even if an admin edit made the
data cyclic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Entries of one tree at most; past it the page says the lineage goes on (follow the links).
TREE_ITEMS_MAX = 300


@dataclass
class TreeNode:
    node: dict
    children: list[TreeNode] = field(default_factory=list)
    repeated: bool = False  # drawn above already, with its own parents or children


@dataclass
class Lineage:
    ancestors: list[TreeNode]
    descendants: list[TreeNode]
    cut: bool  # a tree reached TREE_ITEMS_MAX entries


class _Budget:
    def __init__(self) -> None:
        self.left = TREE_ITEMS_MAX
        self.cut = False

    def take(self) -> bool:
        if self.left <= 0:
            self.cut = True
            return False
        self.left -= 1
        return True


def lineage_trees(chain: list[dict], root_id: str) -> Lineage:
    """The ancestors and descendants of ``root_id``: the root's parents and children, each with their own."""
    by_id = {n["thought_id"]: n for n in chain}
    root = by_id.get(root_id)
    if root is None:
        return Lineage([], [], cut=False)
    children_index: dict[str, list[dict]] = {}
    for node in chain:
        for source in node["source_ids"]:
            children_index.setdefault(source, []).append(node)

    def parents(node: dict) -> list[dict]:
        return [by_id[s] for s in node["source_ids"] if s in by_id and by_id[s]["depth"] < node["depth"]]

    def children(node: dict) -> list[dict]:
        return [c for c in children_index.get(node["thought_id"], []) if c["depth"] > node["depth"]]

    def tree(node: dict, step, budget: _Budget, expanded: set[str]) -> list[TreeNode]:
        items = []
        for linked in sorted(step(node), key=lambda n: n["created_at"]):
            if not budget.take():
                break
            if linked["thought_id"] in expanded:
                items.append(TreeNode(linked, repeated=True))
                continue
            expanded.add(linked["thought_id"])
            items.append(TreeNode(linked, tree(linked, step, budget, expanded)))
        return items

    up, down = _Budget(), _Budget()
    ancestors = tree(root, parents, up, {root_id})
    descendants = tree(root, children, down, {root_id})
    return Lineage(ancestors, descendants, cut=up.cut or down.cut)
