from __future__ import annotations

from django.apps import AppConfig


class MentalModelsConfig(AppConfig):
    name = "mentalmodels"
    verbose_name = "Mental models"

    def ready(self) -> None:
        # The registrations import models, which need the app registry ready.
        from mentalmodels.registrations import connect  # noqa: PLC0415

        connect()
