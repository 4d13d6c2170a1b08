"""What the mental-models app plugs into the layers below it, connected once from
``MentalModelsConfig.ready`` (these imports load models, so the app registry must be ready):
the refresh handler and its operation details, the bank transfer's handlers, the worker-start
catch-up of refreshes that waited for an LLM, the consolidation listener, mental-model tags
in the tag registry, and the pages that read a memory (its admin page)."""

from __future__ import annotations

from functools import partial

from celery.signals import worker_ready

from hindsight.banks.hooks import consolidation_listener_register, memory_readers_register
from hindsight.banks.tags import tag_counts, tag_source_register
from mentalmodels.api.operation_details import (
    RefreshMentalModelOperationDetailsSerializer,
    refresh_details_render,
)
from mentalmodels.models import MentalModel
from mentalmodels.refresh.awaiting_llm import refresh_awaiting_llm_at_worker_start
from mentalmodels.refresh.handler import RefreshMentalModelHandler
from mentalmodels.refresh.records import MentalModelOperationType
from mentalmodels.staleness import models_reading
from mentalmodels.transfer.handlers import CloneBankHandler, ExportBankHandler, ImportBankHandler
from mentalmodels.triggers_auto import on_consolidation_completed
from operations.api.details import details_register
from operations.registry import register


def connect() -> None:
    register(RefreshMentalModelHandler())
    for transfer in (ExportBankHandler(), ImportBankHandler(), CloneBankHandler()):
        register(transfer)
    details_register(MentalModelOperationType.REFRESH, render=refresh_details_render,
                     serializer=RefreshMentalModelOperationDetailsSerializer)
    # A worker that starts with an LLM queues the refreshes that waited for one.
    worker_ready.connect(refresh_awaiting_llm_at_worker_start, weak=False)
    consolidation_listener_register(on_consolidation_completed)
    tag_source_register("mental_models", partial(tag_counts, table=MentalModel._meta.db_table))
    memory_readers_register(models_reading)  # the memory admin's "pages it touches"
