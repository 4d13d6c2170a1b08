"""Number settings must be finite: ``inf``/``nan`` are reported naming the variable (an infinite
rate floor overflowed ``int()``/``timedelta`` at request time: a 500 on GET …/config)."""

from __future__ import annotations

import pytest

from hindsight.infra.config import read_config


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity"])
@pytest.mark.parametrize(
    "variable",
    ["HINDSIGHT_API_MENTAL_MODEL_MIN_REFRESH_INTERVAL_SECONDS", "HINDSIGHT_API_LLM_TIMEOUT",
     "HINDSIGHT_API_WORKER_TASK_RETRY_BACKOFF_SECONDS"],
)
def test_a_non_finite_number_is_reported_naming_the_variable(variable: str, value: str) -> None:
    config = read_config({variable: value})
    assert variable in [problem.variable for problem in config.errors]


def test_finite_numbers_are_taken() -> None:
    config = read_config({"HINDSIGHT_API_MENTAL_MODEL_MIN_REFRESH_INTERVAL_SECONDS": "1.5e3"})
    assert config.errors == () and config.mental_model_min_refresh_interval_seconds == 1500.0
