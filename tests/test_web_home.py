"""The home page: where things are, recent markers of the human's space, health of the machinery."""

from __future__ import annotations

import pytest

from tests import web_support
from tests.web_support import make_marker

ada = web_support.ada  # the logged-in human fixture, defined once for the web tests


@pytest.mark.django_db
def test_home_points_a_newcomer_to_each_part(client, ada):
    body = client.get("/").content.decode()
    for text in ("Where things are", "In-flight tasks", "Recent transition markers", "Health", 'href="/admin/"'):
        assert text in body


@pytest.mark.django_db
def test_home_lists_recent_markers_of_the_current_space_only_newest_first(client, ada, space, other_space):
    make_marker(space, "TASK ready→active: DEV first-task (colony) — started", seed=1)
    make_marker(space, "TASK active→review: DEV first-task (colony) — done", seed=2)
    make_marker(other_space, "TASK ready→active: DEV secret-task (rival) — started", seed=3)
    body = client.get("/").content.decode()
    assert "secret-task" not in body
    assert body.index("active→review") < body.index("ready→active")


@pytest.mark.django_db
def test_stored_text_is_escaped(client, ada, space):
    make_marker(space, "TASK x→y: <script>alert('owned')</script> & <b>bold</b>")
    body = client.get("/").content.decode()
    assert "<script>alert" not in body and "<b>bold</b>" not in body
    assert "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in body


@pytest.mark.django_db
def test_home_loads_the_health_panel_without_waiting_for_it(client, ada):
    body = client.get("/").content.decode()
    assert 'hx-get="/home/health/"' in body
    assert "htmx-2.0.11.min.js" in body


@pytest.mark.django_db
def test_health_panel_reports_database_pgvector_broker_worker_and_model(client, ada):
    response = client.get("/home/health/")
    body = response.content.decode()
    assert response.status_code == 200
    assert "Database (PostgreSQL)" in body and ">up<" in body
    assert "pgvector" in body and ">0.8" in body  # the embedded server ships pgvector 0.8.x
    assert "Broker" in body and "Celery worker" in body
    assert "no heartbeat in the last 30 s" in body  # no worker runs in unit tests
    assert 'data-status="error"' in body


@pytest.mark.django_db
def test_home_query_count_is_fixed(client, ada, space, django_assert_max_num_queries):
    for i in range(15):
        make_marker(space, f"TASK a→b: DEV t{i} (p) — step", seed=i)
    # session, user, spaces, in-flight tasks, markers
    with django_assert_max_num_queries(5):
        assert client.get("/").status_code == 200


@pytest.mark.django_db
def test_home_lists_in_flight_tasks_of_the_current_space(client, ada, space, other_space):
    from tests.tasks_helpers import make_project, make_task

    project = make_project(space, "colony")
    make_task(project, slug="coding-now", status="active", role="dev")
    make_task(project, slug="stuck-now", status="blocked", role="qa", dna={"blocked_reason": "no <db> access"})
    make_task(project, slug="not-started", status="backlog")
    make_task(make_project(other_space, "rival"), slug="their-work", status="active", role="dev")
    body = client.get("/").content.decode()
    assert 'data-slug="coding-now"' in body and 'data-slug="stuck-now"' in body
    assert "Blocked: no &lt;db&gt; access" in body
    assert "not-started" not in body and "their-work" not in body
