"""The MCP server driven by the SDK's own client against a real worker and the scripted LLM:
over the SDK's in-memory transport (the server ``hindsight mcp`` builds, its tools calling the
REST API of the live server over HTTP), over streamable HTTP (``/mcp`` on the live server), and
once over stdio (``hindsight mcp``, a real subprocess of the installed console script).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from django.utils import timezone
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from hindsight.infra.config import MCP_ONE_BANK_EXCLUDED, MCP_TOOL_NAMES
from hindsight.surfaces.cli.api import HindsightApi
from hindsight.surfaces.mcp_server.tools import ToolBackend, build_server, set_backend
from tests.live import LiveStack, write_documents

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "mcp-bank"
DOC = "## Team\n\nAlice prefers async; Bob runs the Monday standup."
HINDSIGHT = shutil.which("hindsight", path=str(Path(sys.executable).parent))


def stdio_client(stack: LiveStack, *extra: str, env: dict[str, str] | None = None) -> Client:
    assert HINDSIGHT, "the hindsight console script is not installed in this venv (make install)"
    params = StdioServerParameters(
        command=HINDSIGHT, args=["--api-url", stack.url, "mcp", *extra],
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )
    return Client(params, read_timeout_seconds=60)


def memory_client(stack: LiveStack, bank: str | None = BANK) -> Client:
    """What ``hindsight --api-url URL mcp [--bank BANK]`` serves, in this process: call it inside
    the session's event loop (the tools read their backend from the context)."""
    set_backend(ToolBackend(api=HindsightApi(stack.url), default_bank=bank))
    return Client(build_server(one_bank=bank is not None), read_timeout_seconds=60)


def http_client(stack: LiveStack, path: str = f"/mcp/{BANK}/", **headers: str) -> Client:
    http = httpx2.AsyncClient(headers=headers, timeout=60.0)
    return Client(streamable_http_client(stack.url + path, http_client=http),
                  read_timeout_seconds=60)


def run(client_factory: Callable[[], Client],
        body: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with client_factory() as client:
            return await body(client)

    return anyio.run(main)


async def call(client: Client, tool: str, /, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def call_error(client: Client, tool: str, /, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.content
    text: str = result.content[0].text
    return text


@pytest.fixture
def stack(live_stack: LiveStack) -> LiveStack:
    live_stack.seed(BANK, [
        ("Alice prefers async communication over Slack.", ["team"]),
        ("Bob runs the Monday standup.", ["team"]),
        ("Carol's cat is called Miso.", ["carol"]),
    ])
    live_stack.llm.reset()
    return live_stack


TRANSPORTS = ["memory", "http"]


def factory(stack: LiveStack, transport: str) -> Callable[[], Client]:
    if transport == "memory":
        return lambda: memory_client(stack)
    return lambda: http_client(stack)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tools_and_schemas_follow_the_seed(stack: LiveStack, transport: str) -> None:
    async def body(client: Client) -> dict[str, Any]:
        return {t.name: t for t in (await client.list_tools()).tools}

    tools = run(factory(stack, transport), body)
    # One bank (/mcp/{bank}/, --bank): upstream's one-bank tools, no bank_id argument.
    assert tuple(tools) == tuple(n for n in MCP_TOOL_NAMES if n not in MCP_ONE_BANK_EXCLUDED)
    assert not any("bank_id" in t.input_schema.get("properties", {}) for t in tools.values())
    create = tools["create_mental_model"].input_schema["properties"]
    assert "mental_model_id" in create and "id" not in create and "tags_match" in create
    assert "detail" not in tools["list_mental_models"].input_schema["properties"]
    assert tools["get_mental_model"].input_schema["properties"]["detail"]["default"] == "full"
    assert tools["get_mental_model"].input_schema["required"] == ["mental_model_id"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_create_refresh_get_clear_delete_through_the_tools(stack: LiveStack,
                                                           transport: str) -> None:
    write_documents(stack.llm, {"How does the team communicate?": DOC})

    async def body(client: Client) -> None:
        created = await call(client, "create_mental_model", name="Team",
                             source_query="How does the team communicate?",
                             mental_model_id="team", tags=["team"], tags_match="any")
        assert created["mental_model_id"] == "team"
        op = await wait(client, created["operation_id"])
        assert op["status"] == "completed"

        listed = await call(client, "list_mental_models")
        [item] = listed["items"]
        assert item["id"] == "team" and item["is_stale"] is False and item["content"] is None

        refreshed = await call(client, "refresh_mental_model", mental_model_id="team")
        assert (await wait(client, refreshed["operation_id"]))["status"] == "completed"

        model = await call(client, "get_mental_model", mental_model_id="team", detail="content")
        assert model["content"] == DOC and model["reflect_response"] is None
        assert model["trigger"]["tags_match"] == "any" and model["is_stale"] is False
        full = await call(client, "get_mental_model", mental_model_id="team")
        assert len(full["reflect_response"]["based_on"]["world"]) == 2  # Alice, Bob (not Carol)

        updated = await call(client, "update_mental_model", mental_model_id="team",
                             name="Team v2", trigger={"keep_trace": True})
        assert updated["name"] == "Team v2" and updated["trigger"]["keep_trace"] is True
        assert updated["trigger"]["tags_match"] == "any"  # merged key by key

        cleared = await call(client, "clear_mental_model", mental_model_id="team")
        assert cleared["status"] == "cleared"
        assert (await call(client, "get_mental_model", mental_model_id="team"))["content"] == ""
        assert await call(client, "delete_mental_model", mental_model_id="team") == {
            "status": "deleted", "mental_model_id": "team"}
        gone = await call_error(client, "get_mental_model", mental_model_id="team")
        assert "404" in gone and "not found" in gone.lower()

    run(factory(stack, transport), body)


async def wait(client: Client, operation_id: str) -> dict[str, Any]:
    with anyio.fail_after(90):
        while True:
            op: dict[str, Any] = await call(client, "get_operation", operation_id=operation_id)
            if op["status"] in ("completed", "failed", "cancelled"):
                return op
            await anyio.sleep(0.2)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_bad_arguments_come_back_as_tool_errors(stack: LiveStack, transport: str) -> None:
    async def body(client: Client) -> None:
        # the SDK's own argument validation
        text = await call_error(client, "get_mental_model", mental_model_id="x", detail="bogus")
        assert "detail" in text
        missing = await call_error(client, "create_mental_model", name="only a name")
        assert "source_query" in missing
        # the server's validation, its message in one line
        bad_id = await call_error(client, "create_mental_model", name="n", source_query="q",
                                  mental_model_id="Bad ID!")
        assert "HTTP 422: body.id: id must match" in bad_id and "\n" not in bad_id
        unknown = await call_error(client, "update_mental_model", mental_model_id="nope",
                                   name="x")
        assert "HTTP 404" in unknown
        # the session survives every error
        assert (await call(client, "list_mental_models"))["total"] == 0

    run(factory(stack, transport), body)


def test_memory_tools_retain_recall_reflect(stack: LiveStack) -> None:
    stack.llm.respond_with(lambda body: _reflect_reply(body))

    async def body(client: Client) -> None:
        retained = await call(client, "sync_retain", content="Dana joined and prefers email.",
                              tags=["team"])
        assert retained["status"] == "completed" and retained["items_count"] == 1
        recalled = await call(client, "recall", query="Dana email", tags=["team"])
        assert any("Dana" in r["text"] for r in recalled["results"])
        answer = await call(client, "reflect", query="Who prefers email?")
        assert answer["text"] == "Dana prefers email."

    run(factory(stack, "http"), body)


def _reflect_reply(body: dict[str, Any]) -> Any:
    from fakes.llm_server import Reply

    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return Reply.tool_calls([(choice["function"]["name"], {"query": "email"})])
    if body.get("response_format"):  # retain's fact extraction: one fact
        return Reply.json({"facts": [{"text": "Dana joined and prefers email.",
                                      "fact_type": "world", "occurred_start": None,
                                      "occurred_end": None}]})
    return Reply.tool_calls([("done", {"answer": "Dana prefers email.", "memory_ids": [],
                                       "mental_model_ids": []})])


def test_refresh_tool_releases_a_parked_automatic_refresh(stack: LiveStack) -> None:
    from mentalmodels.models import MentalModel
    from mentalmodels.triggers_auto import PARKED, REASON_CONSOLIDATION, mental_model_refresh_auto
    from operations.models import Operation

    write_documents(stack.llm, {"How does the team communicate?": DOC})
    connect = factory(stack, "http")

    async def create(client: Client) -> str:
        created = await call(client, "create_mental_model", name="Team",
                             source_query="How does the team communicate?",
                             mental_model_id="team")
        assert (await wait(client, created["operation_id"]))["status"] == "completed"
        await call(client, "update_mental_model", mental_model_id="team",
                   trigger={"min_refresh_interval_seconds": 3600})
        return str(created["operation_id"])

    run(connect, create)
    with stack.http() as http:  # a new in-scope memory: the model is stale, a trigger fires
        http.post(f"/banks/{BANK}/memories", json={"items": [
            {"content": "Dana joined the team.", "strategy": "verbatim"}]}).raise_for_status()
    model = MentalModel.objects.get(bank_id=BANK, mental_model_id="team")
    parked = mental_model_refresh_auto(model=model, reason=REASON_CONSOLIDATION)
    assert parked.action == PARKED
    op = Operation.objects.get(id=parked.operation.id)
    assert op.status == "pending" and op.next_retry_at > timezone.now() + timedelta(minutes=30)

    async def refresh(client: Client) -> dict[str, Any]:
        submitted = await call(client, "refresh_mental_model", mental_model_id="team")
        assert submitted["operation_id"] == str(parked.operation.id)  # the parked one, released
        with anyio.fail_after(30):  # runs now, not in an hour
            return await wait(client, submitted["operation_id"])

    assert run(connect, refresh)["status"] == "completed"


def test_http_endpoint_is_behind_the_tenant_api_key(stack: LiveStack, settings: Any) -> None:
    import dataclasses

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, tenant_api_key="s3cret")
    response = httpx2.post(stack.url + "/mcp", json={"jsonrpc": "2.0", "id": 1,
                                                     "method": "tools/list"})
    assert response.status_code == 401

    async def body(client: Client) -> Any:
        return await call(client, "list_mental_models")

    listed = run(lambda: http_client(stack, "/mcp", **{"Authorization": "Bearer s3cret",
                                                       "X-Bank-Id": BANK}), body)
    assert listed["total"] == 0


def test_enabled_tools_restrict_the_list(stack: LiveStack, settings: Any) -> None:
    import dataclasses

    settings.HINDSIGHT = dataclasses.replace(
        settings.HINDSIGHT, mcp_enabled_tools=("list_mental_models", "get_mental_model"))

    async def names(client: Client) -> list[str]:
        return [t.name for t in (await client.list_tools()).tools]

    assert run(factory(stack, "http"), names) == ["list_mental_models", "get_mental_model"]
    env = {"HINDSIGHT_API_MCP_ENABLED_TOOLS": "recall,get_operation"}
    assert run(lambda: stdio_client(stack, "--bank", BANK, env=env), names) == [
        "recall", "get_operation"]


def test_without_a_bank_the_tools_ask_for_bank_id(stack: LiveStack) -> None:
    async def body(client: Client) -> None:
        text = await call_error(client, "list_mental_models")
        assert "bank_id is required" in text
        assert (await call(client, "list_mental_models", bank_id=BANK))["total"] == 0

    run(lambda: memory_client(stack, bank=None), body)


def test_concurrent_http_requests_share_the_server_safely(stack: LiveStack) -> None:
    """Each POST runs in its own thread and event loop against one cached server object."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> dict[str, Any]:
        tool = "list_mental_models" if i % 2 else "get_mental_model"
        args: dict[str, Any] = {} if i % 2 else {"mental_model_id": f"missing-{i}"}
        response = httpx2.post(
            stack.url + f"/mcp/{BANK}/", timeout=60.0,
            headers={"Accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": i, "method": "tools/call",
                  "params": {"name": tool, "arguments": args}},
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(one, range(24)))
    assert [r["id"] for r in results] == list(range(24))
    for r in results:
        expect_error = r["id"] % 2 == 0
        assert r["result"]["isError"] is expect_error, r
        if expect_error:
            assert f"missing-{r['id']}" in r["result"]["content"][0]["text"]
