"""Reflect routes under /v1/default/."""

from __future__ import annotations

from django.urls import path

from mentalmodels.reflect.views import ReflectView

urlpatterns = [
    path("banks/<str:bank_id>/reflect", ReflectView.as_view(), name="reflect"),
]
