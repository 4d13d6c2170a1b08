"""Shared database functions: the one clock every write and every cutoff is stamped with."""

from __future__ import annotations

from django.db import models
from django.db.models import Func


class ClockTimestamp(Func):
    """``clock_timestamp()``: the wall clock now, not the transaction's start like ``now()``."""

    function = "clock_timestamp"
    template = "clock_timestamp()"
    output_field = models.DateTimeField()
