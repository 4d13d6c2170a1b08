"""``hindsight mental-model restore|proposals|approve|reject``: review and undo over the HTTP API
(wiring only, as ``app``; docs/behaviour.md#restore, docs/behaviour.md#review-before-apply)::

    hindsight mental-model restore BANK MENTAL_MODEL_ID VERSION_ID
    hindsight mental-model proposals BANK MENTAL_MODEL_ID [--status pending] [--diff]
    hindsight mental-model approve BANK MENTAL_MODEL_ID PROPOSAL_ID
    hindsight mental-model reject BANK MENTAL_MODEL_ID PROPOSAL_ID --reason "…"

A version's id is in ``hindsight mental-model history``; a proposal's in ``proposals``.
Registered on the ``mental-model`` app by ``hindsight.surfaces.cli`` (``__init__``).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Group
from rich.panel import Panel
from rich.text import Text

from hindsight.surfaces.cli import render
from hindsight.surfaces.cli.app import (
    Bank,
    ModelId,
    OutputOpt,
    _answer,
    _settings,
    _show,
    mental_model_app,
)

ProposalId = Annotated[str, typer.Argument(metavar="PROPOSAL_ID", show_default=False,
                                           help="A proposal's id (see `proposals`).")]
STATUSES = ("pending", "approved", "rejected", "superseded", "expired")


def _counts(changes: dict[str, Any]) -> str:
    counts = changes.get("counts") or {}
    return (f"+{counts.get('lines_added', 0)} -{counts.get('lines_removed', 0)} lines, "
            f"{counts.get('sections_added', 0)}/{counts.get('sections_changed', 0)}/"
            f"{counts.get('sections_removed', 0)} sections added/changed/removed")


def _proposal(proposal: dict[str, Any], *, diff: bool = True) -> None:
    rows = [("status", proposal["status"]), ("created", proposal["created_at"]),
            ("expires", proposal["expires_at"]), ("decided", proposal["decided_at"]),
            ("reason", proposal["reason"]), ("operation", proposal["operation_id"]),
            ("memories", sum(len(v or []) for v in (proposal["based_on"] or {}).values())),
            ("changes", _counts(proposal["changes"] or {})),
            ("version", proposal["version_id"]), ("superseded by", proposal["superseded_by"])]
    parts: list[Any] = [render.key_values("", rows)]
    if diff:
        unified = (proposal["changes"] or {}).get("unified") or ""
        parts.append(render.coloured_diff(unified) if unified
                     else Text("(no change)", style="dim"))
    render.out.print(Panel(Group(*parts), title=f"proposal {proposal['id']}", title_align="left",
                           border_style="green" if proposal["status"] == "pending" else "dim"))


def _proposals(body: dict[str, Any], *, diff: bool) -> None:
    if not body["items"]:
        render.message("no proposals")
        return
    for proposal in body["items"]:
        _proposal(proposal, diff=diff)


@mental_model_app.command("restore")
def mm_restore(
    ctx: typer.Context, bank: Bank, mental_model_id: ModelId,
    version_id: Annotated[int, typer.Argument(metavar="VERSION_ID", show_default=False,
                                              help="A version's id (see `history`).")],
    output: OutputOpt = None,
) -> None:
    """Put back the page a history version kept (a version too: undo it the same way)."""
    settings = _settings(ctx)
    with settings.api() as api:
        model = api.mental_model_restore(bank, mental_model_id, version_id)
    _answer(settings, output, model,
            f"Restored version {version_id} of mental model {mental_model_id}")


@mental_model_app.command("proposals")
def mm_proposals(
    ctx: typer.Context, bank: Bank, mental_model_id: ModelId,
    status: Annotated[str | None, typer.Option(
        "--status", help=f"Only {'|'.join(STATUSES)}.")] = None,
    diff: Annotated[bool, typer.Option("--diff/--no-diff",
                                       help="Show each proposal's line diff.")] = True,
    output: OutputOpt = None,
) -> None:
    """The refreshes' changes held for review, newest first, each with its diff."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.proposal_list(bank, mental_model_id, status=status)
    _show(settings, output, body, lambda b: _proposals(b, diff=diff))


@mental_model_app.command("approve")
def mm_approve(ctx: typer.Context, bank: Bank, mental_model_id: ModelId,
               proposal_id: ProposalId, output: OutputOpt = None) -> None:
    """Apply a pending proposal as a new version of the page."""
    settings = _settings(ctx)
    with settings.api() as api:
        proposal = api.proposal_approve(bank, mental_model_id, proposal_id)
    _answer(settings, output, proposal,
            f"Approved proposal {proposal_id}: the page it replaced is version "
            f"{proposal['version_id']} (restore it to undo)")


@mental_model_app.command("reject")
def mm_reject(
    ctx: typer.Context, bank: Bank, mental_model_id: ModelId, proposal_id: ProposalId,
    reason: Annotated[str, typer.Option("--reason", help="Why (kept with the proposal).",
                                        show_default=False)],
    output: OutputOpt = None,
) -> None:
    """Discard a pending proposal, keeping why; the page stays as it is."""
    settings = _settings(ctx)
    with settings.api() as api:
        proposal = api.proposal_reject(bank, mental_model_id, proposal_id, reason)
    _answer(settings, output, proposal, f"Rejected proposal {proposal_id}")
