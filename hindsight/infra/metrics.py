"""The service's Prometheus counters and histograms (prometheus_client), shared by every layer.

Code that does the work increments these (the engine, the refresh handler, the LLM gateway,
consolidation); ``operations.metrics`` serves them at ``/metrics`` together with the queue
gauges it reads from the database at scrape time.

**Multiprocess mode.** The work happens in many processes: gunicorn's workers serve the API and
Celery's prefork children run the jobs, and a scrape reaches one gunicorn worker. So every
process writes its values to memory-mapped files under ``PROMETHEUS_MULTIPROC_DIR`` and the
scrape sums them (prometheus_client's ``MultiProcessCollector``). An exporter per worker would
have to be scraped per prefork child or proxied by the parent; one directory of files needs
nothing running and survives a child's recycling (a dead child's counts stay in its file). The
directory is set by ``make run`` (``.devdata/metrics``, emptied at each start), by the image
(``Dockerfile``; docker-compose mounts one volume there for the web and worker containers) and by
the test session.
File names carry the host name as well as the pid, so the containers sharing one volume never
write into each other's files. Without the variable the values are per process (a ``manage.py
runserver``, a shell), and ``/metrics`` shows that process's own.

Labels are bounded: outcomes, modes and purposes are enums of the code, and ``bank`` is bounded
by the number of banks. No model ids, operation ids or LLM model names become labels.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable

from prometheus_client import Counter, Histogram, values

from hindsight.infra.vocabulary import REFRESH_MODES, RefreshOutcome

MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def _process_identifier() -> str:
    # prometheus_client's multiprocess files are named "<type>_<identifier>.db" and split on
    # "_": the identifier must not contain one.
    host = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())
    return f"{host}-{os.getpid()}"


if MULTIPROC_DIR:
    os.makedirs(MULTIPROC_DIR, exist_ok=True)
    # Before any metric below is created: each value then lives in this process's own file.
    values.ValueClass = values.MultiProcessValue(process_identifier=_process_identifier)

# A refresh superseded by a newer one (its fence lost) has no wire outcome; the metric counts it.
REFRESH_OUTCOMES = (*(outcome.value for outcome in RefreshOutcome), "superseded")
CONSOLIDATION_OUTCOMES = ("completed", "failed")

refresh_duration_seconds = Histogram(
    "hindsight_refresh_duration_seconds",
    "Wall time of one refresh attempt of a mental model, by outcome and effective mode.",
    ["outcome", "mode"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
refreshes_total = Counter(
    "hindsight_refreshes",
    "Refresh attempts of mental models, by outcome (superseded: an edit took the key over).",
    ["outcome"],
)
consolidation_runs_total = Counter(
    "hindsight_consolidation_runs",
    "Consolidation runs of a bank, by outcome.",
    ["outcome"],
)
llm_requests_total = Counter(
    "hindsight_llm_requests",
    "LLM calls through the gateway (a call's transient retries count once), by bank, purpose "
    "and status.",
    ["bank", "purpose", "status"],
)
llm_input_tokens_total = Counter(
    "hindsight_llm_input_tokens", "LLM input (prompt) tokens, by bank and purpose.",
    ["bank", "purpose"],
)
llm_output_tokens_total = Counter(
    "hindsight_llm_output_tokens", "LLM output (completion) tokens, by bank and purpose.",
    ["bank", "purpose"],
)
operations_recovered_total = Counter(
    "hindsight_operations_recovered",
    "Running operations taken back from a silent worker by the recovery sweep, by type.",
    ["operation_type"],
)
lock_contention_total = Counter(
    "hindsight_operation_lock_contention",
    "Runs of an operation that found its key's lock held (left pending for the holder to hand "
    "on), by type.",
    ["operation_type"],
)

operations_held_total = Counter(
    "hindsight_operations_held",
    "Due operations a handler's hold parked instead of running (reason: llm_token_budget), by "
    "type and reason.",
    ["operation_type", "reason"],
)
refresh_failures_total = Counter(
    "hindsight_refresh_failures",
    "Refresh operations that failed after their last attempt, by failure class (transient: "
    "the model stays unpaused; permanent: it is paused).",
    ["failure_class"],
)
FAILURE_CLASSES = ("transient", "permanent")

FAMILIES = (
    refresh_duration_seconds, refreshes_total, consolidation_runs_total, llm_requests_total,
    llm_input_tokens_total, llm_output_tokens_total, operations_recovered_total,
    lock_contention_total, operations_held_total, refresh_failures_total,
)


def series_declare(*, operation_types: Iterable[str]) -> None:
    """Create at 0 every series whose labels the code knows, so a rate() or an alert has
    something to read before the first event: refresh outcomes (and modes), consolidation
    outcomes, and the per-type counters for every registered operation type (which only the
    app registry knows, so the scrape passes them). Idempotent; in multiprocess mode each
    process that calls it adds zeros to the sum. Series labelled with a value only the traffic
    knows (a bank) cannot exist before it; their families are still listed
    (``operations.metrics``)."""
    for outcome in REFRESH_OUTCOMES:
        refreshes_total.labels(outcome=outcome)
        for mode in REFRESH_MODES:
            refresh_duration_seconds.labels(outcome=outcome, mode=mode)
    for outcome in CONSOLIDATION_OUTCOMES:
        consolidation_runs_total.labels(outcome=outcome)
    for failure_class in FAILURE_CLASSES:
        refresh_failures_total.labels(failure_class=failure_class)
    for operation_type in operation_types:
        operations_recovered_total.labels(operation_type=operation_type)
        lock_contention_total.labels(operation_type=operation_type)


series_declare(operation_types=())

_ITERATION_SUFFIX = re.compile(r"_\d+$")


def purpose_label(purpose: str) -> str:
    """A call's purpose as a bounded label: ``reflect:agent_3`` → ``reflect:agent``."""
    return _ITERATION_SUFFIX.sub("", purpose) or "unspecified"
