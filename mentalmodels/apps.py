from __future__ import annotations

from django.apps import AppConfig


class MentalModelsConfig(AppConfig):
    name = "mentalmodels"
    verbose_name = "Mental models"

    def ready(self) -> None:
        from hindsight.banks.selectors import tag_source_register
        from operations.registry import register

        from mentalmodels.handlers import RefreshMentalModelHandler
        from mentalmodels.selectors import mental_model_tags

        register(RefreshMentalModelHandler())
        tag_source_register("mental_models", mental_model_tags)
