"""The HTTP client's one-line error messages, from both of upstream's error shapes."""

from __future__ import annotations

from hindsight.surfaces.cli.api import ApiError, error_message


def test_field_errors_become_one_line_naming_each_field() -> None:
    body = {"detail": [
        {"loc": ["body", "id"], "msg": "id must match\n the rule", "type": "value_error"},
        {"loc": ["body", "trigger", "mode"], "msg": "not a mode", "type": "value_error"},
    ]}
    assert error_message(body, "x") == "body.id: id must match the rule; body.trigger.mode: not a mode"


def test_a_detail_string_is_kept_and_a_bodyless_error_falls_back() -> None:
    assert error_message({"detail": "Mental model x not found"}, "x") == "Mental model x not found"
    assert error_message("<html>", "Bad Gateway") == "Bad Gateway"
    assert str(ApiError(404, "gone")) == "HTTP 404: gone"
    assert str(ApiError(0, "cannot reach")) == "cannot reach"
