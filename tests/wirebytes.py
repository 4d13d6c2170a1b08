"""Answers held byte for byte: literal expectations captured once from the code being replaced.

``EDGE_BYTES_CAPTURE=<file>`` re-captures instead of comparing: each case appends
``[case_id, status, body]`` to the file (paste them back as the literals) and then fails, so a
capture run can never be mistaken for a passing one."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

DATETIME = re.compile(r'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"')
DURATION_MS = re.compile(r'"duration_ms":\d+')


def capturing() -> bool:
    return bool(os.environ.get("EDGE_BYTES_CAPTURE"))


def check_cases(cases: list[tuple[Any, ...]], expected: dict[str, tuple[int, str]]) -> None:
    """Every case id (a case's first item) is unique and has its literal (not checked, and
    so failed, when capturing: the literals are being replaced)."""
    ids = [case[0] for case in cases]
    assert len(ids) == len(set(ids))
    if capturing():
        pytest.fail("EDGE_BYTES_CAPTURE: the literals are being re-captured, not checked")
    assert set(ids) == set(expected)


def check_or_capture(case_id: str, got: tuple[int, str], expected: dict[str, tuple[int, str]]) -> None:
    """``got == expected[case_id]``, or, when capturing, ``got`` appended to the capture file
    and the case failed (nothing was compared)."""
    capture = os.environ.get("EDGE_BYTES_CAPTURE")
    if capture:
        with open(capture, "a") as out:
            out.write(json.dumps([case_id, *got]) + "\n")
        pytest.fail(f"EDGE_BYTES_CAPTURE: {case_id} captured to {capture}, not compared")
    assert got == expected[case_id]


def j(value: Any) -> str:
    return json.dumps(value)


def send(api: Any, method: str, path: str, body: Any) -> Any:
    """One request of a byte case: no body when ``body`` is None, else it as JSON text."""
    if body is None:
        return getattr(api, method)(path)
    return getattr(api, method)(path, data=body, content_type="application/json")
