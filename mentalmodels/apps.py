from __future__ import annotations

from django.apps import AppConfig


class MentalModelsConfig(AppConfig):
    name = "mentalmodels"
    verbose_name = "Mental models"

    def ready(self) -> None:
        from operations.registry import register

        from mentalmodels.handlers import RefreshMentalModelHandler

        register(RefreshMentalModelHandler())
