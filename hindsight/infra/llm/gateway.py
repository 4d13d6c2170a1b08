"""The LLM gateway: every LLM request of the service goes through here, via the openai SDK.

What it adds on top of the SDK, once for every caller:

- **Deadlines.** A ``Deadline`` is shared by a chain of calls (a whole refresh); each request
  gets ``min(HINDSIGHT_API_LLM_TIMEOUT, remaining)`` as its timeout, and a call that finds it
  spent raises ``LLMTimeout`` without sending anything. The worker slot's own wall timeout
  (``slot_deadline()``, set by the engine around a job) caps every request the same way, so no
  LLM wait outlives the slot's clock, whatever deadline the caller passed.
- **Waiting holds nothing else.** Before each request the thread's database connection goes
  back to its pool (``hindsight.infra.db.connection_release_to_pool``; a no-op without one): a
  threads-pool slot waiting on the LLM holds no connection.
- **Retries of transient errors only** (429, 5xx, connection errors, a request timeout while
  the deadline still has time), up to ``HINDSIGHT_API_LLM_MAX_RETRIES`` extra attempts with a
  short jittered backoff — or, when the answer carried a ``Retry-After``, at least that long.
  A ``Retry-After`` longer than ``MAX_IN_CALL_RETRY_AFTER_SECONDS`` or than the deadline has
  left is not waited inside the call: the call fails at once with the error's ``retry_after``
  (the engine's re-attempt of the job waits it out, holding no slot). The SDK's own retries
  are off so attempts are counted here.
- **Structured output** on the first step the server takes: a strict JSON schema, else JSON
  mode, else no ``response_format`` at all — each step below the first tells the model the
  schema in the prompt. A 400 naming ``response_format`` steps down once per call (not a failed
  attempt); an answer breaking a strict schema the server accepted (it ignores
  ``response_format``) steps down too, asked again within the retry budget. The step that
  worked is remembered per server and model (``servers``), so later calls start there. The
  answer is validated with jsonschema.
- **Answers as real servers write them** (``answers``): reasoning blocks (``<think>…</think>``)
  are taken out of every answer's content and ``reasoning_content`` is never read; the JSON of a
  structured answer is found in a fence or in prose around it; a tool call's arguments that are
  not JSON are repaired when they can be read (fenced, in prose, a Python literal), else the
  call is asked again once within the retry budget, the model told why.
- **Cut-off answers** (``finish_reason: length``) are a transient failure: asked again within
  the call under the same retry budget, with twice the token budget when the caller set one;
  when every answer was cut off the call raises ``LLMCutOff`` — never half an answer.
- **A model without tools.** A 400 saying the model does not support tools raises
  ``LLMToolsUnsupported`` and is remembered for the server (``LLMGateway.tools_supported``),
  so a caller with a tool-less way of working takes it without asking again.
- **Accounting.** Every call returns its ``Usage`` and ``duration_ms`` and is reported as an
  ``LLMCallRecord`` to the gateway's ``on_call`` hook and to any ``collect_llm_calls()`` block.
- **The request log.** Every HTTP request (each attempt of a call) is handed, as an
  ``LLMRequestEvent`` with the caller's ``llm_context`` (bank, operation), to the registered
  request sinks — the LLM request log (``hindsight.infra.llm.log``, attached in ``LLMConfig.ready``) —
  and counted in the context's tallies. A sink that fails is logged and never fails the call.

Configuration is read when ``get_llm()`` is called (base URL, key, model) and at each call
(timeout, retries), so tests override ``settings.HINDSIGHT`` freely.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import jsonschema
from django.conf import settings

from hindsight.infra import metrics
from hindsight.infra.db import connection_release_to_pool
from hindsight.infra.errors import LLMNotConfigured
from hindsight.infra.lazy import openai  # imported at the first use
from hindsight.infra.llm import servers
from hindsight.infra.llm.answers import find_json, strip_reasoning, tool_arguments
from hindsight.infra.llm.context import LLMContext, count_in_tallies, current_llm_context
from hindsight.infra.llm.retry import backoff_seconds, is_transient, retry_after_seconds
from hindsight.infra.llm.types import (
    ChatResult,
    Deadline,
    LLMCallRecord,
    LLMCutOff,
    LLMError,
    LLMOutputError,
    LLMProviderError,
    LLMRequestEvent,
    LLMTimeout,
    LLMToolsUnsupported,
    StructuredResult,
    ToolCall,
    Usage,
)

logger = logging.getLogger("hindsight.infra.llm")

OnCall = Callable[[LLMCallRecord], None]
RequestSink = Callable[[LLMRequestEvent, LLMContext | None], None]

_request_sinks: list[RequestSink] = []


@dataclasses.dataclass(frozen=True)
class _SlotClock:
    deadline: Deadline
    on_expiry: Callable[[], BaseException] | None


_slot_deadline: contextvars.ContextVar[_SlotClock | None] = contextvars.ContextVar(
    "hindsight_llm_slot_deadline", default=None
)


def request_sink_register(sink: RequestSink) -> None:
    """Receive every HTTP request the gateway sends (idempotent per sink)."""
    if sink not in _request_sinks:
        _request_sinks.append(sink)


@contextlib.contextmanager
def slot_deadline(
    deadline: Deadline, *, on_expiry: Callable[[], BaseException] | None = None
) -> Iterator[None]:
    """Every LLM request inside the block ends by ``deadline`` (the worker slot's wall clock).

    A request cut short by that deadline (not by a nearer one its caller passed) raises what
    ``on_expiry()`` returns — the slot's own timeout — rather than an ``LLMTimeout``, so an
    attempt ended by the slot's clock is reported as that clock, whichever of the two noticed
    first.
    """
    token = _slot_deadline.set(_SlotClock(deadline, on_expiry))
    try:
        yield
    finally:
        _slot_deadline.reset(token)


def _earliest(deadline: Deadline | None) -> Deadline | None:
    slot = _slot_deadline.get()
    if slot is None:
        return deadline
    if deadline is None or slot.deadline.remaining() < deadline.remaining():
        return slot.deadline
    return deadline


# The longest ``Retry-After`` an in-call retry waits (holding its worker slot); a longer one
# ends the call and is waited by the engine's re-attempt of the job instead.
MAX_IN_CALL_RETRY_AFTER_SECONDS = 30.0


def _in_call_wait_fits(seconds: float, deadline: Deadline | None) -> bool:
    """Whether a provider's ``Retry-After`` can be waited within this call: at most
    ``MAX_IN_CALL_RETRY_AFTER_SECONDS``, and with time left on the deadline (the caller's or
    the slot's, the earlier) to send the retry after it."""
    if seconds > MAX_IN_CALL_RETRY_AFTER_SECONDS:
        return False
    return deadline is None or seconds < deadline.remaining()


def _deadline_spent(deadline: Deadline, message: str, *, attempts: int) -> BaseException:
    """What a spent ``deadline`` raises: the slot's own timeout when it is the slot's clock and
    the slot gave one (``slot_deadline(on_expiry=…)``), else an ``LLMTimeout``."""
    slot = _slot_deadline.get()
    if slot is not None and slot.deadline is deadline and slot.on_expiry is not None:
        return slot.on_expiry()
    return LLMTimeout(message, attempts=attempts)


_collectors: contextvars.ContextVar[tuple[list[LLMCallRecord], ...]] = contextvars.ContextVar(
    "hindsight_llm_collectors", default=()
)
_clients: dict[tuple[str, str], openai.OpenAI] = {}
_clients_lock = threading.Lock()


@contextlib.contextmanager
def collect_llm_calls() -> Iterator[list[LLMCallRecord]]:
    """Collect a record of every LLM call made inside the block (in this thread/context)."""
    records: list[LLMCallRecord] = []
    token = _collectors.set(_collectors.get() + (records,))
    try:
        yield records
    finally:
        _collectors.reset(token)


def get_llm(
    *, what: str = "this call", on_call: OnCall | None = None, bank_id: str | None = None
) -> LLMGateway:
    """A gateway for the configured provider; ``LLMNotConfigured`` (400) names the variables
    when there is none. Cheap: the HTTP client underneath is shared per process.

    ``bank_id`` is the bank the calls are made for (the metrics count requests and tokens per
    bank and purpose)."""
    cfg = settings.HINDSIGHT
    if not cfg.llm_configured:
        raise LLMNotConfigured(what)
    return LLMGateway(
        base_url=cfg.llm_base_url, api_key=cfg.llm_api_key, model=cfg.llm_model, on_call=on_call,
        bank_id=bank_id, provider=cfg.llm_provider,
    )


def _client(base_url: str, api_key: str) -> openai.OpenAI:
    key = (base_url, api_key)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = openai.OpenAI(
                base_url=base_url or None,
                # Local OpenAI-compatible servers take any key; the SDK insists on one.
                api_key=api_key or "unused",
                max_retries=0,
            )
            _clients[key] = client
        return client


class LLMGateway:
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        timeout_seconds: float | None = None,
        max_retries: int | None = None,
        on_call: OnCall | None = None,
        bank_id: str | None = None,
        provider: str = "openai",
    ) -> None:
        self.model = model
        self.bank_id = bank_id
        self.base_url = base_url
        self.provider = provider
        self._client = _client(base_url, api_key)
        self._timeout_seconds = timeout_seconds
        self._max_retries = max_retries
        self._on_call = on_call
        # Learnt from the server during this gateway's life (one refresh, one request):
        self._max_tokens_param = "max_completion_tokens"

    @property
    def tools_supported(self) -> bool:
        """False once this server's model refused a request with tools (in this process)."""
        return servers.traits_of(self.base_url, self.model).tools is not False

    # ------------------------------------------------------------------------------------
    # public calls

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        deadline: Deadline | None = None,
        purpose: str = "",
    ) -> ChatResult:
        started = time.monotonic()
        kwargs: dict[str, Any] = {"messages": messages}
        if tools:
            kwargs["tools"] = tools
            if tool_choice is not None:
                kwargs["tool_choice"] = tool_choice
        if temperature is not None:
            kwargs["temperature"] = temperature
        attempts = 0
        try:
            try:
                response, attempts = self._create(
                    kwargs, max_tokens=max_tokens, deadline=deadline, purpose=purpose, kind="chat"
                )
            except LLMProviderError as exc:
                if not tools or not _refuses_tools(exc):
                    raise
                servers.tools_remember(self.base_url, self.model, supported=False)
                raise LLMToolsUnsupported(str(exc), attempts=exc.attempts,
                                          status_code=exc.status_code) from exc
            result = _chat_result(response, started=started, attempts=attempts)
            if any(call.arguments_error for call in result.tool_calls) \
                    and attempts <= self._retries():
                result = self._reask_tool_call(kwargs, result, max_tokens=max_tokens,
                                               deadline=deadline, purpose=purpose, started=started)
                attempts = result.attempts
        except LLMError as exc:
            self._report(
                kind="chat", purpose=purpose, started=started, usage=Usage(),
                attempts=exc.attempts or attempts, error=exc,
            )
            raise
        self._report(
            kind="chat", purpose=purpose, started=started, usage=result.usage,
            attempts=attempts, tool_calls=[c.name for c in result.tool_calls],
        )
        return result

    def _reasoning_effort(self) -> str:
        """The level to send as ``reasoning_effort`` ("" for none): the configured one, unless
        the model is one of OpenAI's that refuse it or this server refused it before."""
        effort = settings.HINDSIGHT.llm_reasoning_effort
        if not effort or _refuses_reasoning_effort(self.model):
            return ""
        return effort if servers.traits_of(self.base_url, self.model).reasoning_effort else ""

    def _retries(self) -> int:
        return self._max_retries if self._max_retries is not None \
            else settings.HINDSIGHT.llm_max_retries

    def _reask_tool_call(
        self, kwargs: dict[str, Any], first: ChatResult, *, max_tokens: int | None,
        deadline: Deadline | None, purpose: str, started: float,
    ) -> ChatResult:
        """Ask once more after a tool call whose arguments could not be read, telling the model
        why (its call and the error, as the conversation's next turns). The caller gets the new
        answer; its own conversation never holds the unreadable one."""
        told = [first.message] + [
            {"role": "tool", "tool_call_id": call.id,
             "content": json.dumps({"error": f"{call.arguments_error}. Call the tool again "
                                             "with its arguments as one JSON object."})
             if call.arguments_error else json.dumps({"error": "not run: call the tools again"})}
            for call in first.tool_calls
        ]
        again = dict(kwargs, messages=[*kwargs["messages"], *told])
        logger.info("LLM tool call arguments unreadable (%s); asking again",
                    next(c.arguments_error for c in first.tool_calls if c.arguments_error))
        response, used = self._create(again, max_tokens=max_tokens, deadline=deadline,
                                      purpose=purpose, kind="chat", first_attempt=first.attempts)
        return _chat_result(response, started=started, attempts=used)

    def structured(
        self,
        messages: list[dict[str, Any]],
        *,
        schema: dict[str, Any],
        name: str,
        strict: bool = True,
        max_tokens: int | None = None,
        deadline: Deadline | None = None,
        purpose: str = "",
    ) -> StructuredResult:
        """Ask for one JSON value matching ``schema``; return it parsed and validated."""
        started = time.monotonic()
        usage = Usage()
        attempts = 0

        def create(kwargs: dict[str, Any]) -> Any:
            nonlocal attempts
            try:
                response, used = self._create(
                    kwargs, max_tokens=max_tokens, deadline=deadline, purpose=purpose,
                    kind="structured",
                )
            except LLMError as exc:
                attempts += exc.attempts
                exc.attempts = attempts
                raise
            attempts += used
            return response

        try:
            validator = _validator(json.dumps(schema, sort_keys=True))
        except jsonschema.SchemaError as exc:
            raise ValueError(f"structured(): invalid JSON schema {name!r}: {exc.message}") from exc
        steps = servers.steps_for(self.provider, settings.HINDSIGHT.llm_json_object)
        mode = servers.traits_of(self.base_url, self.model).structured_step
        if mode not in steps:
            mode = servers.PROMPT
        try:
            while True:
                try:
                    response = create(_structured_request(messages, schema, name, strict, mode))
                except LLMProviderError as exc:
                    lower = _step_below(mode, exc, steps)
                    if lower is None:
                        raise
                    logger.info("LLM refused response_format at step %s (%s); using %s",
                                mode, exc, lower)
                    servers.structured_step_remember(self.base_url, self.model, lower)
                    mode = lower
                    continue
                usage = usage + Usage.from_openai(response.usage)
                try:
                    data = _parse_structured(response, validator, attempts=attempts)
                    break
                except LLMOutputError:
                    # A strict schema the server took yet an answer that breaks it: the server
                    # accepts response_format and ignores it (Anthropic's OpenAI endpoint does),
                    # so the model never saw the schema. Ask again with it in the prompt.
                    if not (strict and mode == servers.JSON_SCHEMA) \
                            or attempts > self._retries():
                        raise
                    mode = steps[1]
                    logger.info("LLM answer ignored the strict json_schema; using %s", mode)
                    servers.structured_step_remember(self.base_url, self.model, mode)
        except LLMError as exc:
            self._report(
                kind="structured", purpose=purpose, started=started, usage=usage,
                attempts=attempts, error=exc,
            )
            raise
        duration_ms = _ms_since(started)
        self._report(
            kind="structured", purpose=purpose, started=started, usage=usage, attempts=attempts
        )
        return StructuredResult(
            data=data, usage=usage, duration_ms=duration_ms, mode=mode, attempts=attempts
        )

    # ------------------------------------------------------------------------------------
    # one request with retries

    def _create(
        self,
        kwargs: dict[str, Any],
        *,
        max_tokens: int | None,
        deadline: Deadline | None,
        purpose: str = "",
        kind: str = "chat",
        first_attempt: int = 0,
    ) -> tuple[Any, int]:
        """Send the request (retrying transient failures and cut-off answers); log every attempt.
        ``first_attempt``: attempts the call already made (a re-ask counts on from them)."""

        def send(request: dict[str, Any], attempt: int) -> Any:
            connection_release_to_pool()
            started_at, started = datetime.now(UTC), time.monotonic()
            try:
                response = _chat_completion(self._client, request)
            except openai.OpenAIError as exc:
                self._log_request(request, None, purpose=purpose, kind=kind, attempt=attempt,
                                  started_at=started_at, started=started, error=exc)
                raise
            except json.JSONDecodeError as exc:
                # A 200 whose body is not JSON (a proxy's error page, a cut-off answer): the
                # SDK's own parse error would escape every caller's ``except LLMError``.
                error = LLMOutputError(f"LLM answer is not a JSON completion: {exc}",
                                       attempts=attempt)
                self._log_request(request, None, purpose=purpose, kind=kind, attempt=attempt,
                                  started_at=started_at, started=started, error=error)
                raise error from exc
            self._log_request(request, response, purpose=purpose, kind=kind, attempt=attempt,
                              started_at=started_at, started=started, error=None)
            return response

        return self._send_with_retries(kwargs, max_tokens=max_tokens, deadline=deadline,
                                       send=send, first_attempt=first_attempt)

    def _send_with_retries(
        self,
        kwargs: dict[str, Any],
        *,
        max_tokens: int | None,
        deadline: Deadline | None,
        send: Callable[[dict[str, Any], int], Any],
        first_attempt: int = 0,
    ) -> tuple[Any, int]:
        cfg = settings.HINDSIGHT
        deadline = _earliest(deadline)
        request_timeout = (
            self._timeout_seconds if self._timeout_seconds is not None else cfg.llm_timeout_seconds
        )
        max_retries = self._retries()
        attempt = first_attempt
        while True:
            if deadline is not None and deadline.expired:
                raise _deadline_spent(
                    deadline,
                    f"LLM deadline of {deadline.seconds:g}s exhausted"
                    + (f" after {attempt} attempt(s)" if attempt else " before the call"),
                    attempts=attempt,
                )
            timeout = request_timeout if deadline is None else min(
                request_timeout, deadline.remaining()
            )
            attempt += 1
            request = dict(kwargs, model=self.model, timeout=timeout)
            if max_tokens is not None:
                request[self._max_tokens_param] = max_tokens
            effort = self._reasoning_effort()
            if effort:
                request["reasoning_effort"] = effort
            try:
                response = send(request, attempt)
            except openai.BadRequestError as exc:
                if (
                    max_tokens is not None
                    and self._max_tokens_param == "max_completion_tokens"
                    and "max_completion_tokens" in str(exc)
                ):
                    # Older OpenAI-compatible servers only know max_tokens; newer models only
                    # max_completion_tokens. Switch once; this is not a failed attempt.
                    self._max_tokens_param = "max_tokens"
                    attempt -= 1
                    continue
                if "reasoning_effort" in request and "reasoning_effort" in str(exc):
                    # docs/providers.md#knobs-an-upstream-env-carries: a model that does not reason refuses
                    # the level; asked without it from now on, and this is no failed attempt.
                    logger.info("LLM server refused reasoning_effort; asking without it")
                    servers.reasoning_effort_refused(self.base_url, self.model)
                    attempt -= 1
                    continue
                raise LLMProviderError(
                    f"LLM request refused: HTTP 400: {_message(exc)}",
                    attempts=attempt, status_code=400,
                ) from exc
            except openai.APITimeoutError as exc:
                if deadline is not None and deadline.expired:
                    raise _deadline_spent(
                        deadline,
                        f"LLM deadline of {deadline.seconds:g}s exhausted during attempt {attempt}",
                        attempts=attempt,
                    ) from exc
                if attempt > max_retries:
                    raise LLMTimeout(
                        f"LLM request timed out after {timeout:g}s "
                        f"(HINDSIGHT_API_LLM_TIMEOUT), {attempt} attempt(s)",
                        attempts=attempt,
                    ) from exc
                self._pause(attempt, deadline)
                continue
            except openai.OpenAIError as exc:
                status = getattr(exc, "status_code", None)
                asked = retry_after_seconds(exc)
                too_long = asked is not None and not _in_call_wait_fits(asked, deadline)
                if not is_transient(exc) or attempt > max_retries or too_long:
                    what = f"HTTP {status}" if status else type(exc).__name__
                    note = f" (Retry-After {asked:g}s: not waited within the call)" \
                        if too_long else ""
                    raise LLMProviderError(
                        f"LLM request failed after {attempt} attempt(s): {what}: "
                        f"{_message(exc)}{note}",
                        attempts=attempt, status_code=status, retry_after=asked,
                    ) from exc
                logger.info("LLM attempt %d failed transiently (%s); retrying", attempt, exc)
                self._pause(attempt, deadline, at_least=asked)
                continue
            if not _cut_off(response):
                return response, attempt
            # docs/behaviour.md#whole-answers-only: half an answer is never handed on.
            if attempt > max_retries:
                raise LLMCutOff(
                    "LLM answer was cut off at the token limit (finish_reason: length), "
                    f"{attempt} attempt(s)"
                    + (f"; the last one allowed {max_tokens} tokens" if max_tokens else ""),
                    attempts=attempt,
                )
            logger.info("LLM answer cut off at the token limit (attempt %d); asking again",
                        attempt)
            if max_tokens is not None:
                max_tokens *= 2

    def _log_request(
        self,
        request: dict[str, Any],
        response: Any,
        *,
        purpose: str,
        kind: str,
        attempt: int,
        started_at: datetime,
        started: float,
        error: BaseException | None,
    ) -> None:
        usage = Usage.from_openai(getattr(response, "usage", None)) if response else Usage()
        count_in_tallies(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                         error=error is not None)
        if not _request_sinks:
            return
        event = LLMRequestEvent(
            purpose=purpose,
            kind=kind,
            model=self.model,
            attempt=attempt,
            started_at=started_at,
            duration_ms=_ms_since(started),
            usage=usage,
            request={k: v for k, v in request.items() if k not in ("model", "timeout")},
            response=_response_payload(response),
            error=None if error is None else f"{type(error).__name__}: {_message_of(error)}",
            structured_step=_step_of(request) if kind == "structured" else "",
            provider=self.provider,
        )
        context = current_llm_context()
        for sink in list(_request_sinks):
            try:
                sink(event, context)
            except Exception:  # the log must never fail the call it records
                logger.exception("LLM request sink %r failed", sink)

    @staticmethod
    def _pause(attempt: int, deadline: Deadline | None, *, at_least: float | None = None) -> None:
        pause = max(backoff_seconds(attempt), at_least or 0.0)
        if deadline is not None:
            pause = min(pause, deadline.remaining())
        time.sleep(pause)

    def _report(
        self,
        *,
        kind: str,
        purpose: str,
        started: float,
        usage: Usage,
        attempts: int,
        tool_calls: list[str] | None = None,
        error: BaseException | None = None,
    ) -> None:
        record = LLMCallRecord(
            purpose=purpose,
            model=self.model,
            duration_ms=_ms_since(started),
            usage=usage,
            tool_calls=tool_calls or [],
            error=None if error is None else f"{type(error).__name__}: {error}",
            attempts=attempts,
            kind=kind,
        )
        _count(record, bank_id=self.bank_id)
        for records in _collectors.get():
            records.append(record)
        if self._on_call is not None:
            self._on_call(record)


# ----------------------------------------------------------------------------------------
# helpers


# The body keys of a chat completion in the order the SDK's ``chat.completions.create()``
# writes them (its body dict), for the keys this gateway sends.
_CHAT_BODY_ORDER = ("model", "messages", "max_completion_tokens", "max_tokens",
                    "reasoning_effort", "response_format", "temperature", "tool_choice", "tools")
# OpenAI's models that do not reason answer any ``reasoning_effort`` with a 400: never sent to
# them, whatever the configuration says.
_NON_REASONING_MODELS = ("gpt-4o", "gpt-4.1", "gpt-4-", "gpt-3.5")


def _refuses_reasoning_effort(model: str) -> bool:
    name = model.lower()
    return any(prefix in name for prefix in _NON_REASONING_MODELS)


def _chat_completion(client: openai.OpenAI, request: dict[str, Any]
                     ) -> openai.types.chat.ChatCompletion:
    """POST one chat completion through the SDK's client, as ``create(**request)`` would.

    ``create()`` runs the SDK's TypedDict transform over every message and tool schema, a
    recursive walk that cost about a millisecond a call (more as the conversation grows) to
    turn plain JSON into the same plain JSON. The gateway's requests are plain JSON already, so
    the body goes to the client's documented ``post()`` as ``create()`` builds it (its keys, in
    its order: the same bytes on the wire), with the same client, auth, timeout, error mapping
    and response parsing. A request with any other key takes ``create()`` itself.
    """
    body = {key: request[key] for key in _CHAT_BODY_ORDER if key in request}
    if len(body) + 1 != len(request) or "timeout" not in request:
        return client.chat.completions.create(**request)
    return client.post("/chat/completions", cast_to=openai.types.chat.ChatCompletion, body=body,
                       options={"timeout": request["timeout"],
                                "security": {"bearer_auth": True}})


def _count(record: LLMCallRecord, *, bank_id: str | None) -> None:
    bank, purpose = bank_id or "", metrics.purpose_label(record.purpose)
    status = "ok" if record.error is None else "error"
    metrics.llm_requests_total.labels(bank=bank, purpose=purpose, status=status).inc()
    metrics.llm_input_tokens_total.labels(bank=bank, purpose=purpose).inc(record.usage.input_tokens)
    metrics.llm_output_tokens_total.labels(bank=bank, purpose=purpose).inc(record.usage.output_tokens)


def _ms_since(started: float) -> int:
    return int(round((time.monotonic() - started) * 1000))


def _message(exc: openai.OpenAIError) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(exc)


def _message_of(exc: BaseException) -> str:
    return _message(exc) if isinstance(exc, openai.OpenAIError) else str(exc)


def _response_payload(response: Any) -> Any:
    """What the provider answered, as plain JSON (the first choice's message)."""
    if response is None:
        return None
    choices = getattr(response, "choices", None) or []
    if not choices:
        return None
    message = choices[0].message
    payload: dict[str, Any] = {"content": message.content,
                               "finish_reason": choices[0].finish_reason}
    calls = [
        {"name": call.function.name, "arguments": call.function.arguments}
        for call in (message.tool_calls or []) if getattr(call, "function", None) is not None
    ]
    if calls:
        payload["tool_calls"] = calls
    return payload


def _refuses_tools(exc: LLMProviderError) -> bool:
    """A refusal of the tools themselves: Ollama's "<model> does not support tools", or a
    server without tool calling set up (vLLM: "… requires --enable-auto-tool-choice")."""
    text = str(exc).lower()
    return exc.status_code in (400, 422) and "tool" in text and (
        "support" in text or "enable-auto-tool-choice" in text)


def _step_below(step: str, exc: LLMProviderError, steps: tuple[str, ...]) -> str | None:
    """The structured-output step of ``steps`` to try after ``exc`` refused ``step``; None when
    ``exc`` is no refusal of the response format (or there is no step left)."""
    text = str(exc).lower()
    refused = exc.status_code in (400, 422) and (
        "response_format" in text or "response format" in text or step in text)
    if not refused or step == servers.PROMPT:
        return None
    return steps[steps.index(step) + 1]


def _structured_request(
    messages: list[dict[str, Any]], schema: dict[str, Any], name: str, strict: bool, step: str
) -> dict[str, Any]:
    if step == servers.JSON_SCHEMA:
        return {"messages": messages, "response_format": {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": strict}}}
    # Below the first step the server no longer enforces the schema: the prompt carries it.
    request: dict[str, Any] = {"messages": _with_schema_instruction(messages, schema, name)}
    if step == servers.JSON_OBJECT:
        request["response_format"] = {"type": "json_object"}
    return request


def _step_of(request: dict[str, Any]) -> str:
    fmt = request.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in (servers.JSON_SCHEMA, servers.JSON_OBJECT):
        return str(fmt["type"])
    return servers.PROMPT


def _cut_off(response: Any) -> bool:
    choices = getattr(response, "choices", None) or []
    return bool(choices) and choices[0].finish_reason == "length"


def _with_schema_instruction(
    messages: list[dict[str, Any]], schema: dict[str, Any], name: str
) -> list[dict[str, Any]]:
    # JSON mode needs the word "JSON" in the prompt and knows nothing of the schema otherwise.
    instruction = (
        f"Answer with a single JSON object ({name}) that validates against this JSON schema, "
        f"and nothing else:\n{json.dumps(schema, separators=(',', ':'))}"
    )
    return [*messages, {"role": "system", "content": instruction}]


def _first_choice(response: Any, *, attempts: int) -> Any:
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise LLMOutputError("LLM answer has no choices", attempts=attempts)
    return choices[0]


def _chat_result(response: Any, *, started: float, attempts: int) -> ChatResult:
    choice = _first_choice(response, attempts=attempts)
    message = choice.message
    calls: list[ToolCall] = []
    raw_calls: list[dict[str, Any]] = []
    for call in message.tool_calls or []:
        function = getattr(call, "function", None)
        if function is None:  # custom (non-function) tools are not used by this service
            continue
        raw = function.arguments or ""
        arguments, error = tool_arguments(raw)
        calls.append(ToolCall(id=call.id, name=function.name, arguments=arguments,
                              arguments_error=error))
        # A repaired call goes back into the conversation as the JSON it was read as.
        sent = raw if error or not raw.strip() else json.dumps(arguments, ensure_ascii=False)
        raw_calls.append(
            {"id": call.id, "type": "function",
             "function": {"name": function.name, "arguments": sent}}
        )
    # Reasoning written into the content is neither the answer nor sent back to the model.
    content = message.content if message.content is None else strip_reasoning(message.content)
    if content == "" and message.content:
        content = None if raw_calls else ""
    assistant: dict[str, Any] = {"role": "assistant", "content": content}
    if raw_calls:
        assistant["tool_calls"] = raw_calls
    return ChatResult(
        content=content,
        tool_calls=calls,
        usage=Usage.from_openai(response.usage),
        duration_ms=_ms_since(started),
        message=assistant,
        finish_reason=choice.finish_reason,
        model=getattr(response, "model", "") or "",
        attempts=attempts,
    )


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    """The checked validator of one schema (by its canonical JSON). Checking a schema against
    the metaschema costs ~20 ms; a retain asks with the same schema once per item."""
    schema = json.loads(schema_json)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _parse_structured(
    response: Any, validator: jsonschema.Draft202012Validator, *, attempts: int
) -> Any:
    choice = _first_choice(response, attempts=attempts)
    refusal = getattr(choice.message, "refusal", None)
    if refusal:
        raise LLMOutputError(f"LLM refused to answer: {refusal}", attempts=attempts)
    if choice.finish_reason == "length":
        raise LLMOutputError(
            "LLM answer was cut off at the token limit before the JSON was complete",
            attempts=attempts,
        )
    text = strip_reasoning(choice.message.content or "")
    if not text:
        raise LLMOutputError("LLM answer is empty; expected JSON", attempts=attempts)
    try:
        # The first value that matches the schema: a fence, or prose around the JSON, is not
        # the answer (docs/behaviour.md#whole-answers-only).
        data, _ = find_json(text, validator.is_valid)
    except ValueError as exc:
        raise LLMOutputError(f"LLM answer is not valid JSON: {exc}", attempts=attempts) from exc
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(root)"
        raise LLMOutputError(
            f"LLM answer does not match the schema at {where}: {first.message}",
            attempts=attempts,
        )
    return data
