from django.urls import path

from quality.apis import QualityMetricsApi, TurnCreateApi

urlpatterns = [
    path("turns", TurnCreateApi.as_view(), name="turns"),
    path("quality/metrics", QualityMetricsApi.as_view(), name="quality-metrics"),
]
