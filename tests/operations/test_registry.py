"""``operations.registry``: handlers by operation type, looked up at run time."""

from __future__ import annotations

import pytest

from operations import registry

TYPE = "test.registry"


@pytest.fixture(autouse=True)
def _clean():
    registry.unregister(TYPE)
    yield
    registry.unregister(TYPE)


class _Handler:
    operation_type = TYPE
    instances = 0

    def __init__(self) -> None:
        type(self).instances += 1

    def run(self, job) -> None:
        pass


def test_an_instance_registers_for_its_operation_type() -> None:
    handler = _Handler()
    assert registry.register(handler) is handler
    assert registry.get_handler(TYPE) is handler
    assert TYPE in registry.registered_types()


def test_a_class_registers_as_one_instance_and_comes_back_unchanged() -> None:
    _Handler.instances = 0
    assert registry.register(_Handler) is _Handler
    handler = registry.get_handler(TYPE)
    assert isinstance(handler, _Handler) and _Handler.instances == 1
    assert registry.get_handler(TYPE) is handler


def test_register_works_as_a_class_decorator() -> None:
    @registry.register
    class Decorated:
        operation_type = TYPE

        def run(self, job) -> None:
            pass

    assert isinstance(Decorated, type)
    assert isinstance(registry.get_handler(TYPE), Decorated)


def test_registering_a_type_again_replaces_the_earlier_handler() -> None:
    first, second = _Handler(), _Handler()
    registry.register(first)
    registry.register(second)
    assert registry.get_handler(TYPE) is second
    assert registry.registered_types().count(TYPE) == 1


@pytest.mark.parametrize("operation_type", [None, "", 7])
def test_a_handler_without_a_non_empty_string_type_is_refused(operation_type) -> None:
    class Bad:
        def run(self, job) -> None:
            pass

    Bad.operation_type = operation_type
    with pytest.raises(ValueError, match="operation_type"):
        registry.register(Bad())


def test_a_handler_without_a_callable_run_is_refused() -> None:
    class NoRun:
        operation_type = TYPE
        run = "not callable"

    with pytest.raises(ValueError, match="run"):
        registry.register(NoRun())
    assert registry.get_handler(TYPE) is None


def test_unknown_types_have_no_handler_and_unregistering_them_is_harmless() -> None:
    assert registry.get_handler("no.such.type") is None
    registry.unregister("no.such.type")
    registry.register(_Handler())
    registry.unregister(TYPE)
    assert registry.get_handler(TYPE) is None
    assert TYPE not in registry.registered_types()


def test_registered_types_are_sorted_and_include_the_built_in_handlers() -> None:
    registry.register(_Handler())
    types = registry.registered_types()
    assert types == sorted(types)
    assert "retain" in types and "refresh_mental_model" in types
