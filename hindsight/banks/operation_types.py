"""The operation types the banks app owns (the engine knows them only as strings)."""

from __future__ import annotations

from enum import StrEnum


class BankOperationType(StrEnum):
    RETAIN = "retain"
    CONSOLIDATION = "consolidation"
