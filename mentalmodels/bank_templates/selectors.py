"""Exporting a bank as a template manifest (docs/behaviour.md#bank-templates): its config
overrides, its mental models' configuration (never their content) and its directives, in
upstream 1.1.0's shape, so the manifest imports there as it does here.

Knowledge-base pages are left out (a template carries no knowledge tree, and a page would come
back as a standalone model). Every key is present, ``null`` when unset, as upstream writes it;
a section with nothing in it is ``null``.
"""

from __future__ import annotations

from typing import Any

from hindsight.banks import bankconfig
from hindsight.banks.selectors import bank_get
from hindsight.infra.errors import FieldError, FieldErrors
from mentalmodels.bank_templates.schema import BANK_KEYS, CURRENT_VERSION
from mentalmodels.directives.models import Directive
from mentalmodels.directives.selectors import ORDER as DIRECTIVE_ORDER
from mentalmodels.models import MentalModel
from mentalmodels.triggers import trigger_fill


def _bank_section(overrides: dict[str, Any]) -> dict[str, Any] | None:
    """The overrides a manifest can carry; one that no longer passes its rule (stored before
    the rule existed) is left out rather than making the bank impossible to export."""
    kept: dict[str, Any] = {}
    for key in BANK_KEYS:
        if overrides.get(key) is None:
            continue
        try:
            kept.update(bankconfig.validate_updates({key: overrides[key]}, loc=("bank",)))
        except (FieldError, FieldErrors):
            continue
    if not kept:
        return None
    return {key: kept.get(key) for key in BANK_KEYS}


def bank_template_export(*, bank_id: str) -> dict[str, Any]:
    """The manifest of ``bank_id`` (404 when there is no such bank)."""
    bank = bank_get(bank_id=bank_id)
    models = [
        {"id": m.mental_model_id, "name": m.name, "source_query": m.source_query,
         "tags": list(m.tags), "max_tokens": m.max_tokens, "trigger": trigger_fill(m.trigger or {})}
        for m in MentalModel.objects.filter(bank_id=bank_id, knowledge_node__isnull=True)
        .only("mental_model_id", "name", "source_query", "tags", "max_tokens", "trigger")
        .order_by("mental_model_id")
    ]
    directives = [
        {"name": d.name, "content": d.content, "priority": d.priority, "is_active": d.is_active,
         "tags": list(d.tags)}
        for d in Directive.objects.filter(bank_id=bank_id).order_by(*DIRECTIVE_ORDER)
    ]
    return {"version": CURRENT_VERSION, "bank": _bank_section(dict(bank.config or {})),
            "mental_models": models or None, "directives": directives or None}
