"""The ``hindsight`` console script: a client of the HTTP API (``api``), never of Django.

``main`` is the entry point pyproject declares; the commands live in ``app``, the knowledge
base's (``hindsight kb …``) in ``knowledge``, one memory's (``hindsight memory …``) in
``memories``, the directives' (``hindsight directive …``) in
``directives``, the bank transfer's (``hindsight bank export|import|clone``) in ``transfer``,
bank templates' (``hindsight bank template …``) in ``templates``, review and undo's
(``hindsight mental-model restore|proposals|approve|reject``) in ``review`` and the worker probe's
(``hindsight worker probe``) in ``worker``, registered on the app here
(they use ``app``'s options and helpers, so ``app`` cannot import them).
"""

from __future__ import annotations

from hindsight.surfaces.cli import (
    review,  # noqa: F401 - registers mental-model restore|proposals|…
    transfer,  # noqa: F401 - registers bank export|import|clone
)
from hindsight.surfaces.cli.app import app, bank_app, main
from hindsight.surfaces.cli.directives import directive_app
from hindsight.surfaces.cli.knowledge import kb_app
from hindsight.surfaces.cli.memories import memory_app
from hindsight.surfaces.cli.templates import template_app
from hindsight.surfaces.cli.webhooks import webhook_app
from hindsight.surfaces.cli.worker import worker_app

app.add_typer(kb_app, name="kb")
app.add_typer(directive_app, name="directive")
app.add_typer(memory_app, name="memory")
bank_app.add_typer(template_app, name="template")
app.add_typer(webhook_app, name="webhook")
app.add_typer(worker_app, name="worker")

__all__ = ["main"]
