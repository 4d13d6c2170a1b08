"""URL routes of this app under /v1/default/."""

from __future__ import annotations

from django.urls import path

from mentalmodels.api import views

_BASE = "banks/<str:bank_id>/mental-models"
_ITEM = _BASE + "/<str:mental_model_id>"

urlpatterns = [
    path(_BASE, views.MentalModelCollection.as_view(), name="mental-models"),
    path(_ITEM, views.MentalModelItem.as_view(), name="mental-model"),
    path(_ITEM + "/refresh", views.MentalModelRefresh.as_view(), name="mental-model-refresh"),
    path(_ITEM + "/clear", views.MentalModelClear.as_view(), name="mental-model-clear"),
    path(_ITEM + "/history", views.MentalModelHistoryView.as_view(), name="mental-model-history"),
    path(
        _ITEM + "/dry-run-refresh",
        views.MentalModelDryRun.as_view(),
        name="mental-model-dry-run-refresh",
    ),
]
