"""Shared fixtures live in plugin modules, each owned by the package it tests."""

import pytest

# Helpers that assert for a test (pytest rewrites plugin modules' asserts by itself).
pytest.register_assert_rewrite("tests.wirebytes")

pytest_plugins = [
    "tests.fakes.fixtures",
    "tests.queue",
    "tests.workers",
    "tests.live",
    "tests.dbflush",
    "tests.clients",
    "tests.webhooks.receiver",
]

# The longest tests (tens of seconds each: their own whole stack, a browser, node, many
# processes racing), longest first. Under pytest-xdist they are collected first, so each starts
# at once on a worker of its own and the short tests fill in around them; collected where they
# are, one of them started near the end set the run's length.
LONG_TESTS = (
    "tests/test_chaos_bounded.py",
    "tests/test_chaos_cuts.py",
    "tests/test_devstack_run.py::test_run_starts_embedded_servers",
    "tests/test_schemathesis.py",  # three xdist groups (see the module)
    "tests/browser/",
    "tests/banks/test_consolidation_worker.py::test_burst_of_twenty",
    "tests/operations/test_coalescing.py::test_concurrent_submits_from_many_processes",
    "tests/knowledge/test_race.py",
    "tests/compat_node/",
    "tests/operations/test_queue_model.py",
    "tests/mentalmodels/test_awaiting_llm.py",
    "tests/mentalmodels/test_failure_classes.py",
    "tests/operations/test_workers.py::test_jobs_of_one_key_never_overlap",
    "tests/operations/test_threads_pool.py",
    "tests/operations/test_fast_recovery.py",
    "tests/test_llm_outage.py",
    "tests/operations/test_broker_restart.py",
    "tests/operations/test_worker_probe.py",
    "tests/compat/test_client_webhooks.py",
    "tests/webhooks/test_delivery.py",
    "tests/webhooks/test_slow_receiver.py",
)


def _long_rank(item: pytest.Item) -> int:
    for rank, prefix in enumerate(LONG_TESTS):
        if item.nodeid.startswith(prefix):
            return rank
    return len(LONG_TESTS)


@pytest.hookimpl(trylast=True)  # after pytest-django's own ordering, which it keeps otherwise
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_long_rank)  # stable: the rest keep their order
