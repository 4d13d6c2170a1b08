"""Reads of webhooks: one, a bank's page of them (oldest first), a webhook's deliveries (newest
first, paged by a cursor: the ``created_at`` of the last one read)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from hindsight.infra.errors import FieldError, NotFound
from hindsight.webhooks.models import Webhook, WebhookDelivery


@dataclass(frozen=True)
class WebhookPage:
    items: list[Webhook]
    total: int


def webhooks_bank_exists(*, bank_id: str) -> bool:
    """Whether the bank exists; this app knows banks only as its foreign key's target."""
    bank_model = Webhook._meta.get_field("bank").related_model
    return bank_model._default_manager.filter(pk=bank_id).exists()


def bank_require(*, bank_id: str) -> None:
    if not webhooks_bank_exists(bank_id=bank_id):
        raise NotFound(f"Bank '{bank_id}' not found")


def webhook_get(*, bank_id: str, webhook_id: str) -> Webhook:
    try:
        key = uuid.UUID(webhook_id)
    except ValueError:
        raise FieldError(("path", "webhook_id"), "Invalid webhook ID: not a UUID",
                         "uuid_parsing") from None
    hook = Webhook.objects.filter(bank_id=bank_id, id=key).first()
    if hook is None:
        raise NotFound("Webhook not found")
    return hook


def webhooks_list(*, bank_id: str, limit: int, offset: int) -> WebhookPage:
    bank_require(bank_id=bank_id)
    rows = Webhook.objects.filter(bank_id=bank_id)
    return WebhookPage(items=list(rows.order_by("created_at", "id")[offset:offset + limit]),
                       total=rows.count())


def webhook_deliveries(*, bank_id: str, webhook_id: str, limit: int,
                       cursor: datetime | None) -> tuple[list[WebhookDelivery], datetime | None]:
    """A page of the webhook's deliveries and the cursor of the next page (None: the last)."""
    hook = webhook_get(bank_id=bank_id, webhook_id=webhook_id)
    rows = WebhookDelivery.objects.filter(webhook=hook, bank_id=bank_id)
    if cursor is not None:
        rows = rows.filter(created_at__lt=cursor)
    page = list(rows.order_by("-created_at", "-id")[:limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return page, (page[-1].created_at if more and page else None)
