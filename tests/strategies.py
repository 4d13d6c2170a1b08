"""Hypothesis strategies shared by the property tests of the edges (REST bodies, MCP tools)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def any_json(*, max_leaves: int) -> st.SearchStrategy[Any]:
    """Any JSON value: scalars (integers past 64 bits, text with control characters) and
    nested lists and objects of them."""
    return st.recursive(
        st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
        | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                    max_size=4),
        max_leaves=max_leaves,
    )
