from __future__ import annotations

from django.apps import AppConfig

from operations.registry import register


class BanksConfig(AppConfig):
    name = "hindsight.banks"
    label = "banks"
    verbose_name = "Banks and memories"

    def ready(self) -> None:
        # Handlers import the services, whose models need the app registry ready.
        from hindsight.banks.budget import SpendCollector  # noqa: PLC0415
        from hindsight.banks.handlers import ConsolidationHandler, RetainHandler  # noqa: PLC0415
        from operations.metrics import scrape_collector_register  # noqa: PLC0415

        register(RetainHandler)
        register(ConsolidationHandler)
        scrape_collector_register(SpendCollector())
