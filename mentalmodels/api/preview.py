"""The dry run's wire shape (``POST …/mental-models/{id}/dry-run-refresh``), from its ``Preview``."""

from __future__ import annotations

import difflib
from typing import Any

from mentalmodels.refresh_types import Preview
from mentalmodels.trace import iso_z


def preview_diff(preview: Preview) -> str:
    """The unified diff from the current document to the one the refresh would write."""
    return "".join(
        difflib.unified_diff(
            preview.current_content.splitlines(keepends=True),
            preview.outcome.content.splitlines(keepends=True),
            fromfile="current",
            tofile="preview",
        )
    )


def render_preview(preview: Preview) -> dict[str, Any]:
    plan, decided, model = preview.plan, preview.outcome, preview.model
    scope = plan.scope
    based_on = {k: v for k, v in decided.based_on.items() if v} if decided.reflected else {}
    return {
        "mental_model_id": model.mental_model_id,
        "name": model.name,
        "requested_mode": plan.requested_mode,
        "effective_mode": plan.effective_mode,
        "mode_fallback_reason": plan.mode_fallback_reason,
        "outcome": decided.outcome,
        "would_persist": preview.would_persist,
        "scope": {
            "tags": list(scope.tags) if scope.tags else None,
            "tags_match": scope.tags_match,
            "tag_groups": scope.tag_groups_json(),
            "fact_types": list(scope.fact_types) if scope.fact_types else None,
            "exclude_mental_models": plan.exclude_mental_models,
            "exclude_mental_model_ids": plan.exclude_ids,
        },
        "window": {
            "created_after": iso_z(plan.window_after),
            "created_before": iso_z(plan.cutoff),
            "watermark": iso_z(decided.watermark),
        },
        "facts": {"retrieved": decided.facts_retrieved, "used": decided.facts_used},
        "based_on": based_on,
        "current_content": preview.current_content,
        "candidate_content": decided.candidate,
        "preview_content": decided.content,
        "diff": preview_diff(preview),
        # Null in full mode; a delta run that asked for no operations applied none.
        "delta_operations": (
            (decided.delta_operations or {"applied": [], "skipped": []})
            if plan.effective_mode == "delta" else None
        ),
        "retraction": None,
        "trace": preview.trace,
        "usage": preview.usage,
        "duration_ms": preview.duration_ms,
        "warnings": preview.warnings,
    }
