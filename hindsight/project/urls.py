"""Top-level routes: the v1 API, the MCP endpoint, health, version, metrics, OpenAPI and docs,
admin."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import (
    SpectacularJSONAPIView,
    SpectacularRedocView,
    SpectacularSwaggerView,
)

from hindsight.infra.edge import views as core_views
from hindsight.surfaces.mcp_server.http import mcp_endpoint
from mentalmodels.bank_templates.urls import schema_urlpatterns as bank_template_schema_urls
from operations.metrics import metrics_view

handler400 = "hindsight.infra.edge.errors.json_400"
handler404 = "hindsight.infra.edge.errors.json_404"
handler500 = "hindsight.infra.edge.errors.json_500"

# The admin's "View site" link points at "/", which is no page of this service (a 404).
admin.site.site_url = None

# drf-spectacular's ReDoc page without its Google Fonts links (hindsight/project/templates).
_redoc = SpectacularRedocView.as_view(url_name="openapi", template_name="hindsight/redoc.html")

urlpatterns = [
    path("health", core_views.health, name="health"),
    path("health/live", core_views.health_live, name="health-live"),
    path("health/ready", core_views.health_ready, name="health-ready"),
    path("version", core_views.version, name="version"),
    path("metrics", metrics_view, name="metrics"),
    path("openapi.json", SpectacularJSONAPIView.as_view(), name="openapi"),
    # Both spellings: a trailing slash is what people type after a directory-like name.
    path("docs", SpectacularSwaggerView.as_view(url_name="openapi"), name="docs"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="openapi"), name="docs-slash"),
    path("redoc", _redoc, name="redoc"),
    path("redoc/", _redoc, name="redoc-slash"),
    path("admin/", admin.site.urls),
    path("v1/default/", include("hindsight.banks.urls")),
    path("v1/default/", include("operations.urls")),
    path("v1/default/", include("mentalmodels.urls")),
    path("v1/default/", include("mentalmodels.reflect.urls")),
    path("v1/default/", include("mentalmodels.knowledge.urls")),
    path("v1/default/", include("mentalmodels.transfer.urls")),
    path("v1/default/", include("mentalmodels.directives.urls")),
    path("v1/default/", include("hindsight.webhooks.urls")),
    path("v1/default/", include("mentalmodels.bank_templates.urls")),
    path("v1/", include(bank_template_schema_urls)),
    path("v1/default/", include("mentalmodels.review.urls")),
    # MCP (streamable HTTP): all banks, or one bank pinned by the path.
    path("mcp", mcp_endpoint, name="mcp"),
    path("mcp/", mcp_endpoint),
    path("mcp/<str:bank_id>", mcp_endpoint, name="mcp-bank"),
    path("mcp/<str:bank_id>/", mcp_endpoint),
]
