"""URL routes of this app under /v1/default/."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
