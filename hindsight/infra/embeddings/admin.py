"""The embedding profile in the admin: read-only (``manage.py reembed`` is the one writer)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from hindsight.infra.embeddings.models import EmbeddingProfile


@admin.register(EmbeddingProfile)
class EmbeddingProfileAdmin(admin.ModelAdmin):
    list_display = ("provider", "model", "dimensions", "recorded_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
