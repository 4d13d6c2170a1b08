"""The operations app: registers its tasks and the beat schedules."""

from __future__ import annotations

import importlib

from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_migrate


class OperationsConfig(AppConfig):
    name = "operations"
    verbose_name = "Operations"

    def ready(self) -> None:
        # Celery registers the tasks on import; their modules need the app registry ready.
        from operations import schedules, tasks  # noqa: F401, PLC0415

        for module in settings.HINDSIGHT.extra_handler_modules:
            importlib.import_module(module)
        post_migrate.connect(schedules.ensure_beat_schedules, sender=self,
                             dispatch_uid="operations.ensure_beat_schedules")
