"""The webhooks API's wire format (upstream 1.1.0's ``CreateWebhookRequest``,
``UpdateWebhookRequest``, ``WebhookHttpConfig``, ``WebhookResponse``, ``WebhookListResponse``,
``WebhookDeliveryResponse``, ``WebhookDeliveryListResponse``), in the edge idiom.

Deliberate differences from upstream: an event type nobody sends is a 422 (upstream stores any
string and never matches it); ``http_config.method`` is GET or POST, its timeout 1..300 s; a
webhook answers two keys more, ``consecutive_failures`` and ``disabled_reason`` (why it was
disabled automatically). The secret is never answered (``secret`` is always null, as
upstream's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from django.conf import settings
from rest_framework import serializers

from hindsight.infra.edge.serializers import (
    Body,
    Boolean,
    Choice,
    Integer,
    List,
    Object,
    Query,
    Rendered,
    Text,
    computed,
    const,
    limit_field,
    offset_field,
    page_fields,
)
from hindsight.infra.errors import FieldError
from hindsight.infra.vocabulary import WEBHOOK_EVENTS, WebhookEvent
from hindsight.webhooks.delivery import DEFAULT_HTTP_CONFIG
from hindsight.webhooks.outbox import MAX_TIMEOUT_SECONDS

DEFAULT_EVENT_TYPES = [WebhookEvent.CONSOLIDATION_COMPLETED.value]


class WebhookHttpConfigSerializer(Body):
    component_name = "WebhookHttpConfig"

    method = Text(required=False, default="POST", help_text="HTTP method: GET or POST")
    timeout_seconds = Integer(required=False, default=30, min_value=1,
                              max_value=MAX_TIMEOUT_SECONDS,
                              help_text="HTTP request timeout in seconds")
    headers = Object(child=Text(allow_blank=True), required=False, default=dict,
                     help_text="Custom HTTP headers")
    params = Object(child=Text(allow_blank=True), required=False, default=dict,
                    help_text="Custom HTTP query parameters")

    def validate_method(self, value: str) -> str:
        if value.upper() not in ("GET", "POST"):
            raise FieldError((), "the method is GET or POST", "literal_error")
        return value.upper()


def _event_types(**kwargs: Any) -> List:
    return List(child=Choice(choices=WEBHOOK_EVENTS), help_text=(
        "Event types to deliver: " + ", ".join(f"'{e}'" for e in WEBHOOK_EVENTS)), **kwargs)


class CreateWebhookRequestSerializer(Body):
    component_name = "CreateWebhookRequest"

    url = Text(help_text="HTTP(S) endpoint URL to deliver events to")
    secret = Text(required=False, allow_null=True, default=None,
                  help_text="HMAC-SHA256 signing secret (optional)")
    event_types = _event_types(required=False, default=DEFAULT_EVENT_TYPES, null_as_absent=True)
    enabled = Boolean(required=False, default=True, null_as_absent=True,
                      help_text="Whether this webhook is active")
    http_config = WebhookHttpConfigSerializer(required=False, allow_null=True,
                                              help_text="HTTP delivery configuration")

    @staticmethod
    def service_kwargs(data: Mapping[str, Any]) -> dict[str, Any]:
        return {"url": data["url"], "secret": data.get("secret"),
                "event_types": data.get("event_types") or DEFAULT_EVENT_TYPES,
                "enabled": data["enabled"],
                "http_config": data.get("http_config") or DEFAULT_HTTP_CONFIG}


class UpdateWebhookRequestSerializer(Body):
    """Only the fields sent change; ``secret`` null clears it; nothing sent is a 422."""

    component_name = "UpdateWebhookRequest"
    when_absent: ClassVar[Mapping[str, Any]] = {}

    url = Text(required=False, allow_null=True, help_text="HTTP(S) endpoint URL")
    secret = Text(required=False, allow_null=True,
                  help_text="HMAC-SHA256 signing secret. Omit to keep existing; send null to clear.")
    event_types = _event_types(required=False, allow_null=True)
    enabled = Boolean(required=False, allow_null=True, help_text="Whether this webhook is active")
    http_config = WebhookHttpConfigSerializer(required=False, allow_null=True,
                                              help_text="HTTP delivery configuration")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise FieldError((), "No fields provided to update", "missing")
        # Null for anything but the secret is "unchanged".
        return {k: v for k, v in attrs.items() if v is not None or k == "secret"}


class WebhookListQuerySerializer(Query):
    limit = limit_field(100, 1000, minimum=0)
    offset = offset_field()


class WebhookDeliveryListQuerySerializer(Query):
    limit = limit_field(50, 200)
    cursor = Text(required=False, help_text="Pagination cursor (created_at of last item)")


class WebhookHttpConfigResponseSerializer(Rendered):
    method = serializers.CharField()
    timeout_seconds = serializers.IntegerField()
    headers = serializers.DictField(child=serializers.CharField())
    params = serializers.DictField(child=serializers.CharField())


class WebhookResponseSerializer(Rendered):
    id = computed(serializers.CharField(), lambda h: str(h.id))
    bank_id = serializers.CharField(allow_null=True)
    url = serializers.CharField()
    secret = const(serializers.CharField(allow_null=True,
                                         help_text="Signing secret (redacted in responses)"),
                   None)
    event_types = serializers.ListField(child=serializers.CharField())
    enabled = serializers.BooleanField()
    http_config = computed(WebhookHttpConfigResponseSerializer(),
                           lambda h: {**DEFAULT_HTTP_CONFIG, **(h.http_config or {})})
    created_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)
    consecutive_failures = serializers.IntegerField(
        help_text="Deliveries in a row that ended failed")
    disabled_reason = serializers.CharField(
        allow_null=True, help_text="Why the webhook was disabled automatically, if it was")


class WebhookListResponseSerializer(Rendered):
    items = WebhookResponseSerializer(many=True)
    total, limit, offset = page_fields()


def _body(delivery: Any) -> str | None:
    return delivery.last_response_body if settings.HINDSIGHT.webhook_expose_response_body else None


class WebhookDeliveryResponseSerializer(Rendered):
    id = computed(serializers.CharField(), lambda d: str(d.id))
    event_id = computed(serializers.CharField(allow_null=True), lambda d: str(d.event_id))
    webhook_id = computed(serializers.CharField(allow_null=True),
                          lambda d: str(d.webhook_id) if d.webhook_id else None)
    url = serializers.CharField()
    event_type = serializers.CharField()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    next_retry_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField(allow_null=True)
    last_response_status = serializers.IntegerField(allow_null=True)
    last_response_body = computed(serializers.CharField(allow_null=True), _body)
    last_attempt_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)


class WebhookDeliveryListResponseSerializer(Rendered):
    items = WebhookDeliveryResponseSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class WebhookDeleteResponseSerializer(Rendered):
    """Upstream's ``DeleteResponse``."""

    success = const(serializers.BooleanField(), True)
    message = const(serializers.CharField(allow_null=True), "Webhook deleted")
    deleted_count = const(serializers.IntegerField(allow_null=True), 1)
