from django.urls import path

from brain.apis.corrections import CorrectionAcceptApi, CorrectionDismissApi, CorrectionListApi, ThoughtCorrectApi
from brain.apis.memory import MemoryApi
from brain.apis.thoughts import ThoughtDetailApi, ThoughtLineageApi, ThoughtListApi, ThoughtRetractApi
from brain.transfer.apis import ThoughtImportApi

# Ids are <str:...> and parsed by the selectors, so a malformed id is the same JSON 404
# (THOUGHT_NOT_FOUND / SUGGESTION_NOT_FOUND) as an unknown one, not the router's generic 404.
urlpatterns = [
    path("memory", MemoryApi.as_view(), name="memory"),
    path("thoughts", ThoughtListApi.as_view(), name="thought-list"),
    path("thoughts/<str:thought_id>/retract", ThoughtRetractApi.as_view(), name="thought-retract"),
    path("thoughts/import", ThoughtImportApi.as_view(), name="thought-import"),
    path("thoughts/<str:thought_id>", ThoughtDetailApi.as_view(), name="thought-detail"),
    path("thoughts/<str:thought_id>/lineage", ThoughtLineageApi.as_view(), name="thought-lineage"),
    path("thoughts/<str:thought_id>/correct", ThoughtCorrectApi.as_view(), name="thought-correct"),
    path("corrections", CorrectionListApi.as_view(), name="correction-list"),
    path("corrections/<str:suggestion_id>/accept", CorrectionAcceptApi.as_view(), name="correction-accept"),
    path("corrections/<str:suggestion_id>/dismiss", CorrectionDismissApi.as_view(), name="correction-dismiss"),
]
