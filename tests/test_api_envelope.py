"""Every path under /api/ answers in the JSON error envelope (never an HTML page, DEBUG or not), the
schema documents every error with one shared component, and the docs pages load nothing from a CDN."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

UNKNOWN = [
    ("get", "/api/v1/thought"),
    ("get", "/api/v1/thoughts/x/y/z"),
    ("get", "/api/v1/tasks/a/b/c"),
    ("get", "/api/v1/"),
    ("get", "/api/"),
    ("get", "/api"),
    ("get", "/api/v2/memory"),
    ("post", "/api/v1/nowhere"),
    ("put", "/api/v1/memory/"),
    ("delete", "/api/nothing/here"),
]


def assert_envelope(response, status: int, code: str):
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]


@pytest.fixture(params=[True, False], ids=["debug", "production"])
def debug(request, settings):
    settings.DEBUG = request.param
    return request.param


@pytest.mark.parametrize(("method", "path"), UNKNOWN)
def test_unknown_api_path_is_the_json_404(debug, dev, method, path):
    response = getattr(dev, method)(path, {}, format="json") if method != "get" else dev.get(path)
    assert_envelope(response, 404, "NOT_FOUND")
    assert "/api/docs/" in response.json()["error"]["message"]


def test_unknown_api_path_without_token_or_csrf_is_the_json_404(debug, client):
    # A browser-style POST (session client, no CSRF token) is not turned into Django's HTML 403 page.
    assert_envelope(client.post("/api/v1/nowhere", {"a": 1}), 404, "NOT_FOUND")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("delete", "/api/v1/memory"),
        ("put", "/api/v1/tasks"),
        ("post", "/api/v1/health"),
        ("delete", "/api/schema/"),
        ("post", "/api/docs/"),
        ("put", "/api/redoc/"),
    ],
)
def test_wrong_method_is_the_json_405_with_allow(debug, dev, method, path):
    response = getattr(dev, method)(path, {}, format="json")
    assert_envelope(response, 405, "METHOD_NOT_ALLOWED")
    assert "GET" in response["Allow"]


def test_unknown_path_outside_api_stays_a_page(settings, client):
    settings.DEBUG = False
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("path", ["/api/docs/", "/api/redoc/"])
def test_docs_pages_load_their_scripts_from_colony_not_a_cdn(anon, path):
    response = anon.get(path)
    assert response.status_code == 200
    html = response.content.decode()
    assert "/static/drf_spectacular_sidecar/" in html
    for cdn in ("cdn.jsdelivr.net", "unpkg.com", "cdnjs", "fonts.googleapis"):
        assert cdn not in html


def test_every_error_response_in_the_schema_is_the_one_envelope_component(anon):
    schema = anon.get("/api/schema/?format=json").json()
    envelope = {"$ref": "#/components/schemas/ErrorEnvelope"}
    assert schema["components"]["schemas"]["ErrorEnvelope"]["required"] == ["error"]
    checked = 0
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            has_path_params = "{" in path
            if has_path_params:
                assert "404" in responses, (method, path)
            if operation.get("security") and any(operation["security"]):
                assert {"401", "429"} <= set(responses), (method, path)
            if "requestBody" in operation or any(p["in"] == "query" for p in operation.get("parameters", [])):
                assert "400" in responses, (method, path)
            if "requestBody" in operation:  # another media type, a compressed body
                assert {"413", "415"} <= set(responses), (method, path)
            for status, response in responses.items():
                if status.startswith("4") or (status == "503" and path != "/api/v1/health"):
                    assert response["content"]["application/json"]["schema"] == envelope, (method, path, status)
                    checked += 1
    assert checked > 50


def test_an_unsupported_body_says_what_to_send(dev):
    """curl -d without -H sends application/x-www-form-urlencoded: the 415 names the types and the header."""
    memory = dev.post("/api/v1/memory", '{"prompt": "x"}', content_type="application/x-www-form-urlencoded")
    assert memory.status_code == 415
    assert memory.json()["error"]["message"] == (
        'Unsupported media type "application/x-www-form-urlencoded" in request. Send the body as '
        "application/json and say so in the Content-Type header (curl: -H 'Content-Type: application/json')."
    )
    imports = dev.post("/api/v1/thoughts/import", "{}", content_type="text/plain").json()["error"]["message"]
    assert "Send the body as application/json or application/x-ndjson or application/jsonl" in imports


def test_a_json_body_with_a_byte_order_mark_is_read(dev, fake_embedder):
    """Some Windows clients (PowerShell 5) start a UTF-8 body with a BOM: json refused it (PARSE_ERROR)."""
    body = "\ufeff" + '{"prompt": "how do deploys run", "contribute": false}'
    response = dev.post("/api/v1/memory", body.encode(), content_type="application/json")
    assert response.status_code == 200, response.content[:300]
    assert response.json()["trace"]["thoughts_contributed"] == 0


def test_a_compressed_body_is_refused_with_what_to_send(dev, fake_embedder):
    """Some clients and proxies gzip a request body: the parser read the compressed bytes as text and said
    "'utf-8' codec can't decode byte 0x8b", which does not say what to change."""
    import gzip

    from brain.models import Thought

    plain = b'{"prompt": "Deploys run the migrations before the web workers restart, always.", "contribute": true}'
    for path, body in (("/api/v1/memory", plain), ("/api/v1/thoughts/import", b'[{"content": "x"}]')):
        response = dev.post(path, gzip.compress(body), content_type="application/json", HTTP_CONTENT_ENCODING="gzip")
        assert_envelope(response, 415, "UNSUPPORTED_MEDIA_TYPE")
        message = response.json()["error"]["message"]
        assert message.startswith(
            "The body was sent with Content-Encoding: gzip; Colony reads request bodies uncompressed."
        )
        assert response["Accept-Encoding"] == "identity"
    assert Thought.objects.count() == 0
    response = dev.post("/api/v1/memory", plain, content_type="application/json", HTTP_CONTENT_ENCODING="identity")
    assert response.status_code == 200, response.content[:300]
    assert response.json()["trace"]["thoughts_contributed"] == 1


def test_a_body_not_in_utf8_says_so_and_a_named_charset_is_read(dev, fake_embedder):
    """Windows PowerShell 5 sends a string body as ISO-8859-1: "café" arrives as b"caf\\xe9"."""
    from brain.models import Thought

    text = '{"prompt": "The café on the corner takes the team lunch order before eleven.", "contribute": true}'
    response = dev.post("/api/v1/memory", text.encode("latin-1"), content_type="application/json")
    assert_envelope(response, 400, "PARSE_ERROR")
    assert response.json()["error"]["message"] == (
        "JSON parse error - the body is not valid UTF-8: byte 0xe9 at position 19 is not part of any character. Send "
        "the JSON encoded as UTF-8 (or name its charset in Content-Type, e.g. application/json; charset=windows-1252)."
    )
    assert Thought.objects.count() == 0
    response = dev.post("/api/v1/memory", text.encode("latin-1"), content_type="application/json; charset=windows-1252")
    assert response.status_code == 200, response.content[:300]
    assert Thought.objects.get().content.startswith("The café on the corner")


def test_a_trailing_slash_404_names_the_path_without_it(dev):
    """Hand-written REST calls add the slash Django projects usually want: the 404 says which path is meant."""
    response = dev.post("/api/v1/memory/", {"prompt": "hello"}, content_type="application/json")
    assert_envelope(response, 404, "NOT_FOUND")
    assert response.json()["error"]["message"] == (
        "No endpoint at /api/v1/memory/. Did you mean /api/v1/memory? Colony's API paths end without a slash. "
        "The endpoints are listed at /api/docs/."
    )
    response = dev.get("/api/v1/tasks/fix-ci/transitions/")
    assert "Did you mean /api/v1/tasks/fix-ci/transitions?" in response.json()["error"]["message"]
    for path in ("/api/v1/nowhere/", "/api/v1/", "/api/v1/memory"):  # nothing to suggest; or no 404 at all
        response = dev.get(path)
        assert "Did you mean" not in response.content.decode(), path


@pytest.mark.parametrize(
    ("path", "meant", "why"),
    [
        ("/api/v1/api/v1/memory", "/api/v1/memory", "The base URL (COLONY_URL) is the server's root, without /api/v1."),
        (
            "/api/v1/api/v1/agents/me/",
            "/api/v1/agents/me",
            "The base URL (COLONY_URL) is the server's root, without /api/v1.",
        ),
        ("/api/memory", "/api/v1/memory", "Colony's API paths start with /api/v1/."),
        ("/api/tasks/fix-ci/", "/api/v1/tasks/fix-ci", "Colony's API paths start with /api/v1/."),
    ],
)
def test_a_base_url_ending_in_the_prefix_or_a_path_without_the_version_404_names_the_endpoint(dev, path, meant, why):
    """An agent configured with COLONY_URL=http://host:8000/api/v1 (a client's "base URL") called
    /api/v1/api/v1/...; a hand-written call left out the version: the 404 said only "No endpoint"."""
    response = dev.get(path + "?prompt=hello")
    assert_envelope(response, 404, "NOT_FOUND")
    assert response.json()["error"]["message"] == (
        f"No endpoint at {path}. Did you mean {meant}? {why} The endpoints are listed at /api/docs/."
    )
    for nothing in ("/api/v1/api/v1/nowhere", "/api/nowhere", "/api/v2/memory"):
        assert "Did you mean" not in dev.get(nothing).content.decode(), nothing


@pytest.mark.parametrize("accept", ["text/plain", "text/html", "application/xml", "text/event-stream"])
def test_an_accept_header_the_api_cant_satisfy_still_gets_json(dev, accept):
    """Some HTTP tools send `Accept: text/plain` or `text/html` without `*/*`: every call was a 406 that said
    only "Could not satisfy the request Accept header." The API answers JSON (RFC 9110 12.5.1 lets a server
    disregard such an Accept header), errors in the envelope as always."""
    response = dev.get("/api/v1/agents/me", HTTP_ACCEPT=accept)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.json()["role"] == "dev"
    assert_envelope(dev.get("/api/v1/thoughts/not-a-uuid", HTTP_ACCEPT=accept), 404, "THOUGHT_NOT_FOUND")
    schema = dev.get("/api/schema/", HTTP_ACCEPT=accept)
    assert schema.status_code == 200 and schema.content.startswith(b"openapi: ")


def test_a_method_an_endpoint_does_not_take_says_which_it_takes_and_what_was_meant(dev, space, thought_factory):
    """Agents writing REST calls by hand POST /thoughts to store a thought, PUT or PATCH a task to change
    its status, DELETE a thought: the 405 said only 'Method "POST" not allowed.'"""
    from brain.models import Thought
    from tests.tasks_helpers import make_project, make_task

    task = make_task(make_project(space, slug="colony"), slug="t1", status="ready", role="dev")
    thought = thought_factory("The deploy pipeline runs migrations before restarting web workers.")
    before = (Thought.objects.count(), Thought.objects.get().content, task.status)
    path = f"/api/v1/thoughts/{thought.id}"
    for method, url, takes, meant in [
        ("post", "/api/v1/thoughts", "GET, HEAD", "POST /api/v1/memory"),
        ("put", "/api/v1/tasks/t1", "GET, HEAD", "POST /api/v1/tasks/t1/transition"),
        ("patch", "/api/v1/tasks/t1", "GET, HEAD", "PATCH /api/v1/tasks/t1/dna"),
        ("delete", "/api/v1/tasks/t1", "GET, HEAD", '{"to": "cancelled"}'),
        ("delete", path, "GET, HEAD", f"POST {path}/retract"),
        ("patch", path, "GET, HEAD", "refines"),
        ("post", "/api/v1/tasks/t1/transitions", "GET, HEAD", "Did you mean POST /api/v1/tasks/t1/transition?"),
        ("get", "/api/v1/tasks/t1/transition", "POST", "GET /api/v1/tasks/t1/transitions lists"),
        ("post", "/api/v1/corrections", "GET, HEAD", "/correct"),
        ("get", "/api/v1/thoughts/import", "POST", "manage.py brain export"),
    ]:
        response = getattr(dev, method)(url, {"to": "active"}, format="json")
        assert response.status_code == 405, (method, url, response.content[:300])
        error = response.json()["error"]
        assert error["code"] == "METHOD_NOT_ALLOWED"
        assert error["message"].startswith(f'Method "{method.upper()}" not allowed on {url}; it takes {takes}.'), error
        assert meant in error["message"], error
    plain = dev.put("/api/v1/memory", {"prompt": "x"}, format="json").json()["error"]["message"]
    assert plain == 'Method "PUT" not allowed on /api/v1/memory; it takes GET, POST, HEAD.', plain
    task.refresh_from_db()
    assert (Thought.objects.count(), Thought.objects.get().content, task.status) == before
