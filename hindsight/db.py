"""Shared database functions: the one clock every write and every cutoff is stamped with, and
the one writer of pgvector's text literal."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from django.db import models
from django.db.models import Func


class ClockTimestamp(Func):
    """``clock_timestamp()``: the wall clock now, not the transaction's start like ``now()``."""

    function = "clock_timestamp"
    template = "clock_timestamp()"
    output_field = models.DateTimeField()


def vector_literal(values: Sequence[float]) -> str:
    """``values`` as the ``vector`` literal PostgreSQL parses (``'[x,y,…]'``), the float32 each
    component is stored as, written in one formatting call: nine significant digits give back
    the same float32 (``FLT_DECIMAL_DIG``), in fewer bytes and far less Python than pgvector's
    ``str(float)`` per component."""
    components = np.asarray(values, dtype=np.float32).tolist()
    return _vector_format(len(components)) % tuple(components)


@functools.cache
def _vector_format(dimensions: int) -> str:
    return "[" + ",".join(["%.9g"] * dimensions) + "]"
