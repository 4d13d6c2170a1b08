"""The MCP streamable HTTP endpoint, served by the API process at ``/mcp``.

The API is a WSGI application (gunicorn); the MCP SDK's transport is ASGI. The endpoint runs
the SDK's ``StreamableHTTPSessionManager`` in **stateless JSON mode** for each POST: every
JSON-RPC request is answered in its own HTTP response and no session lives in the process, so
any gunicorn worker can answer any request. One Django view bridges the request into ASGI and
back (``asyncio.run`` per request, in the request's own thread).

Access: ``/mcp`` is behind ``HINDSIGHT_API_TENANT_API_KEY`` exactly like ``/v1``
(``hindsight.infra.edge.auth``). As upstream, ``/mcp/{bank_id}/`` serves the one-bank tools (no
``bank_id`` argument; that bank), ``/mcp`` the all-banks ones (each tool's ``bank_id``, else
the ``X-Bank-Id`` header).

One behaviour with REST: the tools (``hindsight.surfaces.mcp_server.tools``) call the REST API through
``HindsightApi`` over ``httpx2.WSGITransport`` into this same Django application, forwarding
the caller's ``Authorization`` header, so every tool goes through the same routing,
middleware, validation, services and error shape as the equivalent REST request.
"""

from __future__ import annotations

import asyncio
from functools import lru_cache
from typing import Any

import anyio
import httpx2
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from hindsight.surfaces.cli.api import HindsightApi
from hindsight.surfaces.mcp_server.tools import ToolBackend, build_server, set_backend

_SKIPPED_RESPONSE_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})


@lru_cache(maxsize=8)
def _server(enabled: tuple[str, ...], one_bank: bool) -> MCPServer:
    return build_server(enabled, one_bank=one_bank)


@lru_cache(maxsize=1)
def _wsgi_app() -> WSGIHandler:
    return WSGIHandler()


def _scope(request: HttpRequest) -> dict[str, Any]:
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in request.headers.items()
    ]
    host = request.get_host()
    server_port = int(request.get_port() or 80)
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "root_path": "",
        "headers": headers,
        "client": (request.META.get("REMOTE_ADDR", "127.0.0.1"), 0),
        "server": (host.split(":")[0], server_port),
    }


async def _serve(
    server: MCPServer, scope: dict[str, Any], body: bytes, backend: ToolBackend
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    set_backend(backend)  # inherited by every task and worker thread of this request
    manager = StreamableHTTPSessionManager(
        server._lowlevel_server,  # the SDK documents this pairing for mounting a server
        json_response=True,
        stateless=True,
        max_request_body_size=settings.HINDSIGHT.max_request_bytes,
    )
    delivered = False
    done = anyio.Event()
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = list(message.get("headers") or [])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                done.set()

    async with manager.run():
        await manager.handle_request(scope, receive, send)  # type: ignore[arg-type]  # ASGI dicts
    return status, headers, b"".join(chunks)


@csrf_exempt
def mcp_endpoint(request: HttpRequest, bank_id: str | None = None) -> HttpResponse:
    cfg = settings.HINDSIGHT
    if not cfg.mcp_enabled:
        return JsonResponse({"detail": "Not Found"}, status=404)
    if request.method != "POST":
        # Stateless: no server-initiated stream (GET) and no session to delete (DELETE).
        response = HttpResponse(status=405)
        response["Allow"] = "POST"
        return response
    api = HindsightApi(
        f"{request.scheme}://{request.get_host()}",
        authorization=request.headers.get("Authorization"),
        transport=httpx2.WSGITransport(app=_wsgi_app()),
        timeout=cfg.reflect_wall_timeout_seconds + 30,
    )
    backend = ToolBackend(api=api, default_bank=bank_id or request.headers.get("X-Bank-Id"))
    try:
        status, headers, body = asyncio.run(
            _serve(_server(cfg.mcp_enabled_tools, bank_id is not None), _scope(request),
                   request.body, backend)
        )
    finally:
        api.close()
    response = HttpResponse(body, status=status)
    for name, value in headers:
        key = name.decode("latin-1")
        if key.lower() not in _SKIPPED_RESPONSE_HEADERS:
            response[key] = value.decode("latin-1")
    return response
