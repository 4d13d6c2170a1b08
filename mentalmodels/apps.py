from __future__ import annotations

from functools import partial

from celery.signals import worker_ready
from django.apps import AppConfig

from operations.api.details import details_register
from operations.registry import register


class MentalModelsConfig(AppConfig):
    name = "mentalmodels"
    verbose_name = "Mental models"

    def ready(self) -> None:
        # These modules import models, which need the app registry ready.
        from hindsight.banks.hooks import consolidation_listener_register  # noqa: PLC0415
        from hindsight.banks.tags import tag_counts, tag_source_register  # noqa: PLC0415
        from mentalmodels.api.operation_details import (  # noqa: PLC0415
            RefreshMentalModelOperationDetailsSerializer,
            refresh_details_render,
        )
        from mentalmodels.awaiting_llm import refresh_awaiting_llm_at_worker_start  # noqa: PLC0415
        from mentalmodels.handlers import MentalModel, RefreshMentalModelHandler  # noqa: PLC0415
        from mentalmodels.refresh_types import MentalModelOperationType  # noqa: PLC0415
        from mentalmodels.triggers_auto import on_consolidation_completed  # noqa: PLC0415

        register(RefreshMentalModelHandler())
        details_register(MentalModelOperationType.REFRESH, render=refresh_details_render,
                         serializer=RefreshMentalModelOperationDetailsSerializer)
        # A worker that starts with an LLM queues the refreshes that waited for one.
        worker_ready.connect(refresh_awaiting_llm_at_worker_start, weak=False)
        consolidation_listener_register(on_consolidation_completed)
        tag_source_register(
            "mental_models", partial(tag_counts, table=MentalModel._meta.db_table)
        )
