from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from core.health import health_summary


class HealthApi(APIView):
    """Health of Colony and what it depends on: 200 when everything is up, 503 otherwise."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(responses={200: dict, 503: dict})
    def get(self, request):
        body = health_summary()
        return Response(body, status=200 if body["status"] == "ok" else 503)


class MeApi(APIView):
    """Who the token belongs to: the agent, its role and its space."""

    @extend_schema(responses={200: dict})
    def get(self, request):
        agent = request.user
        return Response({"agent_id": str(agent.id), "name": agent.name, "role": agent.role, "space": agent.space.slug})
