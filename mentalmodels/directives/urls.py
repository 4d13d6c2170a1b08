"""URL routes of directives under /v1/default/."""

from __future__ import annotations

from django.urls import path

from mentalmodels.directives.api import views

_BASE = "banks/<str:bank_id>/directives"

urlpatterns = [
    path(_BASE, views.DirectiveCollection.as_view(), name="directives"),
    path(_BASE + "/<str:directive_id>", views.DirectiveItem.as_view(), name="directive"),
]
