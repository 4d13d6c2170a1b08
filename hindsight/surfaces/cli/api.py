"""A thin typed client of our own v1 HTTP API, shared by the CLI and the MCP tools.

It speaks HTTP only (httpx2): nothing here imports Django, the models or the services, so the
CLI and the stdio MCP server run on a machine that only has the package and a URL. Each method
is one REST call and returns the decoded JSON body unchanged; a non-2xx answer raises
``ApiError`` carrying the server's own message, flattened to one line (FastAPI's
``{"detail": [{"loc": [...], "msg": ...}]}`` becomes ``body.trigger.mode: msg``).

The MCP server mounted in the API process uses this same class over an in-process WSGI
transport, so a tool and a REST request run through the same URL routing, validation, error
shape and services: one behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any
from urllib.parse import quote

import httpx2

from hindsight.infra.vocabulary import TERMINAL_STATUSES

DEFAULT_URL = "http://127.0.0.1:8888"
# A dry run or a reflect runs for up to HINDSIGHT_API_REFLECT_WALL_TIMEOUT (300 s by default).
DEFAULT_TIMEOUT_SECONDS = 330.0
CONNECT_TIMEOUT_SECONDS = 10.0
# Where waiting ends: an ended operation, or upstream's answer for an id it does not know.
FINAL_STATUSES = frozenset({*TERMINAL_STATUSES, "not_found"})


class ApiError(Exception):
    """A request the server refused (``status`` > 0) or could not be reached (``status`` 0)."""

    def __init__(self, status: int, message: str, body: Any = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.body = body

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.message}" if self.status else self.message


def error_message(body: Any, fallback: str) -> str:
    """The server's message in one line, from either of upstream's error shapes."""
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, str):
        return " ".join(detail.split())
    if isinstance(detail, list) and detail:
        parts = []
        for item in detail:
            if isinstance(item, dict):
                loc = ".".join(str(p) for p in item.get("loc") or [])
                msg = " ".join(str(item.get("msg", "")).split())
                parts.append(f"{loc}: {msg}" if loc else msg)
            else:
                parts.append(str(item))
        return "; ".join(parts)
    return fallback


def _seg(value: str) -> str:
    return quote(value, safe="")


class HindsightApi:
    """One method per REST call used by the CLI and the MCP tools."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        authorization: str | None = None,
        transport: httpx2.BaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ):
        headers = {"User-Agent": "hindsight-cli"}
        if authorization:
            headers["Authorization"] = authorization
        elif api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.base_url = base_url.rstrip("/")
        self._http = httpx2.Client(
            base_url=self.base_url, headers=headers, transport=transport,
            timeout=httpx2.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_SECONDS)),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HindsightApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # transport --------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(
                method, "/v1/default" + path, json=json, params=query or None
            )
        except httpx2.HTTPError as exc:
            raise ApiError(0, f"cannot reach the Hindsight API at {self.base_url}: {exc}") from exc
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = response.text
        if response.status_code >= 400:
            fallback = response.reason_phrase or "request failed"
            raise ApiError(response.status_code, error_message(body, fallback), body)
        return body

    # banks ------------------------------------------------------------------------------

    def bank_list(self, **params: Any) -> Any:
        return self.request("GET", "/banks", params=params)

    def bank_get(self, bank_id: str) -> Any:
        return self.request("GET", f"/banks/{_seg(bank_id)}")

    def bank_update(self, bank_id: str, body: dict[str, Any]) -> Any:
        return self.request("PATCH", f"/banks/{_seg(bank_id)}", json=body)

    def bank_delete(self, bank_id: str) -> Any:
        return self.request("DELETE", f"/banks/{_seg(bank_id)}")

    def bank_config_get(self, bank_id: str) -> Any:
        return self.request("GET", f"/banks/{_seg(bank_id)}/config")

    def bank_config_update(self, bank_id: str, updates: dict[str, Any]) -> Any:
        return self.request("PATCH", f"/banks/{_seg(bank_id)}/config", json={"updates": updates})

    def tag_list(self, bank_id: str, **params: Any) -> Any:
        return self.request("GET", f"/banks/{_seg(bank_id)}/tags", params=params)

    def bank_stats(self, bank_id: str) -> Any:
        return self.request("GET", f"/banks/{_seg(bank_id)}/stats")

    def bank_create(self, bank_id: str, body: dict[str, Any] | None = None) -> Any:
        return self.request("PUT", f"/banks/{_seg(bank_id)}", json=body or {})

    # memories ---------------------------------------------------------------------------

    def retain(self, bank_id: str, body: dict[str, Any]) -> Any:
        return self.request("POST", f"/banks/{_seg(bank_id)}/memories", json=body)

    def recall(self, bank_id: str, body: dict[str, Any]) -> Any:
        return self.request("POST", f"/banks/{_seg(bank_id)}/memories/recall", json=body)

    def memory_list(self, bank_id: str, **params: Any) -> Any:
        return self.request("GET", f"/banks/{_seg(bank_id)}/memories/list", params=params)

    def memories_clear(self, bank_id: str, **params: Any) -> Any:
        return self.request("DELETE", f"/banks/{_seg(bank_id)}/memories", params=params)

    def memory_get(self, bank_id: str, memory_id: str) -> Any:
        return self.request("GET", f"/banks/{_seg(bank_id)}/memories/{_seg(memory_id)}")

    def memory_update(self, bank_id: str, memory_id: str, body: dict[str, Any]) -> Any:
        return self.request("PATCH", f"/banks/{_seg(bank_id)}/memories/{_seg(memory_id)}",
                            json=body)

    def memory_history(self, bank_id: str, memory_id: str) -> Any:
        return self.request("GET",
                            f"/banks/{_seg(bank_id)}/memories/{_seg(memory_id)}/history")

    def memory_observations_clear(self, bank_id: str, memory_id: str) -> Any:
        return self.request(
            "DELETE", f"/banks/{_seg(bank_id)}/memories/{_seg(memory_id)}/observations")

    def document_list(self, bank_id: str, **params: Any) -> Any:
        return self.request("GET", f"/banks/{_seg(bank_id)}/documents", params=params)

    def document_get(self, bank_id: str, document_id: str) -> Any:
        return self.request("GET", f"/banks/{_seg(bank_id)}/documents/{_seg(document_id)}")

    def document_delete(self, bank_id: str, document_id: str) -> Any:
        return self.request("DELETE", f"/banks/{_seg(bank_id)}/documents/{_seg(document_id)}")

    def reflect(self, bank_id: str, body: dict[str, Any]) -> Any:
        return self.request("POST", f"/banks/{_seg(bank_id)}/reflect", json=body)

    # bank transfer ----------------------------------------------------------------------

    def bank_export(self, bank_id: str, **params: Any) -> Any:
        return self.request("POST", f"/banks/{_seg(bank_id)}/transfer/export", params=params)

    def bank_clone(self, bank_id: str, **params: Any) -> Any:
        return self.request("POST", f"/banks/{_seg(bank_id)}/clone", params=params)

    def bank_import(self, bank_id: str, archive: IO[bytes], **params: Any) -> Any:
        """Upload ``archive`` (an open file: streamed, never read whole) as the multipart file."""
        query = {k: v for k, v in params.items() if v is not None}
        return self._checked(lambda: self._http.post(
            f"/v1/default/banks/{_seg(bank_id)}/transfer/import", params=query or None,
            files={"file": ("bank.zip", archive, "application/zip")}))

    # bank templates ---------------------------------------------------------------------

    def bank_template_export(self, bank_id: str) -> Any:
        return self.request("GET", f"/banks/{_seg(bank_id)}/export")

    def bank_template_import(self, bank_id: str, manifest: Any, *, dry_run: bool = False) -> Any:
        return self.request("POST", f"/banks/{_seg(bank_id)}/import", json=manifest,
                            params={"dry_run": "true" if dry_run else None})

    def bank_template_schema(self) -> Any:
        return self._checked(lambda: self._http.get("/v1/bank-template-schema"))

    def file_download(self, download_url: str, out: IO[bytes]) -> int:
        """Stream the file at the API-relative ``download_url`` into ``out``; its size."""
        size = 0
        try:
            with self._http.stream("GET", download_url) as response:
                if response.status_code >= 400:
                    response.read()
                    self._raise_for(response)
                for chunk in response.iter_bytes():
                    out.write(chunk)
                    size += len(chunk)
        except httpx2.HTTPError as exc:
            raise ApiError(0, f"cannot reach the Hindsight API at {self.base_url}: {exc}") from exc
        return size

    def _checked(self, send: Callable[[], httpx2.Response]) -> Any:
        try:
            response = send()
        except httpx2.HTTPError as exc:
            raise ApiError(0, f"cannot reach the Hindsight API at {self.base_url}: {exc}") from exc
        if response.status_code >= 400:
            self._raise_for(response)
        return response.json() if response.content else None

    @staticmethod
    def _raise_for(response: httpx2.Response) -> None:
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = response.text
        raise ApiError(response.status_code,
                       error_message(body, response.reason_phrase or "request failed"), body)

    # mental models ----------------------------------------------------------------------

    def _mm(self, bank_id: str, mental_model_id: str | None = None) -> str:
        path = f"/banks/{_seg(bank_id)}/mental-models"
        return path if mental_model_id is None else f"{path}/{_seg(mental_model_id)}"

    def mental_model_create(self, bank_id: str, body: dict[str, Any]) -> Any:
        return self.request("POST", self._mm(bank_id), json=body)

    def mental_model_list(self, bank_id: str, **params: Any) -> Any:
        return self.request("GET", self._mm(bank_id), params=params)

    def mental_model_get(self, bank_id: str, mental_model_id: str, *,
                         detail: str | None = None) -> Any:
        return self.request("GET", self._mm(bank_id, mental_model_id), params={"detail": detail})

    def mental_model_update(self, bank_id: str, mental_model_id: str,
                            body: dict[str, Any]) -> Any:
        return self.request("PATCH", self._mm(bank_id, mental_model_id), json=body)

    def mental_model_delete(self, bank_id: str, mental_model_id: str) -> Any:
        return self.request("DELETE", self._mm(bank_id, mental_model_id))

    def mental_model_refresh(self, bank_id: str, mental_model_id: str) -> Any:
        return self.request("POST", self._mm(bank_id, mental_model_id) + "/refresh")

    def mental_model_clear(self, bank_id: str, mental_model_id: str) -> Any:
        return self.request("POST", self._mm(bank_id, mental_model_id) + "/clear")

    def mental_model_history(self, bank_id: str, mental_model_id: str) -> Any:
        return self.request("GET", self._mm(bank_id, mental_model_id) + "/history")

    def mental_model_dry_run(self, bank_id: str, mental_model_id: str) -> Any:
        return self.request("POST", self._mm(bank_id, mental_model_id) + "/dry-run-refresh")

    # restore and review ---------------------------------------------------------------

    def mental_model_restore(self, bank_id: str, mental_model_id: str, version_id: int) -> Any:
        return self.request("POST", self._mm(bank_id, mental_model_id) + "/restore",
                            json={"version_id": version_id})

    def _proposal(self, bank_id: str, mental_model_id: str, proposal_id: str | None = None,
                  action: str = "") -> str:
        path = self._mm(bank_id, mental_model_id) + "/proposals"
        if proposal_id is not None:
            path += f"/{_seg(proposal_id)}"
        return path + (f"/{action}" if action else "")

    def proposal_list(self, bank_id: str, mental_model_id: str, *,
                      status: str | None = None) -> Any:
        return self.request("GET", self._proposal(bank_id, mental_model_id),
                            params={"status": status})

    def proposal_get(self, bank_id: str, mental_model_id: str, proposal_id: str) -> Any:
        return self.request("GET", self._proposal(bank_id, mental_model_id, proposal_id))

    def proposal_approve(self, bank_id: str, mental_model_id: str, proposal_id: str) -> Any:
        return self.request("POST", self._proposal(bank_id, mental_model_id, proposal_id,
                                                   "approve"))

    def proposal_reject(self, bank_id: str, mental_model_id: str, proposal_id: str,
                        reason: str) -> Any:
        return self.request("POST", self._proposal(bank_id, mental_model_id, proposal_id,
                                                   "reject"), json={"reason": reason})

    # knowledge base ---------------------------------------------------------------------

    def _kb(self, bank_id: str, rest: str) -> str:
        return f"/banks/{_seg(bank_id)}/knowledge-base/{rest}"

    def kb_tree(self, bank_id: str, **params: Any) -> Any:
        return self.request("GET", self._kb(bank_id, "tree"), params=params)

    def kb_folder_create(self, bank_id: str, body: dict[str, Any]) -> Any:
        return self.request("POST", self._kb(bank_id, "folders"), json=body)

    def kb_page_create(self, bank_id: str, body: dict[str, Any]) -> Any:
        return self.request("POST", self._kb(bank_id, "pages"), json=body)

    def kb_page_get(self, bank_id: str, page_id: str) -> Any:
        return self.request("GET", self._kb(bank_id, f"pages/{_seg(page_id)}"))

    def kb_search(self, bank_id: str, **params: Any) -> Any:
        return self.request("GET", self._kb(bank_id, "search"), params=params)

    def kb_node_update(self, bank_id: str, node_id: str, body: dict[str, Any]) -> Any:
        return self.request("PATCH", self._kb(bank_id, f"nodes/{_seg(node_id)}"), json=body)

    def kb_node_delete(self, bank_id: str, node_id: str) -> Any:
        return self.request("DELETE", self._kb(bank_id, f"nodes/{_seg(node_id)}"))

    def kb_export(self, bank_id: str) -> Any:
        return self.request("GET", self._kb(bank_id, "export"))

    # directives -------------------------------------------------------------------------

    def _dir(self, bank_id: str, directive_id: str | None = None) -> str:
        path = f"/banks/{_seg(bank_id)}/directives"
        return path if directive_id is None else f"{path}/{_seg(directive_id)}"

    def directive_list(self, bank_id: str, **params: Any) -> Any:
        return self.request("GET", self._dir(bank_id), params=params)

    def directive_get(self, bank_id: str, directive_id: str) -> Any:
        return self.request("GET", self._dir(bank_id, directive_id))

    def directive_create(self, bank_id: str, body: dict[str, Any]) -> Any:
        return self.request("POST", self._dir(bank_id), json=body)

    def directive_update(self, bank_id: str, directive_id: str, body: dict[str, Any]) -> Any:
        return self.request("PATCH", self._dir(bank_id, directive_id), json=body)

    def directive_delete(self, bank_id: str, directive_id: str) -> Any:
        return self.request("DELETE", self._dir(bank_id, directive_id))

    # webhooks ---------------------------------------------------------------------------

    def _hook(self, bank_id: str, webhook_id: str | None = None) -> str:
        path = f"/banks/{_seg(bank_id)}/webhooks"
        return path if webhook_id is None else f"{path}/{_seg(webhook_id)}"

    def webhook_list(self, bank_id: str) -> Any:
        return self.request("GET", self._hook(bank_id))

    def webhook_create(self, bank_id: str, body: dict[str, Any]) -> Any:
        return self.request("POST", self._hook(bank_id), json=body)

    def webhook_update(self, bank_id: str, webhook_id: str, body: dict[str, Any]) -> Any:
        return self.request("PATCH", self._hook(bank_id, webhook_id), json=body)

    def webhook_delete(self, bank_id: str, webhook_id: str) -> Any:
        return self.request("DELETE", self._hook(bank_id, webhook_id))

    def webhook_deliveries(self, bank_id: str, webhook_id: str, **params: Any) -> Any:
        return self.request("GET", self._hook(bank_id, webhook_id) + "/deliveries",
                            params=params)

    # operations -------------------------------------------------------------------------

    def _op(self, bank_id: str, operation_id: str | None = None) -> str:
        path = f"/banks/{_seg(bank_id)}/operations"
        return path if operation_id is None else f"{path}/{_seg(operation_id)}"

    def operation_get(self, bank_id: str, operation_id: str) -> Any:
        return self.request("GET", self._op(bank_id, operation_id))

    def operation_list(self, bank_id: str, **params: Any) -> Any:
        return self.request("GET", self._op(bank_id), params=params)

    def operation_cancel(self, bank_id: str, operation_id: str) -> Any:
        return self.request("DELETE", self._op(bank_id, operation_id))

    def operation_retry(self, bank_id: str, operation_id: str) -> Any:
        return self.request("POST", self._op(bank_id, operation_id) + "/retry")
