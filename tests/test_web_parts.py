"""The web UI's pure parts: SVG chart geometry and the lineage trees."""

from __future__ import annotations

import pytest

from web.charts import line_chart
from web.lineage import lineage_trees


def test_chart_breaks_the_line_on_days_without_data_and_scales_rates():
    chart = line_chart(
        name="usage_rate",
        title="Usage",
        days=["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05"],
        values=[0.0, 1.0, None, 0.5, 0.5],
        target=0.6,
        comparison=">=",
    )
    assert len(chart.segments) == 2  # the missing day splits the line
    assert [p.value for p in chart.points] == [0.0, 1.0, 0.5, 0.5]
    first, second = chart.points[0], chart.points[1]
    assert first.x == chart.plot_left and first.y == chart.plot_bottom  # 0% at the bottom left
    assert second.y == chart.plot_top  # 100% at the top
    assert chart.points[-1].x == chart.plot_right
    assert chart.plot_top < chart.target_y < chart.plot_bottom
    assert chart.target_label == "target ≥60%"
    assert chart.summary == "Usage: 4 measured days, latest 2026-11-05 50%, target ≥60%."


def test_chart_without_data_says_so():
    chart = line_chart(name="x", title="X", days=["2026-11-01", "2026-11-02"], values=[None, None])
    assert not chart.has_data and chart.segments == [] and chart.target_y is None
    assert chart.summary == "X: no data in this period."


def test_chart_refuses_mismatched_series():
    with pytest.raises(ValueError):
        line_chart(name="x", title="X", days=["2026-11-01"], values=[])


def _n(tid, depth, sources=(), created="2026-11-01T00:00:00"):
    return {"thought_id": tid, "depth": depth, "source_ids": list(sources), "created_at": created}


def test_lineage_trees_nest_ancestors_and_descendants_with_consolidations_under_each_parent():
    chain = [
        _n("g", -2),
        _n("p1", -1, ["g"]),
        _n("p2", -1),
        _n("root", 0, ["p1", "p2"]),
        _n("r1", 1, ["root"], "2026-11-02T00:00:00"),
        _n("c", 2, ["r1", "root"], "2026-11-03T00:00:00"),
    ]
    trees = lineage_trees(chain, "root")
    ancestors, descendants = trees.ancestors, trees.descendants
    assert [a.node["thought_id"] for a in ancestors] == ["p1", "p2"]
    assert [g.node["thought_id"] for g in ancestors[0].children] == ["g"]
    assert [d.node["thought_id"] for d in descendants] == ["r1", "c"]
    assert [c.node["thought_id"] for c in descendants[0].children] == ["c"]
    assert [d.repeated for d in descendants] == [False, True] and not trees.cut


def test_lineage_trees_cannot_loop_on_cyclic_data():
    chain = [_n("a", -1, ["root"]), _n("root", 0, ["a"]), _n("b", 1, ["root", "b"])]
    trees = lineage_trees(chain, "root")
    ancestors, descendants = trees.ancestors, trees.descendants
    assert [a.node["thought_id"] for a in ancestors] == ["a"] and ancestors[0].children == []
    assert [d.node["thought_id"] for d in descendants] == ["b"] and descendants[0].children == []


def test_lineage_trees_stop_at_their_entry_budget(monkeypatch):
    from web import lineage

    monkeypatch.setattr(lineage, "TREE_ITEMS_MAX", 3)
    chain = [_n("root", 0), *(_n(f"r{i}", 1, ["root"]) for i in range(5))]
    trees = lineage_trees(chain, "root")
    assert len(trees.descendants) == 3 and trees.cut
