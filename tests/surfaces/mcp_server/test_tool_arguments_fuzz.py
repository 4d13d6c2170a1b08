"""Any JSON value in any argument of any MCP tool is either handed to the API or a tool error
that names the argument — never a crash (the SDK's bare ``Error executing tool <name>``, which
hides the exception) and never a refusal that does not say which argument it is about.

The tools run over the SDK's in-memory client against an API that records each call and
refuses it (``HTTP 422: forwarded``), so a value that passes the tool's own checks is seen
reaching the API and nothing is stored anywhere. The tools and their arguments are read from
the server's own listing: a new tool or argument is covered without being listed here.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mcp import Client

from hindsight.surfaces.cli.api import ApiError
from hindsight.surfaces.mcp_server.tools import ToolBackend, build_server, set_backend
from tests.strategies import any_json

FORWARDED = "HTTP 422: forwarded"

JSON = any_json(max_leaves=10)


class RefusingApi:
    """Every ``HindsightApi`` method: records the call and answers the API's 422."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            raise ApiError(422, "forwarded")

        return refuse


def _valid(schema: dict[str, Any]) -> Any:
    """A value the argument's schema accepts (for the required arguments not under test)."""
    if "anyOf" in schema:
        return _valid(next(o for o in schema["anyOf"] if o.get("type") != "null"))
    if "enum" in schema:
        return schema["enum"][0]
    return {"string": "x", "integer": 1, "number": 1, "boolean": True, "array": [],
            "object": {}}.get(schema.get("type"), "x")


# One server for every call, as the API's MCP endpoint keeps one per tool set (building one
# registers every tool's argument model: a tenth of a second each time).
SERVER = build_server()


def _tools() -> dict[str, dict[str, Any]]:
    async def main() -> dict[str, dict[str, Any]]:
        return {t.name: t.input_schema for t in await SERVER.list_tools()}

    return anyio.run(main)


TOOLS = _tools()


# One value or more of each JSON type, edges included (empty, past 64 bits, control
# characters, nested): every argument of every tool gets each of them, by construction.
EVERY_JSON_TYPE: list[tuple[str, Any]] = [
    ("null", None), ("boolean", True), ("boolean", False),
    ("integer", 0), ("integer", -1), ("integer", 2**70),
    ("number", 0.5), ("number", -1e308),
    ("string", ""), ("string", "x"), ("string", "\x00\n\u202e"),
    ("array", []), ("array", [None, 1, "a", {"k": []}]),
    ("object", {}), ("object", {"k": [1, {"": None}]}),
]


def test_the_values_cover_every_json_type_and_every_tool_has_arguments() -> None:
    assert {kind for kind, _ in EVERY_JSON_TYPE} == {
        "null", "boolean", "integer", "number", "string", "array", "object"}
    assert TOOLS and all(schema.get("properties") for schema in TOOLS.values())


def _base(name: str) -> dict[str, Any]:
    """The tool's required arguments, valid, and the bank."""
    schema = TOOLS[name]
    properties = schema.get("properties") or {}
    base = {arg: _valid(properties[arg]) for arg in schema.get("required") or ()}
    base["bank_id"] = "fuzz-bank"
    return base


def _call(name: str, cases: list[tuple[str, Any]]) -> tuple[str, list[tuple[Any, ...]]]:
    """The refusal of the call with only the base arguments, and for each ``(arg, value)``
    case: the argument, the value, whether it is an error, its text, whether it reached the
    API."""
    base = _base(name)
    api = RefusingApi()

    async def main() -> list[tuple[str, Any, bool, str, bool]]:
        set_backend(ToolBackend(api=api))  # type: ignore[arg-type]  # the recording fake
        answers = []
        async with Client(SERVER, read_timeout_seconds=30) as client:
            alone = await client.call_tool(name, base)
            answers.append(("", None, alone.is_error, alone.content[0].text, bool(api.calls)))
            for arg, value in cases:
                before = len(api.calls)
                result = await client.call_tool(name, {**base, arg: value})
                text = result.content[0].text if result.content else ""
                answers.append((arg, value, result.is_error, text, len(api.calls) > before))
        return answers

    [(_, _, _, refusal, _), *answers] = anyio.run(main)
    return refusal, answers


def _check(name: str, refusal: str, answers: list[tuple[Any, ...]]) -> None:
    for arg, value, is_error, text, forwarded in answers:
        assert text != f"Error executing tool {name}", (arg, value)  # a crash
        if forwarded:
            assert is_error and FORWARDED in text, (arg, value, text)
        else:
            # Refused before the API: the message names the argument, or the value changed
            # nothing (the call without it is refused the same way, e.g. nothing to update).
            assert is_error and (arg in text or text == refusal), (arg, value, text)


@pytest.mark.parametrize("name", list(TOOLS))
def test_every_json_type_in_every_argument_is_forwarded_or_refused_naming_it(name: str) -> None:
    properties = TOOLS[name].get("properties") or {}
    cases = [(arg, value) for arg in properties for _, value in EVERY_JSON_TYPE]
    refusal, answers = _call(name, cases)
    assert len(answers) == len(properties) * len(EVERY_JSON_TYPE)
    _check(name, refusal, answers)


@pytest.mark.parametrize("name", list(TOOLS))
# Beyond the enumeration: a few drawn values (nested mixes), deterministic. No shrinking: the
# failing value is in the assertion's message already.
@settings(max_examples=3, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_json_in_any_argument_is_forwarded_or_refused_naming_it(name: str, data: Any) -> None:
    properties = TOOLS[name].get("properties") or {}
    cases = [(arg, data.draw(JSON, label=arg)) for arg in properties for _ in range(2)]
    _check(name, *_call(name, cases))
