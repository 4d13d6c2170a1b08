from __future__ import annotations

from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "mentalmodels.knowledge"
    label = "knowledge"
    verbose_name = "Knowledge base"
