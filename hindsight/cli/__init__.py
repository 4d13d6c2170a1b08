"""The ``hindsight`` console script: a client of the HTTP API (``api``), never of Django.

``main`` is the entry point pyproject declares; the commands live in ``app``.
"""

from __future__ import annotations

from hindsight.cli.app import main

__all__ = ["main"]
