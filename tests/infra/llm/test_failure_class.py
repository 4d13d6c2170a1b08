"""What an LLM error says about itself: transient (the provider may answer later) or not, and
the ``Retry-After`` the provider sent — the facts a refresh's failure class is built on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from fakes.llm_server import Reply
from hindsight.infra.llm import LLMOutputError, LLMProviderError, LLMTimeout, get_llm


@pytest.mark.parametrize(("status", "transient"), [
    (400, False), (401, False), (403, False), (404, False), (422, False),
    (429, True), (500, True), (502, True), (503, True),
])
def test_a_provider_error_is_transient_for_429_and_5xx_only(scripted_llm, status, transient):
    scripted_llm.script(Reply.error(status, "scripted"))
    with pytest.raises(LLMProviderError) as raised:
        get_llm().chat([{"role": "user", "content": "hi"}])
    assert raised.value.status_code == status
    assert raised.value.transient is transient
    assert raised.value.retry_after is None


def test_a_connection_error_and_a_timeout_are_transient_an_unusable_answer_is_not(scripted_llm):
    scripted_llm.script(Reply.disconnect())
    with pytest.raises(LLMProviderError) as raised:
        get_llm().chat([{"role": "user", "content": "hi"}])
    assert raised.value.status_code is None and raised.value.transient
    assert LLMTimeout("deadline").transient
    scripted_llm.script(Reply.text("not json"))
    with pytest.raises(LLMOutputError) as unusable:
        get_llm().structured([{"role": "user", "content": "hi"}], name="x",
                             schema={"type": "object", "properties": {"a": {"type": "string"}}})
    assert not unusable.value.transient


def test_retry_after_is_read_in_seconds_or_as_an_http_date_and_capped_at_a_day(scripted_llm):
    when = datetime.now(UTC) + timedelta(seconds=120)
    for header, low, high in (("7", 7, 7), (format_datetime(when, usegmt=True), 100, 121),
                              ("999999", 86400, 86400), ("soon", None, None)):
        scripted_llm.script(Reply.error(429, "slow down", retry_after=header))
        with pytest.raises(LLMProviderError) as raised:
            get_llm().chat([{"role": "user", "content": "hi"}])
        if low is None:
            assert raised.value.retry_after is None
        else:
            assert low <= raised.value.retry_after <= high, (header, raised.value.retry_after)
