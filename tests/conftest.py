"""Shared fixtures live in plugin modules, each owned by the package it tests."""

pytest_plugins = [
    "tests.fakes.fixtures",
    "tests.queue",
    "tests.workers",
]
