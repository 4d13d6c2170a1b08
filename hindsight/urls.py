"""Top-level routes: the v1 API, health, version, metrics, OpenAPI and docs, admin."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerView

from hindsight.api import views as core_views
from operations.metrics import metrics_view

handler400 = "hindsight.api.errors.json_400"
handler404 = "hindsight.api.errors.json_404"
handler500 = "hindsight.api.errors.json_500"

urlpatterns = [
    path("health", core_views.health, name="health"),
    path("version", core_views.version, name="version"),
    path("metrics", metrics_view, name="metrics"),
    path("openapi.json", SpectacularJSONAPIView.as_view(), name="openapi"),
    path("docs", SpectacularSwaggerView.as_view(url_name="openapi"), name="docs"),
    path("admin/", admin.site.urls),
    path("v1/default/", include("hindsight.banks.urls")),
    path("v1/default/", include("operations.urls")),
    path("v1/default/", include("mentalmodels.urls")),
    path("v1/default/", include("mentalmodels.reflect.urls")),
]
