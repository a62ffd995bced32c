from django.contrib import admin
from django.urls import include, path, re_path
from django.views import defaults

from api.errors import api_not_found, json_404, json_500
from core.apis import ApiDocsRedocView, ApiDocsSwaggerView, ApiSchemaView
from core.metrics import metrics_view

api_v1 = [
    path("", include("core.urls")),
    path("", include("brain.urls")),
    path("", include("tasks.urls")),
    path("", include("quality.urls")),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/", include(api_v1)),
    path("api/schema/", ApiSchemaView.as_view(), name="schema"),
    path("api/docs/", ApiDocsSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", ApiDocsRedocView.as_view(url_name="schema"), name="api-redoc"),
    # Any other path under /api/ is the JSON 404 envelope, never Django's HTML page (DEBUG or not).
    re_path(r"^api(?:/.*)?$", api_not_found),
    path("", include("web.urls")),
]


def handler404(request, exception):
    if request.path.startswith("/api/"):
        return json_404(request, exception)
    return defaults.page_not_found(request, exception)


def handler500(request):
    import sys

    from api.errors import database_outage_response

    # Called while the exception is being handled: a database outage outside a view (a middleware)
    # is still a 503, not a 500.
    exc = sys.exc_info()[1]
    outage = database_outage_response(request, exc) if exc is not None else None
    if outage is not None:
        return outage
    if request.path.startswith("/api/"):
        return json_500(request)
    return defaults.server_error(request)
