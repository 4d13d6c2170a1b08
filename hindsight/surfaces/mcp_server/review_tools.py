"""The review-and-undo MCP tools (ours: upstream 1.1.0 has none), for an agent that curates its
pages: read a page's history with each version's change, restore a version, read the changes a
refresh holds for review, approve or reject one (docs/behaviour.md#restore,
docs/behaviour.md#review-before-apply).

``get_mental_model_history``, ``list_mental_model_proposals`` (read-only),
``restore_mental_model_version``, ``approve_mental_model_proposal`` and
``reject_mental_model_proposal`` (writes: each is undone by a restore or a refresh, so none is
marked destructive). Like every tool here, each is one call of the HTTP API (``HindsightApi``):
it validates, answers and fails exactly as the API does; a refusal is a tool error carrying the
server's message. ``review_tools(call)`` builds them around the registry's ``call``
(``hindsight.surfaces.mcp_server.tools._call``); ``REVIEW_TOOL_ANNOTATIONS`` holds their hints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.types import ToolAnnotations
from pydantic import Field

from hindsight.infra.config import MCP_REVIEW_TOOL_NAMES
from hindsight.surfaces.cli.api import HindsightApi
from hindsight.surfaces.mcp_server.knowledge_tools import BankArg

Call = Callable[[str | None, Callable[[HindsightApi, str], Any]], Any]

_READ_ONLY = ("get_mental_model_history", "list_mental_model_proposals")
REVIEW_TOOL_ANNOTATIONS: dict[str, ToolAnnotations] = {
    name: ToolAnnotations(read_only_hint=name in _READ_ONLY,
                          destructive_hint=None if name in _READ_ONLY else False,
                          open_world_hint=False)
    for name in MCP_REVIEW_TOOL_NAMES
}

ModelIdArg = Annotated[str, Field(description="The mental model's id.")]
ProposalIdArg = Annotated[str, Field(description="A proposal's id (list_mental_model_proposals).")]
StatusArg = Annotated[
    Literal["pending", "approved", "rejected", "superseded", "expired"] | None,
    Field(description="Only the proposals in this status (all when left out)."),
]


def review_tools(call: Call) -> dict[str, Callable[..., dict[str, Any]]]:
    """The tools, by name, calling the API through ``call``."""

    def get_mental_model_history(mental_model_id: ModelIdArg,
                                 bank_id: BankArg = None) -> dict[str, Any]:
        """A mental model's history, newest first: each version's id (what
        restore_mental_model_version takes), what made the change (cause) and the change itself
        (changes: sections and blocks added, changed and removed, and the line diff); failed
        refreshes too."""
        entries = call(bank_id, lambda api, bank: api.mental_model_history(bank, mental_model_id))
        return {"items": entries}

    def restore_mental_model_version(
        mental_model_id: ModelIdArg,
        version_id: Annotated[int, Field(ge=1, description="A version's id "
                                                           "(get_mental_model_history).")],
        bank_id: BankArg = None,
    ) -> dict[str, Any]:
        """Put back the page a history version kept, byte for byte. The restore is a version of
        its own: restoring that one undoes it."""
        model = call(bank_id, lambda api, bank: api.mental_model_restore(bank, mental_model_id,
                                                                         version_id))
        return {"mental_model_id": model["id"], "status": "restored", "content": model["content"],
                "message": f"Version {version_id} restored; the page's history records it."}

    def list_mental_model_proposals(mental_model_id: ModelIdArg, status: StatusArg = None,
                                    bank_id: BankArg = None) -> dict[str, Any]:
        """The changes refreshes of a model under review proposed, newest first, each with its
        diff against the page it was made from, the memories it rests on and its status."""
        result: dict[str, Any] = call(bank_id, lambda api, bank: api.proposal_list(
            bank, mental_model_id, status=status))
        return result

    def approve_mental_model_proposal(mental_model_id: ModelIdArg, proposal_id: ProposalIdArg,
                                      bank_id: BankArg = None) -> dict[str, Any]:
        """Apply a pending proposal as a new version of the page (version_id names the page it
        replaced: restore it to undo)."""
        result: dict[str, Any] = call(bank_id, lambda api, bank: api.proposal_approve(
            bank, mental_model_id, proposal_id))
        return result

    def reject_mental_model_proposal(
        mental_model_id: ModelIdArg, proposal_id: ProposalIdArg,
        reason: Annotated[str, Field(min_length=1, description="Why the change is wrong "
                                                               "(kept with the proposal).")],
        bank_id: BankArg = None,
    ) -> dict[str, Any]:
        """Discard a pending proposal, keeping the reason; the page stays as it is."""
        result: dict[str, Any] = call(bank_id, lambda api, bank: api.proposal_reject(
            bank, mental_model_id, proposal_id, reason))
        return result

    tools = {fn.__name__: fn for fn in (
        get_mental_model_history, restore_mental_model_version, list_mental_model_proposals,
        approve_mental_model_proposal, reject_mental_model_proposal)}
    assert tuple(tools) == MCP_REVIEW_TOOL_NAMES
    return tools
