"""An operation's typed ``details`` on the wire, one shape per operation type.

The engine knows no operation type: the app that owns one registers how its details render and
the serializer that documents them (``details_register``, from its ``AppConfig.ready``). An
operation of a type without a shape shows ``details: null``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rest_framework import serializers


@dataclass(frozen=True)
class DetailsShape:
    # The stored details of a finished operation → the wire's ``details`` (None: not typed yet).
    render: Callable[[dict[str, Any]], dict[str, Any] | None]
    # Documents the rendered shape (OpenAPI).
    serializer: type[serializers.Serializer]


_SHAPES: dict[str, DetailsShape] = {}


def details_register(
    operation_type: str,
    *,
    render: Callable[[dict[str, Any]], dict[str, Any] | None],
    serializer: type[serializers.Serializer],
) -> None:
    _SHAPES[str(operation_type)] = DetailsShape(render=render, serializer=serializer)


def details_shape(operation_type: str) -> DetailsShape | None:
    return _SHAPES.get(operation_type)


def details_serializer() -> type[serializers.Serializer] | None:
    """The serializer documenting ``details`` (one registered shape; None without any)."""
    shapes = list(_SHAPES.values())
    return shapes[0].serializer if len(shapes) == 1 else None
