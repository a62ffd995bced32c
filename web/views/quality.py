"""The quality dashboard: is the brain helping? The four metrics over time against their targets.

The numbers come from ``quality.selectors.quality_metrics`` — the same selector as
``GET /api/v1/quality/metrics`` — for the whole space or one agent; this view only draws them.
"""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import render
from django.views.decorators.http import require_GET

from api.errors import ApplicationError
from quality.selectors import quality_metrics
from web.charts import line_chart
from web.forms import DashboardForm, form_error_text
from web.selectors import (
    agent_names_with_quality,
    quality_per_agent,
    suggestion_list_pending,
    thought_list_most_contradicted,
)
from web.views.common import space_required

#: The four metrics of SPEC 4.3, charted in this order.
CHARTED = (
    ("on_topic_rate", "On-topic rate"),
    ("usage_rate", "Usage rate"),
    ("contradiction_rate", "Contradiction rate"),
    ("discovery_rate", "Discovery rate"),
)


@require_GET
@space_required
def dashboard(request):
    space = request.colony_space
    agents = agent_names_with_quality(space=space)
    form = DashboardForm(request.GET or None, agents=agents)
    agent, days = None, 30
    if form.is_bound:
        if form.is_valid():
            agent, days = form.cleaned_data["agent"] or None, form.cleaned_data["days"] or 30
        else:
            messages.error(request, f"Showing the whole space — {form_error_text(form)}")
    try:
        metrics = quality_metrics(space=space, agent_name=agent, days=days)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        agent = None
        metrics = quality_metrics(space=space, days=days)
    history = metrics["history"]
    day_labels = [entry["day"] for entry in history]
    charts = [
        line_chart(
            name=name,
            title=title,
            days=day_labels,
            values=[entry["rolling"][name] for entry in history],
            target=metrics["metrics"][name]["target"],
            comparison=metrics["metrics"][name]["comparison"],
        )
        for name, title in CHARTED
    ]
    context = {
        "nav": "quality",
        "form": form,
        "agent": agent,
        "metrics": metrics,
        "current": [(title, name, metrics["metrics"][name]) for name, title in CHARTED],
        "false_demotion": metrics["metrics"]["false_demotion_rate"],
        "charts": charts,
        "per_agent": quality_per_agent(space=space),
        "contradicted": thought_list_most_contradicted(space=space, days=days),
        "pending": suggestion_list_pending(space=space, limit=20),
    }
    return render(request, "web/quality.html", context)
