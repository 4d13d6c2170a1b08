from __future__ import annotations

from django.apps import AppConfig


class MentalModelsConfig(AppConfig):
    name = "mentalmodels"
    verbose_name = "Mental models"

    def ready(self) -> None:
        from functools import partial

        from hindsight.banks.selectors import tag_counts, tag_source_register
        from operations.registry import register

        from mentalmodels.handlers import RefreshMentalModelHandler
        from mentalmodels.models import MentalModel

        register(RefreshMentalModelHandler())
        tag_source_register(
            "mental_models", partial(tag_counts, table=MentalModel._meta.db_table)
        )
