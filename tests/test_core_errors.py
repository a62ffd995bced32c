"""Every API error is the JSON envelope, whatever raised it."""

from __future__ import annotations

import pytest
from django.urls import path
from rest_framework.views import APIView

from api.errors import Conflict

pytestmark = pytest.mark.django_db


class Boom(APIView):
    def get(self, request):
        raise RuntimeError("unexpected")

    def post(self, request):
        raise Conflict("someone else won", code="CONFLICT")


class Echo(APIView):
    def post(self, request):
        from rest_framework.response import Response

        return Response(request.data)


urlpatterns = [path("api/v1/boom", Boom.as_view()), path("api/v1/echo", Echo.as_view())]


def assert_envelope(response, status, code):
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def test_unknown_api_path_is_json_404(anon):
    assert_envelope(anon.get("/api/v1/does-not-exist"), 404, "NOT_FOUND")


def test_method_not_allowed_is_405(dev):
    assert_envelope(dev.delete("/api/v1/agents/me"), 405, "METHOD_NOT_ALLOWED")


@pytest.mark.urls("tests.test_core_errors")
def test_unsupported_media_type_is_415(dev):
    assert_envelope(dev.post("/api/v1/echo", "a=b", content_type="text/plain"), 415, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.urls("tests.test_core_errors")
def test_malformed_json_is_400(dev):
    assert_envelope(dev.post("/api/v1/echo", "{not json", content_type="application/json"), 400, "PARSE_ERROR")


@pytest.mark.urls("tests.test_core_errors")
def test_unexpected_exception_is_json_500(dev):
    assert_envelope(dev.get("/api/v1/boom"), 500, "INTERNAL_ERROR")


@pytest.mark.urls("tests.test_core_errors")
def test_application_error_keeps_its_code_and_status(dev):
    assert_envelope(dev.post("/api/v1/boom", {}, format="json"), 409, "CONFLICT")


def test_validation_errors_map_to_validation_error_with_fields():
    from rest_framework import serializers

    from api.errors import api_exception_handler

    class S(serializers.Serializer):
        prompt = serializers.CharField(max_length=5)

    s = S(data={"prompt": "too long"})
    assert not s.is_valid()
    response = api_exception_handler(serializers.ValidationError(s.errors), {})
    assert response.status_code == 400
    assert response.data["error"]["code"] == "VALIDATION_ERROR"
    assert "prompt" in response.data["error"]["fields"]
    assert "prompt" in response.data["error"]["message"]


def test_schema_and_docs_are_served(anon):
    assert anon.get("/api/schema/").status_code == 200
    assert anon.get("/api/docs/").status_code == 200


def test_openapi_schema_generates_without_warnings(tmp_path):
    from django.core.management import call_command

    out = tmp_path / "schema.yml"
    call_command("spectacular", "--file", str(out), "--validate", "--fail-on-warn")
    assert "/api/v1/health" in out.read_text()


MEANT_NAMES = ["state_snapshot", "decision_record", "operational_learning", "task_outcome"]


def test_meant_finds_case_spaces_synonyms_misspellings_and_words_of_a_name():
    from api.errors import meant

    assert meant(" Decision_Record ", MEANT_NAMES) == "decision_record"
    assert meant("done", ["active", "complete"], synonyms={"done": "complete"}) == "complete"
    assert meant("decison_record", MEANT_NAMES) == "decision_record"
    assert meant("learning", MEANT_NAMES) == "operational_learning"  # one "_"-separated word of a name
    assert meant("decision", MEANT_NAMES, cutoff=0.99) == "decision_record"  # the word, not the spelling
    assert meant("task.outcome", MEANT_NAMES) == meant("Task-Outcome", MEANT_NAMES) == "task_outcome"
    assert meant("outcome_task", MEANT_NAMES) == "task_outcome"  # the words in another order
    assert meant("colony_state_snapshot", MEANT_NAMES) == "state_snapshot"  # behind a prefix
    assert meant("zzz", MEANT_NAMES) is None
    assert meant("   ", MEANT_NAMES) is None
