"""The first scrape of a fresh deployment lists every metric family, and every series whose labels
the code knows is there at 0: an alert written against ``hindsight_operations_recovered`` has a
series to read before the first recovery.

The scrape runs in a new process with its own empty multiprocess directory (this session's
directory holds what the other tests did), against this test's database, before any work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.db import connection
from prometheus_client import Counter, Histogram
from prometheus_client.parser import text_string_to_metric_families

from hindsight.infra import metrics
from operations.registry import registered_types

ROOT = Path(__file__).resolve().parent.parent

OUTCOMES = ("content_written", "content_unchanged", "content_preserved_no_new_facts",
            "refresh_failed_error", "refresh_failed_empty_candidate",
            "refresh_failed_structured_output", "refresh_failed_delta_not_applied", "superseded")
OPERATION_TYPES = ("consolidation", "refresh_mental_model", "retain")
# family -> (type, the label sets present at 0 before any work; None: no series exists yet, its
# labels name a bank or a hold's reason)
EXPECTED: dict[str, tuple[str, set[frozenset[tuple[str, str]]] | None]] = {
    "hindsight_refreshes": ("counter", {frozenset({("outcome", o)}) for o in OUTCOMES}),
    "hindsight_refresh_duration_seconds": (
        "histogram",
        {frozenset({("outcome", o), ("mode", m)}) for o in OUTCOMES for m in ("full", "delta")},
    ),
    "hindsight_consolidation_runs": (
        "counter", {frozenset({("outcome", o)}) for o in ("completed", "failed")}),
    "hindsight_operations_recovered": (
        "counter", {frozenset({("operation_type", t)}) for t in OPERATION_TYPES}),
    "hindsight_operation_lock_contention": (
        "counter", {frozenset({("operation_type", t)}) for t in OPERATION_TYPES}),
    "hindsight_refresh_failures": (
        "counter", {frozenset({("failure_class", c)}) for c in ("transient", "permanent")}),
    # Its reason label is named by the hold of a layer above the metrics (the bank's budget).
    "hindsight_operations_held": ("counter", None),
    "hindsight_llm_requests": ("counter", None),
    "hindsight_llm_input_tokens": ("counter", None),
    "hindsight_llm_output_tokens": ("counter", None),
    # The spend gauges, per bank (banks with a budget only for the second): none exists yet.
    "hindsight_llm_tokens_last_24h": ("gauge", None),
    "hindsight_llm_token_budget_per_day": ("gauge", None),
    "hindsight_operations_queue_depth": (
        "gauge",
        {frozenset({("status", s), ("operation_type", t)})
         for s in ("pending", "processing") for t in OPERATION_TYPES},
    ),
    "hindsight_operations_parked": (
        "gauge", {frozenset({("operation_type", t)}) for t in OPERATION_TYPES}),
    "hindsight_operations_oldest_pending_age_seconds": ("gauge", {frozenset()}),
}
SCRAPE = ("from django.test import Client; import pathlib; "
          "pathlib.Path({out!r}).write_bytes(Client().get('/metrics').content)")


def _test_database_url() -> str:
    parts = urlsplit(os.environ["HINDSIGHT_API_DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + connection.settings_dict["NAME"]))


def test_every_counter_and_histogram_of_the_metrics_module_is_a_declared_family() -> None:
    defined = {id(v) for v in vars(metrics).values() if isinstance(v, Counter | Histogram)}
    assert defined == {id(f) for f in metrics.FAMILIES}


@pytest.mark.django_db(transaction=True)
def test_the_first_scrape_lists_every_family_with_every_known_series_at_zero(
    tmp_path: Path,
) -> None:
    assert set(OPERATION_TYPES) <= set(registered_types())
    fresh = tmp_path / "metrics"
    fresh.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(fresh),
           "HINDSIGHT_API_DATABASE_URL": _test_database_url()}
    out = tmp_path / "scrape.txt"
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SCRAPE.format(out=str(out))], cwd=ROOT,
        env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    families = {f.name: f for f in text_string_to_metric_families(out.read_text())}
    declared = {family.name for f in metrics.FAMILIES for family in f.describe()}
    assert declared <= set(EXPECTED)
    # Every family of the service is one this test lists (a new one is added here, with its
    # series at 0 where its labels are known).
    assert {name for name in families if name.startswith("hindsight_")} == set(EXPECTED)
    for name, (kind, label_sets) in EXPECTED.items():
        assert name in families, name
        family = families[name]
        assert family.type == kind, name
        if label_sets is None:
            assert family.samples == [], name
            continue
        present = {}
        for sample in family.samples:
            labels = {k: v for k, v in sample.labels.items() if k != "le"}
            if sample.name.endswith(("_bucket", "_sum", "_count", "_total")) or kind == "gauge":
                present.setdefault(frozenset(labels.items()), []).append(sample.value)
        assert label_sets <= set(present), (name, label_sets - set(present))
        assert all(v == 0 for values in present.values() for v in values), name
