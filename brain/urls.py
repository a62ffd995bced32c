from django.urls import path

from brain.apis.memory import MemoryApi
from brain.apis.thoughts import ThoughtDetailApi, ThoughtLineageApi

urlpatterns = [
    path("memory", MemoryApi.as_view(), name="memory"),
    path("thoughts/<str:thought_id>", ThoughtDetailApi.as_view(), name="thought-detail"),
    path("thoughts/<str:thought_id>/lineage", ThoughtLineageApi.as_view(), name="thought-lineage"),
]
