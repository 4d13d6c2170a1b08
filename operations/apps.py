"""The operations app: registers the built-in handlers and the beat schedules."""

from __future__ import annotations

import importlib

from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_migrate


class OperationsConfig(AppConfig):
    name = "operations"
    verbose_name = "Operations"

    def ready(self) -> None:
        from operations import handlers, tasks  # noqa: F401  (registration by import)
        from operations.schedules import ensure_beat_schedules

        for module in settings.HINDSIGHT.extra_handler_modules:
            importlib.import_module(module)
        post_migrate.connect(ensure_beat_schedules, sender=self,
                             dispatch_uid="operations.ensure_beat_schedules")
