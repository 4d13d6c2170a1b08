from __future__ import annotations

from django.apps import AppConfig


class DirectivesConfig(AppConfig):
    name = "mentalmodels.directives"
    label = "directives"
    verbose_name = "Directives"
