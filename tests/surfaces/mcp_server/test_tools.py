"""The MCP tools against upstream Hindsight 1.1.0's: names, argument lists (name, JSON type,
default, required, in order), hints, both modes; an unknown argument refused with nothing done;
the seed's mental-model flow through upstream's argument names (a live server, a real worker
and the scripted LLM, over the SDK's in-memory client).

``UPSTREAM`` is transcribed from upstream's tool module
(``hindsight_api/mcp_tools.py``, all-banks mode, as its FastMCP server lists them): kept here as
data so every clone checks it without upstream installed.
"""

from __future__ import annotations

import functools
from typing import Any

import anyio
import pytest
from mcp import Client

from hindsight.infra.config import MCP_ONE_BANK_EXCLUDED, MCP_TOOL_NAMES, read_config
from hindsight.surfaces.cli.api import HindsightApi
from hindsight.surfaces.mcp_server.tools import ToolBackend, build_server, set_backend
from mentalmodels.models import MentalModel
from tests.surfaces.mcp_server.test_mcp import call as _call
from tests.surfaces.mcp_server.test_mcp import call_error as _refused

Arg = tuple[str, str, Any]
REQUIRED = "<required>"
READ_ONLY, WRITE, DESTRUCTIVE = "read_only", "write", "destructive"
TAGS_MATCH = "enum:any,all,any_strict,all_strict,exact"

UPSTREAM: dict[str, tuple[str, list[Arg]]] = {
    "retain": (WRITE, [
        ("content", "string", REQUIRED),
        ("context", "string", "general"),
        ("timestamp", "null|string", None),
        ("tags", "array|null", None),
        ("metadata", "null|object", None),
        ("document_id", "null|string", None),
        ("bank_id", "null|string", None),
        ("strategy", "null|string", None),
        ("update_mode", "null|string", None),
    ]),
    "sync_retain": (WRITE, [
        ("content", "string", REQUIRED),
        ("context", "string", "general"),
        ("timestamp", "null|string", None),
        ("tags", "array|null", None),
        ("metadata", "null|object", None),
        ("document_id", "null|string", None),
        ("bank_id", "null|string", None),
        ("strategy", "null|string", None),
    ]),
    "recall": (READ_ONLY, [
        ("query", "string", REQUIRED),
        ("max_tokens", "integer", 4096),
        ("budget", "string", "high"),
        ("types", "array|null", None),
        ("prefer_observations", "boolean|null", None),
        ("tags", "array|null", None),
        ("tags_match", TAGS_MATCH, "any"),
        ("tag_groups", "array|null", None),
        ("query_timestamp", "null|string", None),
        ("min_scores", "null|object", None),
        ("temporal_window", "null|object", None),
        ("include_chunks", "boolean", False),
        ("max_chunk_tokens", "integer", 8192),
        ("include_entities", "boolean", False),
        ("max_entity_tokens", "integer", 500),
        ("include_source_facts", "boolean", False),
        ("max_source_facts_tokens", "integer", 4096),
        ("bank_id", "null|string", None),
    ]),
    "reflect": (READ_ONLY, [
        ("query", "string", REQUIRED),
        ("context", "null|string", None),
        ("budget", "string", "low"),
        ("max_tokens", "integer", 4096),
        ("response_schema", "null|object", None),
        ("tags", "array|null", None),
        ("tags_match", TAGS_MATCH, "any"),
        ("apply_all_directives", "boolean", False),
        ("include_based_on", "boolean", False),
        ("include_trace", "boolean", False),
        ("bank_id", "null|string", None),
    ]),
    "list_banks": (READ_ONLY, [
        ("query", "null|string", None),
        ("limit", "integer", 100),
        ("offset", "integer", 0),
    ]),
    "create_bank": (WRITE, [
        ("bank_id", "string", REQUIRED),
        ("name", "null|string", None),
        ("mission", "null|string", None),
    ]),
    "list_mental_models": (READ_ONLY, [
        ("tags", "array|null", None),
        ("limit", "integer", 100),
        ("offset", "integer", 0),
        ("bank_id", "null|string", None),
    ]),
    "get_mental_model": (READ_ONLY, [
        ("mental_model_id", "string", REQUIRED),
        ("detail", "string", "full"),
        ("bank_id", "null|string", None),
    ]),
    "create_mental_model": (WRITE, [
        ("name", "string", REQUIRED),
        ("source_query", "string", REQUIRED),
        ("mental_model_id", "null|string", None),
        ("tags", "array|null", None),
        ("trigger", "null|object", None),
        ("tags_match", "null|string", None),
        ("max_tokens", "integer", 2048),
        ("trigger_refresh_after_consolidation", "boolean|null", None),
        ("bank_id", "null|string", None),
    ]),
    "update_mental_model": (WRITE, [
        ("mental_model_id", "string", REQUIRED),
        ("name", "null|string", None),
        ("source_query", "null|string", None),
        ("max_tokens", "integer|null", None),
        ("tags", "array|null", None),
        ("trigger", "null|object", None),
        ("tags_match", "null|string", None),
        ("trigger_refresh_after_consolidation", "boolean|null", None),
        ("bank_id", "null|string", None),
    ]),
    "delete_mental_model": (DESTRUCTIVE, [
        ("mental_model_id", "string", REQUIRED),
        ("bank_id", "null|string", None),
    ]),
    "refresh_mental_model": (WRITE, [
        ("mental_model_id", "string", REQUIRED),
        ("bank_id", "null|string", None),
    ]),
    "clear_mental_model": (DESTRUCTIVE, [
        ("mental_model_id", "string", REQUIRED),
        ("bank_id", "null|string", None),
    ]),
    "list_directives": (READ_ONLY, [
        ("tags", "array|null", None),
        ("active_only", "boolean", True),
        ("limit", "integer", 100),
        ("offset", "integer", 0),
        ("bank_id", "null|string", None),
    ]),
    "create_directive": (WRITE, [
        ("name", "string", REQUIRED),
        ("content", "string", REQUIRED),
        ("priority", "integer", 0),
        ("is_active", "boolean", True),
        ("tags", "array|null", None),
        ("bank_id", "null|string", None),
    ]),
    "delete_directive": (DESTRUCTIVE, [
        ("directive_id", "string", REQUIRED),
        ("bank_id", "null|string", None),
    ]),
    "list_memories": (READ_ONLY, [
        ("type", "null|string", None),
        ("q", "null|string", None),
        ("limit", "integer", 100),
        ("offset", "integer", 0),
        ("bank_id", "null|string", None),
        ("tags", "array|null", None),
        ("tags_match", TAGS_MATCH, "any"),
    ]),
    "get_memory": (READ_ONLY, [
        ("memory_id", "string", REQUIRED),
        ("bank_id", "null|string", None),
    ]),
    "update_memory": (WRITE, [
        ("memory_id", "string", REQUIRED),
        ("text", "null|string", None),
        ("context", "null|string", None),
        ("occurred_start", "null|string", None),
        ("occurred_end", "null|string", None),
        ("mentioned_at", "null|string", None),
        ("fact_type", "null|string", None),
        ("entities", "array|null", None),
        ("resolve_entities", "boolean", True),
        ("bank_id", "null|string", None),
    ]),
    "invalidate_memory": (DESTRUCTIVE, [
        ("memory_id", "string", REQUIRED),
        ("reason", "null|string", None),
        ("restore", "boolean", False),
        ("bank_id", "null|string", None),
    ]),
    "list_documents": (READ_ONLY, [
        ("q", "null|string", None),
        ("limit", "integer", 100),
        ("offset", "integer", 0),
        ("bank_id", "null|string", None),
    ]),
    "get_document": (READ_ONLY, [
        ("document_id", "string", REQUIRED),
        ("bank_id", "null|string", None),
    ]),
    "delete_document": (DESTRUCTIVE, [
        ("document_id", "string", REQUIRED),
        ("bank_id", "null|string", None),
    ]),
    "list_operations": (READ_ONLY, [
        ("status", "null|string", None),
        ("type", "null|string", None),
        ("limit", "integer", 20),
        ("offset", "integer", 0),
        ("exclude_parents", "boolean", False),
        ("bank_id", "null|string", None),
    ]),
    "get_operation": (READ_ONLY, [
        ("operation_id", "string", REQUIRED),
        ("bank_id", "null|string", None),
    ]),
    "cancel_operation": (WRITE, [
        ("operation_id", "string", REQUIRED),
        ("bank_id", "null|string", None),
    ]),
    "list_tags": (READ_ONLY, [
        ("q", "null|string", None),
        ("limit", "integer", 100),
        ("offset", "integer", 0),
        ("bank_id", "null|string", None),
    ]),
    "get_bank": (READ_ONLY, [
        ("bank_id", "null|string", None),
    ]),
    "get_bank_stats": (READ_ONLY, [
        ("bank_id", "null|string", None),
    ]),
    "update_bank": (WRITE, [
        ("name", "null|string", None),
        ("mission", "null|string", None),
        ("config_updates", "null|object", None),
        ("bank_id", "null|string", None),
    ]),
    "delete_bank": (DESTRUCTIVE, [
        ("bank_id", "null|string", None),
    ]),
    "clear_memories": (DESTRUCTIVE, [
        ("type", "null|string", None),
        ("bank_id", "null|string", None),
    ]),
    "get_knowledge_base_tree": (READ_ONLY, [
        ("bank_id", "null|string", None),
    ]),
    "search_knowledge_base": (READ_ONLY, [
        ("query", "string", REQUIRED),
        ("limit", "integer", 10),
        ("bank_id", "null|string", None),
    ]),
    "get_knowledge_page": (READ_ONLY, [
        ("page_id", "string", REQUIRED),
        ("bank_id", "null|string", None),
    ]),
    "create_knowledge_folder": (WRITE, [
        ("name", "string", REQUIRED),
        ("parent_id", "null|string", None),
        ("bank_id", "null|string", None),
    ]),
    "create_knowledge_page": (WRITE, [
        ("name", "string", REQUIRED),
        ("source_query", "string", REQUIRED),
        ("parent_id", "null|string", None),
        ("tags", "array|null", None),
        ("max_tokens", "integer|null", None),
        ("trigger", "null|object", None),
        ("refresh_after_consolidation", "boolean|null", None),
        ("bank_id", "null|string", None),
    ]),
    "update_knowledge_node": (WRITE, [
        ("node_id", "string", REQUIRED),
        ("name", "null|string", None),
        ("parent_id", "null|string", None),
        ("source_query", "null|string", None),
        ("tags", "array|null", None),
        ("max_tokens", "integer|null", None),
        ("trigger", "null|object", None),
        ("refresh_after_consolidation", "boolean|null", None),
        ("bank_id", "null|string", None),
    ]),
    "delete_knowledge_node": (DESTRUCTIVE, [
        ("node_id", "string", REQUIRED),
        ("bank_id", "null|string", None),
    ]),
}
# Upstream's one-bank endpoint (/mcp/{bank_id}/) leaves these out (api/mcp.py).
UPSTREAM_ONE_BANK_EXCLUDED = {"list_banks", "create_bank", "get_bank_stats"}
# Upstream tools this server cannot back: no such concept here (README, "MCP").
NOT_BACKED: dict[str, str] = {}
KNOWLEDGE = {"get_knowledge_base_tree", "search_knowledge_base", "get_knowledge_page",
             "create_knowledge_folder", "create_knowledge_page", "update_knowledge_node",
             "delete_knowledge_node"}
# Ours, listed after upstream's: review and undo (hindsight.surfaces.mcp_server.review_tools).
_MODEL_ID = ("mental_model_id", "string", REQUIRED)
_BANK_ID = ("bank_id", "null|string", None)
OURS: dict[str, tuple[str, list[Arg]]] = {
    "get_mental_model_history": (READ_ONLY, [_MODEL_ID, _BANK_ID]),
    "restore_mental_model_version": (WRITE, [_MODEL_ID, ("version_id", "integer", REQUIRED),
                                             _BANK_ID]),
    "list_mental_model_proposals": (READ_ONLY, [
        _MODEL_ID, ("status", "enum:pending,approved,rejected,superseded,expired|null", None),
        _BANK_ID]),
    "approve_mental_model_proposal": (WRITE, [_MODEL_ID, ("proposal_id", "string", REQUIRED),
                                              _BANK_ID]),
    "reject_mental_model_proposal": (WRITE, [_MODEL_ID, ("proposal_id", "string", REQUIRED),
                                             ("reason", "string", REQUIRED), _BANK_ID]),
}


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return "object"
    if "enum" in schema:
        return "enum:" + ",".join(schema["enum"])
    if "anyOf" in schema:
        return "|".join(sorted(_type(option) for option in schema["anyOf"]))
    return str(schema.get("type"))


def _args(tool: Any) -> list[Arg]:
    schema = tool.input_schema
    required = set(schema.get("required") or ())
    return [(name, _type(prop), REQUIRED if name in required else prop.get("default"))
            for name, prop in (schema.get("properties") or {}).items()]


def _kind(tool: Any) -> str:
    hints = tool.annotations
    assert hints.open_world_hint is False, tool.name
    if hints.read_only_hint:
        return READ_ONLY
    return DESTRUCTIVE if hints.destructive_hint else WRITE


@functools.cache  # the tools a server offers: building one is ~0.1 CPU-second
def _listed(one_bank: bool) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        return {t.name: t for t in await build_server(one_bank=one_bank).list_tools()}

    return anyio.run(main)


def test_every_upstream_tool_is_offered_or_named_as_not_backed() -> None:
    offered = set(_listed(one_bank=False))
    assert offered <= set(UPSTREAM) | set(OURS)
    assert set(UPSTREAM) - offered - KNOWLEDGE == set(NOT_BACKED)
    # In upstream's order, which hindsight.infra.config lists, then ours.
    assert list(_listed(one_bank=False)) == [n for n in UPSTREAM if n in offered] + list(OURS)
    assert list(_listed(one_bank=False)) == list(MCP_TOOL_NAMES)


@pytest.mark.parametrize("one_bank", [False, True], ids=["all-banks", "one-bank"])
def test_each_tool_takes_upstreams_arguments_with_upstreams_hints(one_bank: bool) -> None:
    tools = _listed(one_bank)
    # The knowledge-base tools are compared once they are registered (knowledge_tools.py).
    expected = {n for n in UPSTREAM if n not in NOT_BACKED and (n not in KNOWLEDGE or n in tools)}
    expected |= set(OURS)
    if one_bank:
        expected -= UPSTREAM_ONE_BANK_EXCLUDED
    assert set(tools) == expected
    for name, tool in tools.items():
        kind, args = {**UPSTREAM, **OURS}[name]
        if one_bank:
            args = [a for a in args if a[0] != "bank_id"]
        assert _args(tool) == args, name
        assert _kind(tool) == kind, name
        # An argument the tool does not declare is refused (the schema says so too).
        assert tool.input_schema.get("additionalProperties") in (None, False), name


def test_one_bank_exclusions_are_upstreams() -> None:
    assert MCP_ONE_BANK_EXCLUDED == UPSTREAM_ONE_BANK_EXCLUDED


def test_enabled_tools_are_read_from_the_environment() -> None:
    cfg = read_config({"HINDSIGHT_API_MCP_ENABLED_TOOLS": " recall, get_mental_model ,"})
    assert cfg.mcp_enabled_tools == ("recall", "get_mental_model") and cfg.errors == ()
    assert read_config({}).mcp_enabled_tools == () and read_config({}).mcp_enabled is True
    assert read_config({"HINDSIGHT_API_MCP_ENABLED": "false"}).mcp_enabled is False


def test_an_unknown_tool_name_is_a_configuration_error_naming_it() -> None:
    cfg = read_config({"HINDSIGHT_API_MCP_ENABLED_TOOLS": "recall,recal"})
    [(name, message, _rule)] = cfg.errors
    assert name == "HINDSIGHT_API_MCP_ENABLED_TOOLS" and "'recal'" in message
    assert cfg.mcp_enabled_tools == ("recall",)


def test_build_server_offers_the_enabled_tools_in_order() -> None:
    async def names(enabled: tuple[str, ...], one_bank: bool = False) -> list[str]:
        return [t.name for t in await build_server(enabled, one_bank=one_bank).list_tools()]

    assert anyio.run(names, ()) == list(MCP_TOOL_NAMES)
    assert anyio.run(names, ("reflect", "recall")) == ["reflect", "recall"]
    assert anyio.run(names, ("list_banks", "recall"), True) == ["recall"]


# --- against a live server --------------------------------------------------------------------

BANK = "mcp-tools"
DOC = "## Team\n\nAlice prefers async; Bob runs the Monday standup."


async def _wait(client: Client, operation_id: str, **bank: str) -> dict[str, Any]:
    with anyio.fail_after(90):
        while True:
            op: dict[str, Any] = await _call(client, "get_operation", operation_id=operation_id,
                                             **bank)
            if op["status"] in ("completed", "failed", "cancelled"):
                return op
            await anyio.sleep(0.2)


def _session(stack: Any, body: Any, *, one_bank: bool) -> Any:
    """``hindsight --api-url URL mcp [--bank BANK]`` in this process, driven by the SDK's
    in-memory client."""

    async def main() -> Any:
        set_backend(ToolBackend(api=HindsightApi(stack.url),
                                default_bank=BANK if one_bank else None))
        async with Client(build_server(one_bank=one_bank), read_timeout_seconds=60) as client:
            return await body(client)

    return anyio.run(main)


@pytest.fixture
def stack(live_stack: Any) -> Any:
    live_stack.seed(BANK, [
        ("Alice prefers async communication over Slack.", ["team"]),
        ("Bob runs the Monday standup.", ["team"]),
        ("Carol's cat is called Miso.", ["carol"]),
    ])
    live_stack.llm.reset()
    return live_stack


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_the_seeds_mental_model_flow_through_upstreams_argument_names(stack: Any) -> None:
    from tests.live import write_documents

    write_documents(stack.llm, {"How does the team communicate?": DOC})

    async def body(client: Client) -> None:
        created = await _call(
            client, "create_mental_model", name="Team communication",
            source_query="How does the team communicate?", mental_model_id="mcp-team",
            tags=["team"], tags_match="any", trigger_refresh_after_consolidation=True,
            trigger={"keep_trace": True}, max_tokens=1024, bank_id=BANK)
        assert created["mental_model_id"] == "mcp-team" and created["status"] == "created"
        assert (await _wait(client, created["operation_id"], bank_id=BANK))["status"] == \
            "completed"

        listed = await _call(client, "list_mental_models", bank_id=BANK)
        assert list(listed) == ["items", "total"] and listed["total"] == 1
        [item] = listed["items"]
        assert item["id"] == "mcp-team" and item["is_stale"] is False and item["content"] is None

        model = await _call(client, "get_mental_model", mental_model_id="mcp-team",
                            detail="content", bank_id=BANK)
        assert model["content"] == DOC and model["max_tokens"] == 1024
        assert model["trigger"]["tags_match"] == "any"
        assert model["trigger"]["refresh_after_consolidation"] is True
        assert model["trigger"]["keep_trace"] is True

        updated = await _call(client, "update_mental_model", mental_model_id="mcp-team",
                              tags_match="all", trigger_refresh_after_consolidation=False,
                              trigger={"refresh_cron": "0 3 * * *"}, bank_id=BANK)
        assert (updated["trigger"]["tags_match"], updated["trigger"]["refresh_cron"],
                updated["trigger"]["refresh_after_consolidation"],
                updated["trigger"]["keep_trace"]) == ("all", "0 3 * * *", False, True)

        refreshed = await _call(client, "refresh_mental_model", mental_model_id="mcp-team",
                                bank_id=BANK)
        assert refreshed["status"] == "queued"
        assert (await _wait(client, refreshed["operation_id"], bank_id=BANK))["status"] == \
            "completed"

        cleared = await _call(client, "clear_mental_model", mental_model_id="mcp-team",
                              bank_id=BANK)
        assert (cleared["mental_model_id"], cleared["status"]) == ("mcp-team", "cleared")
        assert await _call(client, "delete_mental_model", mental_model_id="mcp-team",
                           bank_id=BANK) == {"status": "deleted", "mental_model_id": "mcp-team"}
        gone = await _refused(client, "get_mental_model", mental_model_id="mcp-team",
                              bank_id=BANK)
        assert "404" in gone

    _session(stack, body, one_bank=False)


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_an_unknown_or_ill_typed_argument_is_refused_naming_it_and_nothing_is_created(
    stack: Any,
) -> None:
    async def body(client: Client) -> None:
        # `id` is this server's old spelling; upstream's is mental_model_id.
        text = await _refused(client, "create_mental_model", name="Team", source_query="q?",
                              id="mcp-team")
        assert "unknown argument(s) id" in text and "mental_model_id" in text
        text = await _refused(client, "create_mental_model", name="Team", source_query="q?",
                              max_tokens="lots")
        assert "max_tokens" in text
        text = await _refused(client, "create_mental_model", name="Team", source_query="q?",
                              trigger={"refersh_cron": "0 3 * * *"})
        assert "refersh_cron" in text
        # One bank: bank_id is not an argument at all.
        text = await _refused(client, "create_mental_model", name="Team", source_query="q?",
                              bank_id=BANK)
        assert "unknown argument(s) bank_id" in text
        text = await _refused(client, "retain", content="x", async_processing=True)
        assert "unknown argument(s) async_processing" in text
        # A shorthand contradicting the same key inside trigger.
        text = await _refused(client, "create_mental_model", name="Team", source_query="q?",
                              tags_match="any", trigger={"tags_match": "all"})
        assert "conflicts with tags_match" in text

    _session(stack, body, one_bank=True)
    assert not MentalModel.objects.filter(bank_id=BANK).exists()
    with stack.http() as http:
        ops = http.get(f"/banks/{BANK}/operations").json()["operations"]
    # Only the seed's own consolidation: no refresh queued, no retain of "x".
    assert {op["operation_type"] for op in ops} <= {"consolidation"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_bank_memory_operation_and_tag_tools_answer_upstreams_shapes(stack: Any) -> None:
    async def body(client: Client) -> None:
        accepted = await _call(client, "retain", content="Dana owns the release train.",
                               tags=["team"], metadata={"source": "mcp"},
                               strategy="verbatim")
        assert (accepted["status"], accepted["message"]) == ("accepted",
                                                            "Memory storage initiated")
        assert (await _wait(client, accepted["operation_id"]))["status"] == "completed"
        stored = await _call(client, "sync_retain", content="Erin joined in May.",
                             strategy="verbatim")
        assert stored["status"] == "completed" and stored["items_count"] == 1

        recalled = await _call(client, "recall", query="release train", budget="low",
                               tags=["team"], tags_match="any_strict")
        assert "Dana owns the release train." in [r["text"] for r in recalled["results"]]
        listed = await _call(client, "list_memories", q="Erin")
        assert [m["text"] for m in listed["items"]] == ["Erin joined in May."]
        tags = await _call(client, "list_tags")
        assert {t["tag"] for t in tags["items"]} >= {"team", "carol"}
        ops = await _call(client, "list_operations", type="retain", limit=5)
        assert ops["operations"][0]["id"] == accepted["operation_id"]
        assert (await _call(client, "get_bank"))["bank_id"] == BANK
        renamed = await _call(client, "update_bank", name="Renamed",
                              config_updates={"enable_auto_consolidation": False})
        assert renamed["name"] == "Renamed"
        bad = await _refused(client, "update_bank", config_updates={"no_such_key": 1})
        assert "no_such_key" in bad
        flags = await _call(client, "recall", query="Dana", include_chunks=True,
                            include_entities=True, include_source_facts=True,
                            max_chunk_tokens=100, query_timestamp="2026-01-01T00:00:00Z",
                            tag_groups=[{"tags": ["team"], "match": "any_strict"}])
        assert "Dana owns the release train." in [r["text"] for r in flags["results"]]
        cancel = await _refused(client, "cancel_operation", operation_id=accepted["operation_id"])
        assert "409" in cancel

    _session(stack, body, one_bank=True)
    with stack.http() as http:
        config = http.get(f"/banks/{BANK}/config").json()
    assert config["overrides"]["enable_auto_consolidation"] is False

    async def across(client: Client) -> None:
        banks = await _call(client, "list_banks", query="mcp-to")
        assert [b["bank_id"] for b in banks["banks"]] == [BANK]
        stats = await _call(client, "get_bank_stats", bank_id=BANK)
        assert stats["bank_id"] == BANK
        made = await _call(client, "create_bank", bank_id="mcp-other", name="Other")
        assert made["bank_id"] == "mcp-other"
        deleted = await _call(client, "delete_bank", bank_id="mcp-other")
        assert (deleted["status"], deleted["bank_id"], deleted["success"]) == (
            "deleted", "mcp-other", True)
        no_bank = await _refused(client, "get_bank")
        assert "bank_id is required" in no_bank

    _session(stack, across, one_bank=False)


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_the_memory_and_document_tools_curate_through_the_rest_routes(stack: Any) -> None:
    async def body(client: Client) -> None:
        stored = await _call(client, "sync_retain", content="The deploy server is db-1.",
                             document_id="runbook", strategy="verbatim")
        assert stored["status"] == "completed"
        [fact] = (await _call(client, "list_memories", q="db-1"))["items"]
        got = await _call(client, "get_memory", memory_id=fact["id"])
        assert (got["text"], got["state"], got["document_id"]) == (
            "The deploy server is db-1.", "valid", "runbook")
        edited = await _call(client, "update_memory", memory_id=fact["id"],
                             text="The deploy server is db-2.", context="moved")
        assert (edited["text"], edited["context"]) == ("The deploy server is db-2.", "moved")
        gone = await _call(client, "invalidate_memory", memory_id=fact["id"], reason="retired")
        assert (gone["state"], gone["invalidation_reason"]) == ("invalidated", "retired")
        assert (await _call(client, "list_memories", q="db-2"))["items"] == []
        back = await _call(client, "invalidate_memory", memory_id=fact["id"], restore=True)
        assert back["state"] == "valid"
        refused = await _refused(client, "update_memory", memory_id="not-a-uuid", text="x")
        assert "400" in refused

        documents = await _call(client, "list_documents")
        assert [d["id"] for d in documents["items"]] == ["runbook"]
        document = await _call(client, "get_document", document_id="runbook")
        assert document["original_text"] == "The deploy server is db-1."
        deleted = await _call(client, "delete_document", document_id="runbook")
        assert deleted["memory_units_deleted"] == 1
        assert (await _call(client, "list_documents"))["total"] == 0
        cleared = await _call(client, "clear_memories")
        assert cleared["deleted_count"] >= 3  # the seeded memories; the bank stays
        assert (await _call(client, "list_memories"))["total"] == 0
        assert (await _call(client, "get_bank"))["bank_id"] == BANK

    _session(stack, body, one_bank=True)


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_the_banks_mcp_enabled_tools_narrow_what_its_session_lists_and_calls(stack: Any) -> None:
    with stack.http() as http:
        http.patch(f"/banks/{BANK}/config", json={"updates": {
            "mcp_enabled_tools": ["recall", "get_bank"]}}).raise_for_status()

    async def body(client: Client) -> None:
        assert [t.name for t in (await client.list_tools()).tools] == ["recall", "get_bank"]
        assert (await _call(client, "get_bank"))["bank_id"] == BANK
        refused = await _refused(client, "list_mental_models")
        assert "not enabled for bank 'mcp-tools'" in refused

    _session(stack, body, one_bank=True)
