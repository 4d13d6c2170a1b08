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


def _tools() -> dict[str, dict[str, Any]]:
    async def main() -> dict[str, dict[str, Any]]:
        return {t.name: t.input_schema for t in await build_server().list_tools()}

    return anyio.run(main)


TOOLS = _tools()


@pytest.mark.parametrize("name", list(TOOLS))
# No shrinking: the failing value is in the assertion's message already.
@settings(max_examples=3, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_json_in_any_argument_is_forwarded_or_refused_naming_it(name: str, data: Any) -> None:
    schema = TOOLS[name]
    properties = schema.get("properties") or {}
    base = {arg: _valid(properties[arg]) for arg in schema.get("required") or ()}
    base["bank_id"] = "fuzz-bank"
    cases = [(arg, data.draw(JSON, label=arg)) for arg in properties for _ in range(2)]
    api = RefusingApi()

    async def main() -> list[tuple[str, Any, bool, str, bool]]:
        set_backend(ToolBackend(api=api))  # type: ignore[arg-type]  # the recording fake
        answers = []
        async with Client(build_server(), read_timeout_seconds=30) as client:
            alone = await client.call_tool(name, base)
            answers.append(("", None, alone.is_error, alone.content[0].text, bool(api.calls)))
            for arg, value in cases:
                before = len(api.calls)
                result = await client.call_tool(name, {**base, arg: value})
                text = result.content[0].text if result.content else ""
                answers.append((arg, value, result.is_error, text, len(api.calls) > before))
        return answers

    [(_, _, _, refusal, _), *answers] = anyio.run(main)
    for arg, value, is_error, text, forwarded in answers:
        assert text != f"Error executing tool {name}", (arg, value)  # a crash
        if forwarded:
            assert is_error and FORWARDED in text, (arg, value, text)
        else:
            # Refused before the API: the message names the argument, or the value changed
            # nothing (the call without it is refused the same way, e.g. nothing to update).
            assert is_error and (arg in text or text == refusal), (arg, value, text)
