"""Writes of webhooks: create, update (the fields sent), delete (its deliveries with it). A URL
is checked by the guard on every write that sets it (docs/behaviour.md#webhooks-ssrf-guard).
The bank must exist: this app sits below the banks and creates none."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from hindsight.infra.errors import FieldError
from hindsight.webhooks.guard import DestinationRefused, url_check
from hindsight.webhooks.models import Webhook
from hindsight.webhooks.selectors import bank_require, webhook_get


def _url(url: str) -> str:
    try:
        url_check(url)
    except DestinationRefused as exc:
        raise FieldError(("body", "url"), str(exc), "value_error") from None
    return url


@transaction.atomic
def webhook_create(*, bank_id: str, url: str, secret: str | None = None,
                   event_types: Sequence[str] = ("consolidation.completed",),
                   enabled: bool = True, http_config: Mapping[str, Any] | None = None) -> Webhook:
    bank_require(bank_id=bank_id)
    hook = Webhook.objects.create(
        bank_id=bank_id, url=_url(url), secret=secret or None,
        event_types=list(dict.fromkeys(event_types)), enabled=enabled,
        http_config=dict(http_config or {}))
    hook.refresh_from_db(fields=["created_at", "updated_at"])
    return hook


@transaction.atomic
def webhook_update(*, bank_id: str, webhook_id: str, changes: Mapping[str, Any]) -> Webhook:
    """PATCH: each key of ``changes`` replaces the stored field (``secret`` None clears it).
    Enabling a webhook again starts its run of failures from 0."""
    hook = webhook_get(bank_id=bank_id, webhook_id=webhook_id)
    hook = Webhook.objects.select_for_update().get(pk=hook.pk)
    if "url" in changes:
        hook.url = _url(changes["url"])
    if "secret" in changes:
        hook.secret = changes["secret"] or None
    if "event_types" in changes:
        hook.event_types = list(dict.fromkeys(changes["event_types"]))
    if "http_config" in changes:
        hook.http_config = dict(changes["http_config"])
    if "enabled" in changes:
        if changes["enabled"] and not hook.enabled:
            hook.consecutive_failures = 0
            hook.disabled_reason = None
        hook.enabled = changes["enabled"]
    hook.updated_at = timezone.now()
    hook.save()
    return hook


@transaction.atomic
def webhook_delete(*, bank_id: str, webhook_id: str) -> None:
    hook = webhook_get(bank_id=bank_id, webhook_id=webhook_id)
    Webhook.objects.filter(pk=hook.pk).delete()
