from django.urls import path

from core.apis import HealthApi, MeApi

urlpatterns = [
    path("health", HealthApi.as_view(), name="health"),
    path("agents/me", MeApi.as_view(), name="agent-me"),
]
