"""URLs of knowledge evolution: correction suggestions and correcting a thought (SPEC 5)."""

from django.urls import path

from brain.apis.corrections import (
    CorrectionAcceptApi,
    CorrectionDismissApi,
    CorrectionListApi,
    ThoughtCorrectApi,
)

urlpatterns = [
    path("corrections", CorrectionListApi.as_view(), name="correction-list"),
    path("corrections/<uuid:suggestion_id>/accept", CorrectionAcceptApi.as_view(), name="correction-accept"),
    path("corrections/<uuid:suggestion_id>/dismiss", CorrectionDismissApi.as_view(), name="correction-dismiss"),
    path("thoughts/<uuid:thought_id>/correct", ThoughtCorrectApi.as_view(), name="thought-correct"),
]
