"""Shared fixtures live in plugin modules, each owned by the package it tests."""

import pytest

# Helpers that assert for a test (pytest rewrites plugin modules' asserts by itself).
pytest.register_assert_rewrite("tests.wirebytes")

pytest_plugins = [
    "tests.fakes.fixtures",
    "tests.queue",
    "tests.workers",
    "tests.live",
]
