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
]

# The tests that start a whole stack of their own (servers, gunicorn, workers, a browser, node):
# under pytest-xdist (``--dist loadgroup``) they run one after another on one xdist worker while
# the others share out the rest of the suite.
WHOLE_STACK_TESTS = (
    "tests/test_chaos_bounded.py",
    "tests/test_devstack_run.py",
    "tests/browser/",
    "tests/compat_node/",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(WHOLE_STACK_TESTS):
            item.add_marker(pytest.mark.xdist_group("whole-stack"))
