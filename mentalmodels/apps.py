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
        from celery.signals import worker_ready

        from mentalmodels.awaiting_llm import refresh_awaiting_llm_at_worker_start

        worker_ready.connect(refresh_awaiting_llm_at_worker_start, weak=False)
        tag_source_register(
            "mental_models", partial(tag_counts, table=MentalModel._meta.db_table)
        )
