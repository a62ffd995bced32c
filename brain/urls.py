from django.urls import path

from brain.apis.corrections import CorrectionAcceptApi, CorrectionDismissApi, CorrectionListApi, ThoughtCorrectApi
from brain.apis.memory import MemoryApi
from brain.apis.thoughts import ThoughtDetailApi, ThoughtLineageApi

urlpatterns = [
    path("memory", MemoryApi.as_view(), name="memory"),
    path("thoughts/<str:thought_id>", ThoughtDetailApi.as_view(), name="thought-detail"),
    path("thoughts/<str:thought_id>/lineage", ThoughtLineageApi.as_view(), name="thought-lineage"),
    path("thoughts/<uuid:thought_id>/correct", ThoughtCorrectApi.as_view(), name="thought-correct"),
    path("corrections", CorrectionListApi.as_view(), name="correction-list"),
    path("corrections/<uuid:suggestion_id>/accept", CorrectionAcceptApi.as_view(), name="correction-accept"),
    path("corrections/<uuid:suggestion_id>/dismiss", CorrectionDismissApi.as_view(), name="correction-dismiss"),
]
