"""OpenAPI post-processing: the tenant API key declared as the document's bearer scheme.

The key is checked by a middleware (``hindsight.infra.edge.auth``), not by a DRF authentication
class, so drf-spectacular cannot see it and marks every operation as open (``security: [{}]``).
This hook declares the scheme and offers it on every ``/v1`` operation, keeping the anonymous
alternative because a server started without ``HINDSIGHT_API_TENANT_API_KEY`` needs no key.
Documentation only: no path, body or enum changes.
"""

from __future__ import annotations

from typing import Any

SCHEME_NAME = "TenantApiKey"
SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": (
        "The tenant API key (HINDSIGHT_API_TENANT_API_KEY), sent as "
        "`Authorization: Bearer <key>`. Required on every /v1 route when the server has one set."
    ),
}


def declare_tenant_bearer(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular ``POSTPROCESSING_HOOKS`` entry: add the scheme, offer it on /v1."""
    components = result.setdefault("components", {})
    components.setdefault("securitySchemes", {})[SCHEME_NAME] = SCHEME
    for path, operations in (result.get("paths") or {}).items():
        if not path.startswith("/v1/"):
            continue
        for operation in operations.values():
            if isinstance(operation, dict):
                operation["security"] = [{SCHEME_NAME: []}, {}]
    return result
