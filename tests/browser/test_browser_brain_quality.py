"""In a real browser: search the brain and walk a lineage, accept a pending correction, see the dashboard's charts."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from brain import embedding
from brain.choices import SuggestionOrigin, SuggestionStatus, ThoughtType
from brain.models import Thought
from brain.services.suggestions import suggestion_create
from brain.services.thoughts import thought_create
from quality.models import QualityRollup

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def store(space, content, **fields):
    """A thought with its real embedding (these tests search with the real model)."""
    return thought_create(
        space=space,
        content=content,
        contributor_id="agent-dev-1",
        contributor_name="dev-1",
        embedding=embedding.embed(content),
        **fields,
    )


def test_browse_a_topic_page_by_page_with_the_older_link(logged_in_page, space, shot):
    page = logged_in_page
    for i in range(23):
        store(space, f"Backup note {i:02d}: the nightly snapshot finished.", topic="backups")
    store(space, "Deploys run at noon.", topic="deploys")

    page.goto("/brain/")
    page.fill("input[name=topic]", "backups")
    page.click("button:has-text('Search')")
    page.wait_for_url("**/brain/?*topic=backups*")
    assert page.locator("h2").inner_text() == "Newest thoughts on topic backups"
    rows = page.locator("table.results tbody tr")
    assert rows.count() == 20 and "Backup note 22" in rows.first.inner_text()
    page.click("text=Older thoughts →")
    page.wait_for_url("**/brain/?*cursor=*")
    assert page.locator("h2").inner_text() == "Older thoughts on topic backups"
    assert [rows.nth(i).locator("a").inner_text()[:14] for i in range(rows.count())] == [
        "Backup note 02",
        "Backup note 01",
        "Backup note 00",
    ]
    assert page.locator("a[rel=next]").count() == 0
    shot(page, "brain-older")
    page.click("text=Back to the newest")
    page.wait_for_url("**/brain/?topic=backups")
    assert "Backup note 22" in rows.first.inner_text()


def test_search_the_brain_and_open_a_thoughts_lineage(logged_in_page, space, shot):
    page = logged_in_page
    original = store(space, "The parser cache is shared by all worker threads.", topic="parser")
    refinement = store(
        space,
        "The parser cache is per worker thread; sharing it needs a lock around every write.",
        topic="parser",
        thought_type=ThoughtType.REFINEMENT,
        source_ids=[original.id],
    )
    Thought.objects.filter(pk=original.pk).update(superseded=True, refined_by=refinement)
    store(space, "Billing invoices are generated nightly at 02:00 UTC.", topic="billing")

    page.goto("/brain/")
    page.fill("input[name=q]", "how is the parser cache shared between threads")
    page.click("button:has-text('Search')")
    page.wait_for_url("**/brain/?q=*")
    rows = page.locator("table.results tbody tr")
    assert rows.first.get_attribute("data-thought") == str(refinement.id)  # the newer version ranks first
    superseded_row = page.locator(f'tr[data-thought="{original.id}"]')
    assert superseded_row.locator(".chip.superseded").is_visible()
    assert float(rows.first.locator("td.score").inner_text()) > 0
    shot(page, "brain-search")

    rows.first.locator("a").click()
    page.wait_for_url(f"**/brain/thoughts/{refinement.id}/")
    built_on = page.locator("ul.tree").first
    assert "shared by all worker threads" in built_on.inner_text()
    shot(page, "thought-lineage")
    built_on.locator("a").first.click()
    page.wait_for_url(f"**/brain/thoughts/{original.id}/")
    assert page.locator(".message.warning", has_text="Superseded").is_visible()
    assert "needs a lock" in page.locator("ul.tree").first.inner_text()  # built upon it
    shot(page, "thought-ancestor")


def test_accept_a_pending_correction(logged_in_page, space, shot):
    page = logged_in_page
    wrong = store(space, "The API rate limit is 100 requests per minute.", topic="api")
    suggestion, _ = suggestion_create(
        thought=wrong,
        statement="The API rate limit is 600 requests per minute.",
        origin=SuggestionOrigin.QUALITY_JUDGE,
        confidence=0.82,
        reason="an agent's answer contradicted it",
    )
    page.goto(f"/brain/thoughts/{wrong.id}/")
    panel = page.locator(f'[data-suggestion="{suggestion.id}"]')
    assert "600 requests per minute" in panel.inner_text()
    shot(page, "thought-with-suggestion")

    panel.locator("button", has_text="Accept as correction").click()
    page.wait_for_url("**/brain/thoughts/*/")
    assert page.locator(".message.success", has_text="Suggestion accepted").is_visible()
    assert "600 requests per minute" in page.locator("dl.meta").first.inner_text()  # the correction's page
    shot(page, "correction")

    suggestion.refresh_from_db()
    wrong.refresh_from_db()
    assert suggestion.status == SuggestionStatus.ACCEPTED and suggestion.resolved_by == "human-ada"
    assert wrong.superseded and wrong.superseded_by_id == suggestion.correction_id
    assert page.url.endswith(f"/brain/thoughts/{suggestion.correction_id}/")


def test_dashboard_draws_the_charts(logged_in_page, space, shot):
    page = logged_in_page
    today = timezone.now().date()
    QualityRollup.objects.bulk_create(
        [
            QualityRollup(
                space=space,
                day=today - dt.timedelta(days=offset),
                agent_name="",
                turns=10,
                items=20,
                on_topic=16 + offset % 4,
                used=8 + offset % 5,
                contradicted=offset % 3,
                contradictions_raised=2,
                contradictions_resolved=1 + offset % 2,
                computed_at=timezone.now(),
            )
            for offset in range(20)
        ]
    )
    page.goto("/quality/")
    charts = page.locator("figure.chart")
    assert charts.count() == 4
    for index in range(4):
        chart = charts.nth(index)
        line = chart.locator("polyline.series").first
        box = line.bounding_box()
        assert box is not None and box["width"] > 100  # a line actually drawn across the chart
        assert chart.locator("line.target").bounding_box()["width"] > 100
        assert chart.locator("circle.point").count() == 20
    assert page.locator('tr[data-metric="contradiction_rate"]').inner_text().count("%") >= 2
    shot(page, "quality")
