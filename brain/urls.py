urlpatterns: list = []

from brain.urls_corrections import urlpatterns as corrections_urlpatterns  # noqa: E402

urlpatterns += corrections_urlpatterns
