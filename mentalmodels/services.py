"""Writes to mental models: create, update, delete, clear, refresh requests, history entries.

Owns the write side of create, clear, history (entries and their per-kind retention), and
edits during a running refresh (docs/behaviour.md#mental-models: edits that invalidate a running
refresh bump its fence and queue a new one)
and the refresh submission (operation ``refresh_mental_model``, coalesced by the operations
engine on the key ``mm:{bank_id}:{mental_model_id}``). The refresh itself lives in
``mentalmodels.refresh``.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from hindsight.banks.budget import bank_budget_require
from hindsight.banks.services import bank_ensure
from hindsight.infra.db import ClockTimestamp
from hindsight.infra.errors import Conflict, FieldError, NotFound
from hindsight.infra.vocabulary import RefreshOutcome
from mentalmodels.events import mental_model_refresh_failed, mental_model_refreshed
from mentalmodels.models import HistoryKind, MentalModel, MentalModelHistory, VersionCause
from mentalmodels.refresh.failure_class import (
    PARKED_BY_FAILURE_BACKOFF,
    FailureClass,
    failure_backoff_seconds,
)
from mentalmodels.refresh.records import MentalModelOperationType
from mentalmodels.triggers import trigger_normalize
from operations.actions import operation_cancel
from operations.leases import lease_bump
from operations.models import PENDING, PROCESSING, Operation
from operations.queue import operation_submit, operations_cancel_parked, operations_defer_automatic

ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,63}$"
_ID_RE = re.compile(ID_PATTERN)
# The keys of a PATCH that change what a refresh reads or asks: editing one while a refresh
# runs makes that refresh's result stale (docs/behaviour.md#edits-during-a-running-refresh).
SCOPE_FIELDS = ("source_query", "tags", "trigger")
# The ``mode`` of the page event a restore sends (a refresh's is full or delta).
RESTORE_MODE = "restore"


def refresh_dedupe_key(*, bank_id: str, mental_model_id: str) -> str:
    return f"mm:{bank_id}:{mental_model_id}"


def mental_model_id_problem(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if not _ID_RE.fullmatch(value):
        return (
            f"must match {ID_PATTERN}: lowercase letters, digits and hyphens, starting with a "
            "letter or digit, at most 64 characters"
        )
    return None


def _get_for_update(*, bank_id: str, mental_model_id: str) -> MentalModel:
    try:
        return MentalModel.objects.select_for_update().get(
            bank_id=bank_id, mental_model_id=mental_model_id
        )
    except MentalModel.DoesNotExist:
        raise NotFound(f"Mental model '{mental_model_id}' not found") from None


def _require_exists(*, bank_id: str, mental_model_id: str) -> None:
    """Not found before any lease is touched: an edit of a model that does not exist bumps
    nothing (and an id no model can have, say 5,000 characters, never reaches the lease key)."""
    if not MentalModel.objects.filter(bank_id=bank_id, mental_model_id=mental_model_id).exists():
        raise NotFound(f"Mental model '{mental_model_id}' not found")


def _refresh_running(*, key: str) -> bool:
    return Operation.objects.filter(dedupe_key=key, status=PROCESSING).exists()


def mental_model_refresh_submit(
    *,
    model: MentalModel,
    mode: str | None = None,
    automatic: bool = False,
    not_before: datetime | None = None,
) -> Any:
    """Queue a refresh of ``model`` (or join the one already queued); returns the operation."""
    result = operation_submit(
        bank_id=model.bank_id,
        operation_type=MentalModelOperationType.REFRESH,
        dedupe_key=refresh_dedupe_key(bank_id=model.bank_id, mental_model_id=model.mental_model_id),
        mental_model_id=model.mental_model_id,
        automatic=automatic,
        payload={"mode": mode} if mode else {},
        not_before=not_before,
        result_metadata={"name": model.name, "mental_model_id": model.mental_model_id},
    )
    return result.operation


@transaction.atomic
def mental_model_create(
    *,
    bank_id: str,
    name: str,
    source_query: str,
    tags: Sequence[str] = (),
    max_tokens: int = 2048,
    trigger: dict[str, Any] | None = None,
    mental_model_id: str | None = None,
) -> tuple[MentalModel, Any]:
    """Create the row (``content: ""``) and queue its first refresh, in one transaction."""
    if mental_model_id is None:
        mental_model_id = f"mm-{uuid.uuid4().hex}"
    else:
        problem = mental_model_id_problem(mental_model_id)
        if problem:
            raise FieldError(("body", "id"), f"id {problem}", "string_pattern_mismatch")
    bank_ensure(bank_id=bank_id)
    model = MentalModel(
        bank_id=bank_id,
        mental_model_id=mental_model_id,
        name=name,
        source_query=source_query,
        tags=list(dict.fromkeys(tags)),
        max_tokens=max_tokens,
        trigger=trigger_normalize(trigger or {}),
    )
    try:
        with transaction.atomic():
            model.save()
    except IntegrityError:
        raise Conflict(
            f"Mental model '{mental_model_id}' already exists in bank '{bank_id}'"
        ) from None
    model.refresh_from_db()
    operation = mental_model_refresh_submit(model=model)
    return model, operation


def mental_model_update(
    *,
    bank_id: str,
    mental_model_id: str,
    name: str | None = None,
    source_query: str | None = None,
    tags: Sequence[str] | None = None,
    max_tokens: int | None = None,
    trigger: dict[str, Any] | None = None,
) -> MentalModel:
    """PATCH: ``None`` leaves a field unchanged; ``trigger`` merges key by key (docs/behaviour.md#triggers).

    Changing ``source_query``, ``tags`` or ``trigger`` while a refresh of the model runs bumps
    its fence, so that refresh cannot write, and queues one more
    (docs/behaviour.md#edits-during-a-running-refresh).
    """
    key = refresh_dedupe_key(bank_id=bank_id, mental_model_id=mental_model_id)
    current = MentalModel.objects.filter(bank_id=bank_id, mental_model_id=mental_model_id).first()
    if current is None:
        raise NotFound(f"Mental model '{mental_model_id}' not found")
    # Running when the edit arrived: it may finish (and write the old configuration) while
    # this waits for the lease below, and still needs the follow-up.
    running_at_arrival = _refresh_running(key=key)
    new_tags = list(dict.fromkeys(tags)) if tags is not None else None
    scope_edit = (
        (source_query is not None and source_query != current.source_query)
        or (new_tags is not None and new_tags != list(current.tags))
        or (trigger is not None and trigger_normalize(trigger, base=current.trigger) != current.trigger)
    )
    with transaction.atomic():
        if scope_edit:
            # Lease before rows: the same lock order as a finishing refresh.
            lease_bump(key=key)
        model = _get_for_update(bank_id=bank_id, mental_model_id=mental_model_id)
        changed: list[str] = []
        if name is not None and name != model.name:
            model.name = name
            changed.append("name")
        if source_query is not None and source_query != model.source_query:
            model.source_query = source_query
            changed.append("source_query")
        if new_tags is not None and new_tags != list(model.tags):
            model.tags = new_tags
            changed.append("tags")
        if max_tokens is not None and max_tokens != model.max_tokens:
            model.max_tokens = max_tokens
            changed.append("max_tokens")
        if trigger is not None:
            new_trigger = trigger_normalize(trigger, base=model.trigger)
            if new_trigger != model.trigger:
                model.trigger = new_trigger
                changed.append("trigger")
        if changed:
            model.updated_at = ClockTimestamp()
            model.save(update_fields=[*changed, "updated_at"])
        if scope_edit and (running_at_arrival or _refresh_running(key=key)):
            mental_model_refresh_submit(model=model)
    model.refresh_from_db()
    return model


def mental_model_delete(*, bank_id: str, mental_model_id: str) -> None:
    """Delete the model and its history; a running refresh may no longer write
    (docs/behaviour.md#edits-during-a-running-refresh)."""
    key = refresh_dedupe_key(bank_id=bank_id, mental_model_id=mental_model_id)
    _require_exists(bank_id=bank_id, mental_model_id=mental_model_id)
    with transaction.atomic():
        # Lease before rows: the same lock order as a finishing refresh.
        lease_bump(key=key)
        model = _get_for_update(bank_id=bank_id, mental_model_id=mental_model_id)
        model.delete()
        queued = list(
            Operation.objects.filter(dedupe_key=key, status=PENDING).values_list("id", flat=True)
        )
    # Queued refreshes have nothing left to refresh.
    for operation_id in queued:
        try:
            operation_cancel(bank_id=bank_id, operation_id=operation_id)
        except (Conflict, NotFound):  # claimed meanwhile: that job meets the bumped fence
            pass


def mental_model_clear(*, bank_id: str, mental_model_id: str) -> MentalModel:
    """docs/behaviour.md#clear: keep the content as a version, empty the document, reset the watermark.

    ``reflect_response`` and the configuration stay. A refresh running meanwhile may no
    longer write (its fence is bumped) and one refresh is queued behind it, so the model ends
    rebuilt from empty under its current configuration.
    """
    key = refresh_dedupe_key(bank_id=bank_id, mental_model_id=mental_model_id)
    _require_exists(bank_id=bank_id, mental_model_id=mental_model_id)
    running_at_arrival = _refresh_running(key=key)  # see mental_model_update
    with transaction.atomic():
        # Lease before rows (a finishing refresh's lock order); a refresh that runs now can no
        # longer write, and one claimed after this commits reads the cleared model.
        lease_bump(key=key)
        model = _get_for_update(bank_id=bank_id, mental_model_id=mental_model_id)
        if model.content:
            history_record_version(
                model=model,
                previous_content=model.content,
                previous_document=model.document,
                previous_reflect_response=model.reflect_response,
                reason=VersionCause.CLEARED,
            )
        model.content = ""
        model.document = None
        model.last_memory_seen_at = None
        model.last_refresh_source_query = None
        model.updated_at = ClockTimestamp()
        model.save(
            update_fields=[
                "content", "document", "last_memory_seen_at", "last_refresh_source_query",
                "updated_at",
            ]
        )
        if running_at_arrival or _refresh_running(key=key):
            mental_model_refresh_submit(model=model)
    model.refresh_from_db()
    return model


def mental_model_restore(*, bank_id: str, mental_model_id: str, version_id: int) -> MentalModel:
    """docs/behaviour.md#restore: put back the content and structured document a version entry
    of this model's history keeps, byte for byte, recording the restore as a version of its
    own (so it is undone by restoring that one).

    Fenced as an edit: a refresh running meanwhile may no longer write (its result was made
    from the page being replaced). The watermark and the last refresh's source query are
    forgotten, as a clear does: the model reads stale as soon as its scope holds a memory and
    its next refresh reads the whole scope. No refresh is queued: the restored page stands until
    one is asked for or an automatic trigger comes due.
    """
    key = refresh_dedupe_key(bank_id=bank_id, mental_model_id=mental_model_id)
    _require_exists(bank_id=bank_id, mental_model_id=mental_model_id)
    with transaction.atomic():
        lease_bump(key=key)  # lease before rows: a finishing refresh's lock order
        model = _get_for_update(bank_id=bank_id, mental_model_id=mental_model_id)
        entry = MentalModelHistory.objects.filter(id=version_id, model=model).first()
        if entry is None:
            raise NotFound(f"Version {version_id} not found in the history of mental model "
                           f"'{mental_model_id}'")
        if entry.kind != HistoryKind.VERSION:
            raise FieldError(("body", "version_id"),
                             f"version_id {version_id} names a {entry.kind} entry: only a "
                             "version entry keeps content to restore")
        history_record_version(
            model=model,
            previous_content=model.content,
            previous_document=model.document,
            previous_reflect_response=model.reflect_response,
            reason=VersionCause.RESTORED,
        )
        before = copy.copy(model)
        model.content = entry.previous_content or ""
        model.document = entry.previous_document
        model.last_memory_seen_at = None
        model.last_refresh_source_query = None
        model.updated_at = ClockTimestamp()
        model.save(update_fields=["content", "document", "last_memory_seen_at",
                                  "last_refresh_source_query", "updated_at"])
        # docs/behaviour.md#page-events: the page changed, as after a refresh.
        mental_model_refreshed(before=before, after=model, operation_id=None,
                               outcome=VersionCause.RESTORED, mode=RESTORE_MODE)
    model.refresh_from_db()
    return model


_REFRESH_SUBMIT_FIELDS = ("uid", "bank_id", "mental_model_id", "name")


def mental_model_refresh_request(
    *, bank_id: str, mental_model_id: str, mode: str | None = None
) -> Any:
    """A manual refresh (API, admin): returns the queued operation (coalesced, docs/behaviour.md#coalescing).

    A bank that spent its token budget answers ``BudgetSpent`` (429), nothing queued."""
    with transaction.atomic():
        try:
            # What the submit reads of it (``mental_model_refresh_submit``): not the stored
            # answer and document, parsed from JSON at every refresh request for nothing.
            model = MentalModel.objects.only(*_REFRESH_SUBMIT_FIELDS).get(
                bank_id=bank_id, mental_model_id=mental_model_id)
        except MentalModel.DoesNotExist:
            raise NotFound(f"Mental model {mental_model_id} not found in bank {bank_id}") from None
        bank_budget_require(bank_id=bank_id)
        return mental_model_refresh_submit(model=model, mode=mode)


# ---------------------------------------------------------------------------------------------
# History (docs/behaviour.md#history)


def slim_reflect_response(reflect_response: dict[str, Any] | None) -> dict[str, Any] | None:
    """The part of a replaced reflect_response a version keeps: ``based_on`` and ``trace``."""
    if not reflect_response:
        return None
    slim: dict[str, Any] = {"based_on": reflect_response.get("based_on") or {}}
    if reflect_response.get("trace") is not None:
        slim["trace"] = reflect_response["trace"]
    return slim


# An entry and the trim of its kind, in one statement: keep the newest N entries of the kind
# (failures never evict versions, and vice versa). The statements of a data-modifying CTE share
# one snapshot, so the DELETE does not see the row being inserted: it keeps the newest N - 1 of
# the others, and the new entry (the newest: stamped now) is the N-th. One round trip instead of
# an ORM create() and a trim (a second statement, and the ORM's delete collector).
_HISTORY_ADD_SQL = f"""
WITH entry AS (
    INSERT INTO {MentalModelHistory._meta.db_table}
        (model_id, kind, changed_at, previous_content, previous_document,
         previous_reflect_response, outcome, reason, exception, operation_id)
    VALUES (%s, %s, clock_timestamp(), %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s)
    RETURNING *
), trimmed AS (
    DELETE FROM {MentalModelHistory._meta.db_table}
     WHERE model_id = %s AND kind = %s AND id NOT IN (
           SELECT id FROM {MentalModelHistory._meta.db_table}
            WHERE model_id = %s AND kind = %s
            ORDER BY changed_at DESC, id DESC
            LIMIT %s)
)
SELECT * FROM entry
"""


def _history_add(
    *,
    model_uid: int,
    kind: str,
    previous_content: str | None = None,
    previous_document: Any = None,
    previous_reflect_response: dict[str, Any] | None = None,
    outcome: str | None = None,
    reason: str | None = None,
    exception: str | None = None,
    operation_id: uuid.UUID | str | None = None,
) -> MentalModelHistory:
    """Add an entry of ``kind`` and trim the kind to the newest N (``_HISTORY_ADD_SQL``)."""
    keep = settings.HINDSIGHT.mental_model_history_max_entries
    response = (json.dumps(previous_reflect_response)
                if previous_reflect_response is not None else None)
    document = json.dumps(previous_document) if previous_document is not None else None
    [entry] = MentalModelHistory.objects.raw(_HISTORY_ADD_SQL, [
        model_uid, str(kind), previous_content, document, response, outcome, reason, exception,
        str(operation_id) if operation_id is not None else None,
        model_uid, str(kind), model_uid, str(kind), keep - 1,
    ])
    return entry


def history_record_version(
    *,
    model: MentalModel,
    previous_content: str,
    previous_reflect_response: dict[str, Any] | None,
    previous_document: Any = None,
    operation_id: uuid.UUID | str | None = None,
    reason: str | None = None,
) -> MentalModelHistory | None:
    """A version entry: the content and structured document a change replaces (what a restore
    puts back), the slim reflect response, and what made the change (``reason``: a
    ``VersionCause``, null for a refresh)."""
    if not settings.HINDSIGHT.enable_mental_model_history:
        return None
    return _history_add(
        model_uid=model.uid,
        kind=HistoryKind.VERSION,
        previous_content=previous_content,
        previous_document=previous_document,
        previous_reflect_response=slim_reflect_response(previous_reflect_response),
        reason=reason,
        operation_id=operation_id,
    )


def history_record_failure(
    *,
    model_uid: int,
    reason: str,
    exception: str,
    operation_id: uuid.UUID | str | None,
    outcome: str = RefreshOutcome.REFRESH_FAILED_ERROR,
) -> MentalModelHistory | None:
    """One entry per failed attempt (a retried refresh records one per attempt), under the
    attempt's outcome (a ``refresh_failed_*`` value) and failure reason."""
    if not settings.HINDSIGHT.enable_mental_model_history:
        return None
    with transaction.atomic():
        if not MentalModel.objects.filter(uid=model_uid).exists():
            return None
        return _history_add(
            model_uid=model_uid,
            kind=HistoryKind.FAILURE,
            outcome=outcome,
            reason=reason,
            exception=exception[:4000],
            operation_id=operation_id,
        )


def mental_model_record_failure(
    *,
    model_uid: int,
    reason: str,
    exception: str,
    operation_id: uuid.UUID | str | None,
    final: bool,
    trace: dict[str, Any] | None = None,
    outcome: str = RefreshOutcome.REFRESH_FAILED_ERROR,
    failure: FailureClass | None = None,
) -> None:
    """A failed attempt's bookkeeping, in one transaction (the engine's failure transaction,
    when called from the refresh handler): a failure entry, the trace (keep_trace), and on the
    last attempt ``last_refresh_failed_at`` and what the failure's class calls for
    (``mentalmodels.refresh.failure_class``):

    - permanent (the default): the pause — the model's automatic refreshes are cancelled
    (docs/behaviour.md#retries-and-the-pause),
      so an operation never ends ``failed`` with its model left unpaused;
    - transient: no pause; one more failure in a row, automatic refreshes wait until
      ``auto_refresh_not_before`` (the backoff, or the provider's Retry-After), and an
      automatic refresh already queued for the model is parked until then.

    The model row is locked first (lock order: lease → model → operations), then the entry is
    written, then the automatic operations of its key are cancelled or parked."""
    with transaction.atomic():
        model = MentalModel.objects.select_for_update().filter(uid=model_uid).first()
        if model is None:
            return
        history_record_failure(
            model_uid=model_uid, reason=reason, exception=exception, operation_id=operation_id,
            outcome=outcome,
        )
        fields: list[str] = []
        if trace is not None and (model.trigger or {}).get("keep_trace"):
            # Failures keep their trace: it is the only record a failed run leaves behind.
            model.reflect_response = {**(model.reflect_response or {}), "trace": trace}
            fields.append("reflect_response")
        transient = final and failure is not None and failure.transient
        not_before: datetime | None = None
        if final:
            model.last_refresh_failed_at = ClockTimestamp()
            model.last_refresh_failure_transient = transient
            fields += ["last_refresh_failed_at", "last_refresh_failure_transient"]
        if transient:
            assert failure is not None
            model.refresh_failure_streak += 1
            wait = failure_backoff_seconds(streak=model.refresh_failure_streak,
                                           retry_after=failure.retry_after)
            not_before = timezone.now() + timedelta(seconds=wait)
            model.auto_refresh_not_before = not_before
            fields += ["refresh_failure_streak", "auto_refresh_not_before"]
        if fields:
            model.save(update_fields=fields)
        key = refresh_dedupe_key(bank_id=model.bank_id, mental_model_id=model.mental_model_id)
        if transient:
            assert not_before is not None
            # Not paused, but not hammering an LLM that is down: an automatic refresh queued
            # behind the failed job waits out the backoff too. A manual one stays due.
            operations_defer_automatic(dedupe_key=key, until=not_before, parked_by={
                "reason": PARKED_BY_FAILURE_BACKOFF,
                "message": f"automatic refreshes wait until {not_before.isoformat()} after "
                           f"{model.refresh_failure_streak} transient failure(s) in a row",
            })
        elif final:
            # Paused: no automatic refresh may run, neither a parked one nor one queued behind
            # the failed job (it would spend another round of attempts). A manual one stays.
            operations_cancel_parked(dedupe_key=key, parked_only=False)
        if final:  # docs/behaviour.md#page-events
            mental_model_refresh_failed(model=model, operation_id=operation_id, outcome=outcome,
                                        reason=reason, error=exception, paused=not transient)
