"""Tenant API key, request size limit, health/version/OpenAPI: the shared API edges."""

from __future__ import annotations

import dataclasses

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def tenant_key(settings) -> str:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, tenant_api_key="s3cret")
    return "s3cret"


@pytest.mark.django_db
def test_v1_requires_the_bearer_key_when_configured(tenant_key: str) -> None:
    client = APIClient()
    assert client.get("/v1/default/banks/nope/operations").status_code == 401
    wrong = client.get("/v1/default/banks/nope/operations", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401
    assert wrong.json()["detail"].startswith("missing or invalid API key")
    right = client.get("/v1/default/banks/nope/operations", HTTP_AUTHORIZATION=f"Bearer {tenant_key}")
    assert right.status_code != 401


@pytest.mark.django_db
def test_health_version_and_docs_stay_open_with_a_key(tenant_key: str) -> None:
    client = APIClient()
    assert client.get("/health").status_code == 200
    assert client.get("/version").json()["api_version"]
    schema = client.get("/openapi.json")
    assert schema.status_code == 200


def test_oversized_body_is_a_413_naming_the_limit(settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, max_request_bytes=2048)
    response = APIClient().post(
        "/v1/default/banks/b/memories", data="x" * 4096, content_type="application/json"
    )
    assert response.status_code == 413
    assert "HINDSIGHT_API_MAX_REQUEST_BYTES" in response.json()["detail"]
