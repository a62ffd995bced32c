from drf_spectacular.utils import OpenApiResponse, extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from api import fields as strict
from api.errors import envelope_response
from core.choices import AgentRole
from core.health import health_summary


class HealthOutputSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "error"], help_text="ok only when every part is up.")
    database = serializers.BooleanField()
    pgvector = serializers.CharField(allow_null=True, help_text="Installed pgvector version; null when missing.")
    broker = serializers.BooleanField()
    worker = serializers.BooleanField(help_text="A worker wrote its heartbeat in the last 30 s.")
    embedding_model = serializers.CharField()


class HealthApi(APIView):
    """Health of Colony and what it depends on: 200 when everything is up, 503 otherwise."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        responses={
            200: HealthOutputSerializer,
            503: OpenApiResponse(HealthOutputSerializer, description="Some part is down: the same body, status error."),
        }
    )
    def get(self, request):
        strict.query_none(request)
        body = health_summary()
        return Response(body, status=200 if body["status"] == "ok" else 503)


class MeOutputSerializer(serializers.Serializer):
    agent_id = serializers.UUIDField()
    name = serializers.CharField()
    role = serializers.ChoiceField(choices=AgentRole.values)
    space = serializers.CharField(help_text="The slug of the agent's space.")


class MeApi(APIView):
    """Who the token belongs to: the agent, its role and its space."""

    @extend_schema(responses={200: MeOutputSerializer})
    def get(self, request):
        strict.query_none(request)
        agent = request.user
        return Response({"agent_id": str(agent.id), "name": agent.name, "role": agent.role, "space": agent.space.slug})


class _EnvelopeErrors:
    """The schema and docs views render YAML or HTML; their errors (405 ...) are the JSON envelope all the same."""

    def handle_exception(self, exc):
        return envelope_response(super().handle_exception(exc))


class ApiSchemaView(_EnvelopeErrors, SpectacularAPIView):
    pass


class ApiDocsSwaggerView(_EnvelopeErrors, SpectacularSwaggerView):
    template_name = "api/swagger_ui.html"  # the stock template, its inline script under the page's CSP nonce


class ApiDocsRedocView(_EnvelopeErrors, SpectacularRedocView):
    template_name = "api/redoc.html"  # the stock template without its Google Fonts links
