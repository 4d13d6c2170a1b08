"""The ``hindsight`` console script: a client of the HTTP API (``api``), never of Django.

``main`` is the entry point pyproject declares; the commands live in ``app``, the knowledge
base's (``hindsight kb …``) in ``knowledge``, registered on the app here (``knowledge`` uses
``app``'s options and helpers, so ``app`` cannot import it).
"""

from __future__ import annotations

from hindsight.surfaces.cli.app import app, main
from hindsight.surfaces.cli.knowledge import kb_app

app.add_typer(kb_app, name="kb")

__all__ = ["main"]
