"""``/metrics``: the service's counters (``hindsight.infra.metrics``, summed over every process that
wrote them) and the queue's gauges, read from the operations table at scrape time.

The gauges are not kept by the processes that change the queue: a counter of "pending" kept in
memory would drift with every crash, lost message and recovery, while the table is the truth
(DESIGN: PostgreSQL is the one source of truth). One query per scrape, over the operations
still queued (``operations.selectors.operations_queue_gauges``). Apps above the engine add
gauges of their own the same way (``scrape_collector_register``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from hindsight.infra import metrics
from operations.models import PENDING, PROCESSING
from operations.registry import registered_types
from operations.selectors import operations_queue_gauges


class QueueCollector:
    """Queue depth by status and type, parked operations by type, the oldest due pending age.

    Every registered operation type appears (0 when it has nothing queued), so an alert on a
    series never meets an absent one.
    """

    def collect(self) -> Iterator[Metric]:
        gauges = operations_queue_gauges()
        types = sorted({*registered_types(), *(t for _, t in gauges.depth), *gauges.parked})
        depth = GaugeMetricFamily(
            "hindsight_operations_queue_depth",
            "Operations still queued, by status (pending includes parked) and type.",
            labels=["status", "operation_type"],
        )
        for status in (PENDING, PROCESSING):
            for operation_type in types:
                depth.add_metric([status, operation_type],
                                 gauges.depth.get((status, operation_type), 0))
        yield depth
        parked = GaugeMetricFamily(
            "hindsight_operations_parked",
            "Pending operations parked until a future next_retry_at (rate floor or retry "
            "backoff), by type.",
            labels=["operation_type"],
        )
        for operation_type in types:
            parked.add_metric([operation_type], gauges.parked.get(operation_type, 0))
        yield parked
        yield GaugeMetricFamily(
            "hindsight_operations_oldest_pending_age_seconds",
            "Age of the oldest pending operation that is due (not parked); 0 when none waits.",
            value=gauges.oldest_pending_age_seconds,
        )


_collectors: list[Any] = []


def scrape_collector_register(collector: Any) -> None:
    """Add a collector read at every scrape (an app above the engine registers its gauges in
    its ``AppConfig.ready``: banks' token spend and budgets). Idempotent per collector class."""
    if not any(type(c) is type(collector) for c in _collectors):
        _collectors.append(collector)


class _ThisProcess:
    """Without a multiprocess directory: this process's own values (a runserver, a shell)."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


class _EveryFamily:
    """The service's counters from ``source``, plus an empty family (HELP and TYPE) for each
    one no process has written yet: in multiprocess mode a family exists only once a series of
    it was created, so one labelled by a bank would be missing until the first LLM call."""

    def __init__(self, source: MultiProcessCollector | _ThisProcess):
        self.source = source

    def collect(self) -> Iterator[Metric]:
        seen = set()
        for family in self.source.collect():
            seen.add(family.name)
            yield family
        for declared in metrics.FAMILIES:
            for family in declared.describe():
                if family.name not in seen:
                    yield family


def scrape_registry() -> CollectorRegistry:
    # This process's zeros for every series whose labels the code knows (registered types too).
    metrics.series_declare(operation_types=registered_types())
    registry = CollectorRegistry()
    source = (MultiProcessCollector(None, path=metrics.MULTIPROC_DIR) if metrics.MULTIPROC_DIR
              else _ThisProcess())
    registry.register(_EveryFamily(source))
    registry.register(QueueCollector())
    for collector in _collectors:
        registry.register(collector)
    return registry


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)
