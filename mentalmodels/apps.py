from __future__ import annotations

from functools import partial

from celery.signals import worker_ready
from django.apps import AppConfig

from operations.registry import register


class MentalModelsConfig(AppConfig):
    name = "mentalmodels"
    verbose_name = "Mental models"

    def ready(self) -> None:
        # These modules import models, which need the app registry ready.
        from hindsight.banks.tags import tag_counts, tag_source_register  # noqa: PLC0415
        from mentalmodels.awaiting_llm import refresh_awaiting_llm_at_worker_start  # noqa: PLC0415
        from mentalmodels.handlers import MentalModel, RefreshMentalModelHandler  # noqa: PLC0415

        register(RefreshMentalModelHandler())
        # A worker that starts with an LLM queues the refreshes that waited for one.
        worker_ready.connect(refresh_awaiting_llm_at_worker_start, weak=False)
        tag_source_register(
            "mental_models", partial(tag_counts, table=MentalModel._meta.db_table)
        )
