"""Line charts as server-rendered inline SVG: no JavaScript, no chart library, easy to test.

:func:`line_chart` turns a daily series of rates (0..1, ``None`` = nothing measured that day) and
the metric's target into drawing coordinates; ``templates/web/_chart.html`` draws them. A day
without data breaks the line instead of being drawn as 0, so "no data" never looks like "bad".
"""

from __future__ import annotations

from dataclasses import dataclass, field

WIDTH = 360
HEIGHT = 170
PAD_LEFT = 34
PAD_RIGHT = 8
PAD_TOP = 10
PAD_BOTTOM = 22


@dataclass
class Point:
    x: float
    y: float
    label: str
    value: float


@dataclass
class Chart:
    name: str
    title: str
    width: int = WIDTH
    height: int = HEIGHT
    segments: list[str] = field(default_factory=list)  # polyline "x,y x,y ..." per run of measured days
    points: list[Point] = field(default_factory=list)
    target: float | None = None
    target_y: float | None = None
    target_label: str = ""
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    x_labels: list[tuple[float, str, str]] = field(default_factory=list)  # (x, text, text-anchor)
    plot_left: float = PAD_LEFT
    plot_right: float = WIDTH - PAD_RIGHT
    plot_top: float = PAD_TOP
    plot_bottom: float = HEIGHT - PAD_BOTTOM

    @property
    def has_data(self) -> bool:
        return bool(self.points)

    @property
    def summary(self) -> str:
        """What a screen reader says about the chart."""
        if not self.points:
            return f"{self.title}: no data in this period."
        last = self.points[-1]
        text = f"{self.title}: {len(self.points)} measured days, latest {last.label} {last.value:.0%}"
        if self.target is not None:
            text += f", {self.target_label}"
        return text + "."


def _pct(value: float) -> str:
    return f"{value:.0%}"


def line_chart(
    *,
    name: str,
    title: str,
    days: list[str],
    values: list[float | None],
    target: float | None = None,
    comparison: str | None = None,
) -> Chart:
    """Coordinates of one metric's chart. ``days`` and ``values`` are parallel, oldest first; rates are 0..1."""
    if len(days) != len(values):
        raise ValueError("days and values must have the same length")
    chart = Chart(name=name, title=title)
    left, right, top, bottom = chart.plot_left, chart.plot_right, chart.plot_top, chart.plot_bottom
    span = max(1, len(days) - 1)

    def x_of(index: int) -> float:
        return round(left + (right - left) * index / span, 1)

    def y_of(value: float) -> float:
        return round(bottom - (bottom - top) * max(0.0, min(1.0, value)), 1)

    run: list[str] = []
    for index, (day, value) in enumerate(zip(days, values, strict=True)):
        if value is None:
            if run:
                chart.segments.append(" ".join(run))
            run = []
            continue
        point = Point(x=x_of(index), y=y_of(value), label=day, value=value)
        chart.points.append(point)
        run.append(f"{point.x},{point.y}")
    if run:
        chart.segments.append(" ".join(run))

    if target is not None:
        chart.target = target
        chart.target_y = y_of(target)
        sign = {">=": "≥", "<=": "≤"}.get(comparison or "", "")
        chart.target_label = f"target {sign}{_pct(target)}"
    chart.y_ticks = [(y_of(v), _pct(v)) for v in (0.0, 0.5, 1.0)]
    if days:
        picks = sorted({0, len(days) // 2, len(days) - 1})
        anchors = {0: "start", len(days) - 1: "end"}
        chart.x_labels = [(x_of(i), days[i][5:], anchors.get(i, "middle")) for i in picks]  # MM-DD
    return chart
