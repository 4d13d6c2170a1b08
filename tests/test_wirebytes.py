"""The byte-case helpers themselves: a capture run writes what it saw and never passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.wirebytes import check_cases, check_or_capture

EXPECTED = {"case": (200, '{"a":1}')}


def test_a_case_compares_its_bytes_when_not_capturing(monkeypatch) -> None:
    monkeypatch.delenv("EDGE_BYTES_CAPTURE", raising=False)
    check_or_capture("case", (200, '{"a":1}'), EXPECTED)
    with pytest.raises(AssertionError):
        check_or_capture("case", (200, '{"a":2}'), EXPECTED)


def test_a_capture_run_writes_the_case_and_then_fails(monkeypatch, tmp_path: Path) -> None:
    capture = tmp_path / "capture.jsonl"
    monkeypatch.setenv("EDGE_BYTES_CAPTURE", str(capture))
    with pytest.raises(pytest.fail.Exception, match="not compared"):
        check_or_capture("case", (200, '{"a":1}'), EXPECTED)
    assert [json.loads(line) for line in capture.read_text().splitlines()] == [
        ["case", 200, '{"a":1}']]


def test_a_capture_run_fails_the_completeness_check_too(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EDGE_BYTES_CAPTURE", str(tmp_path / "capture.jsonl"))
    with pytest.raises(pytest.fail.Exception, match="re-captured"):
        check_cases([("case",)], EXPECTED)
