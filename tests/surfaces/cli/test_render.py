"""How the CLI's lists read on an 80-column terminal: every id whole on one line (it is what
people copy into the next command), the table within the width, the columns left out named."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator

import pytest
from rich.console import Console

from hindsight.surfaces.cli import render

WIDTH = 80
WHEN = "2026-01-05T08:13:46.123456+00:00"


@pytest.fixture
def screen(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    captured = io.StringIO()
    monkeypatch.setattr(render, "out", Console(width=WIDTH, file=captured, highlight=False,
                                               soft_wrap=False, color_system=None))
    yield captured


def _whole_on_one_line(text: str, ids: list[str]) -> None:
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH, text
    for one in ids:
        assert any(one in line for line in lines), f"{one} split:\n{text}"


def test_an_operation_list_keeps_each_uuid_on_one_line_at_80_columns(screen: io.StringIO) -> None:
    ids = [str(uuid.uuid4()) for _ in range(3)]
    render.operation_list({"total": 3, "operations": [
        {"id": one, "task_type": "refresh_mental_model", "status": status, "created_at": WHEN,
         "retry_count": 2, "error_message": "the LLM refused: connection reset by peer " * 2}
        for one, status in zip(ids, ("completed", "failed", "pending"), strict=True)]})
    text = screen.getvalue()
    _whole_on_one_line(text, ids)
    assert "failed" in text and "the LLM refused" in text  # what matters most stays
    assert "left out at this width:" in text


def test_a_mental_model_list_keeps_generated_and_long_ids_whole_at_80_columns(
        screen: io.StringIO) -> None:
    ids = [f"mm-{uuid.uuid4().hex}", "current-projects", "q" + "-quarterly-planning" * 2]
    render.mental_model_list({"total": 3, "items": [
        {"id": one, "name": "Current Projects of the whole team", "tags": ["projects", "team"],
         "is_stale": True, "last_refreshed_at": WHEN, "last_refresh_failed_at": None}
        for one in ids]})
    _whole_on_one_line(screen.getvalue(), ids)


def test_a_bank_list_keeps_bank_ids_whole_and_shortens_timestamps(screen: io.StringIO) -> None:
    ids = ["team", "a-bank-with-a-rather-long-identifier-of-forty-eight-c"]
    render.bank_list({"total": 2, "banks": [
        {"bank_id": one, "name": one, "fact_count": 3, "last_write_at": WHEN} for one in ids]})
    text = screen.getvalue()
    _whole_on_one_line(text, ids)
    assert "08:13" in text and ":46" not in text and "+00:00" not in text
