"""Importing a bank template manifest (docs/behaviour.md#bank-templates): the bank created if it
does not exist, the config keys the manifest sets applied over the bank's overrides, mental
models matched by id and directives by name — created when absent, updated when they differ,
left alone when they do not — all in one transaction, so a manifest that fails anywhere writes
nothing.

Each write goes through the service that owns it, so an import does what the same call over the
API does: a created model queues its first refresh (``mental_model_create``); an updated one
changes as a PATCH changes it (``mental_model_update``: no refresh queued, a running one fenced
and followed by one more); a directive created or changed makes the pages it applies to stale
(``directive_create`` / ``directive_update``). A dry run decides the same and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from hindsight.banks.selectors import bank_exists
from hindsight.banks.services import bank_config_update, bank_ensure, bank_id_validate
from hindsight.infra.errors import Conflict
from mentalmodels.bank_templates.manifest import DirectiveSpec, Manifest, ModelSpec
from mentalmodels.directives.models import Directive
from mentalmodels.directives.services import directive_create, directive_update
from mentalmodels.models import MentalModel
from mentalmodels.services import mental_model_create, mental_model_update
from mentalmodels.triggers import trigger_fill


@dataclass
class ImportResult:
    bank_id: str
    dry_run: bool
    config_applied: bool = False
    mental_models_created: list[str] = field(default_factory=list)
    mental_models_updated: list[str] = field(default_factory=list)
    mental_models_unchanged: list[str] = field(default_factory=list)
    directives_created: list[str] = field(default_factory=list)
    directives_updated: list[str] = field(default_factory=list)
    directives_unchanged: list[str] = field(default_factory=list)
    operation_ids: list[str] = field(default_factory=list)


def _model_unchanged(stored: MentalModel, spec: ModelSpec) -> bool:
    """Re-applying ``spec`` would leave ``stored`` as it is (empty manifest tags leave the
    stored tags alone, so they are no difference)."""
    return (stored.name == spec.name and stored.source_query == spec.source_query
            and stored.max_tokens == spec.max_tokens
            and (not spec.tags or set(stored.tags) == set(spec.tags))
            and trigger_fill(stored.trigger or {}) == spec.trigger)


def _directive_unchanged(stored: Directive, spec: DirectiveSpec) -> bool:
    return (stored.content == spec.content and stored.priority == spec.priority
            and stored.is_active == spec.is_active
            and (not spec.tags or set(stored.tags) == set(spec.tags)))


def _directives_by_name(*, bank_id: str, names: list[str]) -> dict[str, Directive]:
    found: dict[str, Directive] = {}
    for directive in Directive.objects.select_for_update().filter(bank_id=bank_id,
                                                                  name__in=names):
        if directive.name in found:
            raise Conflict(f"Bank '{bank_id}' holds more than one directive named "
                           f"{directive.name!r}: a template matches directives by name, so it "
                           "cannot tell which to update; rename or delete one first")
        found[directive.name] = directive
    return found


def _apply_models(result: ImportResult, *, bank_id: str, specs: list[ModelSpec]) -> None:
    stored = {m.mental_model_id: m for m in MentalModel.objects.filter(
        bank_id=bank_id, mental_model_id__in=[s.id for s in specs])}
    writes: list[ModelSpec] = []
    for spec in specs:
        current = stored.get(spec.id)
        if current is None:
            result.mental_models_created.append(spec.id)
            writes.append(spec)
        elif _model_unchanged(current, spec):
            result.mental_models_unchanged.append(spec.id)
        else:
            result.mental_models_updated.append(spec.id)
            writes.append(spec)
    if result.dry_run:
        return
    operations: dict[str, str] = {}
    # Sorted by id: two imports touching the same models take their leases in the same order.
    for spec in sorted(writes, key=lambda s: s.id):
        if spec.id in stored:
            mental_model_update(bank_id=bank_id, mental_model_id=spec.id, name=spec.name,
                                source_query=spec.source_query, tags=spec.tags or None,
                                max_tokens=spec.max_tokens, trigger=spec.trigger)
        else:
            _, operation = mental_model_create(
                bank_id=bank_id, name=spec.name, source_query=spec.source_query,
                tags=spec.tags, max_tokens=spec.max_tokens, trigger=spec.trigger,
                mental_model_id=spec.id)
            operations[spec.id] = str(operation.id)
    result.operation_ids = [operations[i] for i in result.mental_models_created]


def _apply_directives(result: ImportResult, *, bank_id: str,
                      specs: list[DirectiveSpec]) -> None:
    stored = _directives_by_name(bank_id=bank_id, names=[s.name for s in specs])
    for spec in specs:
        current = stored.get(spec.name)
        if current is None:
            result.directives_created.append(spec.name)
            if not result.dry_run:
                directive_create(bank_id=bank_id, name=spec.name, content=spec.content,
                                 priority=spec.priority, is_active=spec.is_active, tags=spec.tags)
        elif _directive_unchanged(current, spec):
            result.directives_unchanged.append(spec.name)
        else:
            result.directives_updated.append(spec.name)
            if not result.dry_run:
                directive_update(bank_id=bank_id, directive_id=str(current.id),
                                 content=spec.content, priority=spec.priority,
                                 is_active=spec.is_active, tags=spec.tags or None)


@transaction.atomic
def bank_template_import(*, bank_id: str, manifest: Manifest, dry_run: bool = False
                         ) -> ImportResult:
    """Apply ``manifest`` (parsed: ``manifest_parse``) to ``bank_id``, or with ``dry_run`` say
    what applying it would do."""
    bank_id_validate(bank_id)
    result = ImportResult(bank_id=bank_id, dry_run=dry_run,
                          config_applied=bool(manifest.config))
    if not dry_run:
        bank_ensure(bank_id=bank_id)
        if manifest.config:
            bank_config_update(bank_id=bank_id, updates=manifest.config)
    if dry_run and not bank_exists(bank_id=bank_id):
        result.mental_models_created = [s.id for s in manifest.models]
        result.directives_created = [s.name for s in manifest.directives]
        return result
    _apply_models(result, bank_id=bank_id, specs=manifest.models)
    _apply_directives(result, bank_id=bank_id, specs=manifest.directives)
    return result

