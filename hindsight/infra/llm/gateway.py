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
- **Structured output** with a strict JSON schema, falling back to JSON mode (the schema in the
  prompt) when the server refuses strict schemas, and validation of the answer with jsonschema.
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
import openai
from django.conf import settings
from openai.types.chat import ChatCompletion

from hindsight.infra import metrics
from hindsight.infra.db import connection_release_to_pool
from hindsight.infra.errors import LLMNotConfigured
from hindsight.infra.llm.context import LLMContext, count_in_tallies, current_llm_context
from hindsight.infra.llm.retry import backoff_seconds, is_transient, retry_after_seconds
from hindsight.infra.llm.types import (
    ChatResult,
    Deadline,
    LLMCallRecord,
    LLMError,
    LLMOutputError,
    LLMProviderError,
    LLMRequestEvent,
    LLMTimeout,
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
        bank_id=bank_id,
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
    ) -> None:
        self.model = model
        self.bank_id = bank_id
        self._client = _client(base_url, api_key)
        self._timeout_seconds = timeout_seconds
        self._max_retries = max_retries
        self._on_call = on_call
        # Learnt from the server during this gateway's life (one refresh, one request):
        self._strict_refused = False
        self._max_tokens_param = "max_completion_tokens"

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
            response, attempts = self._create(
                kwargs, max_tokens=max_tokens, deadline=deadline, purpose=purpose, kind="chat"
            )
            result = _chat_result(response, started=started, attempts=attempts)
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
        mode = "json_object" if self._strict_refused else "json_schema"
        try:
            response = None
            if mode == "json_schema":
                strict_format = {
                    "type": "json_schema",
                    "json_schema": {"name": name, "schema": schema, "strict": strict},
                }
                try:
                    response = create({"messages": messages, "response_format": strict_format})
                except LLMProviderError as exc:
                    if not _refuses_strict_schema(exc):
                        raise
                    logger.info("LLM refused a strict json_schema (%s); using JSON mode", exc)
                    self._strict_refused = True
                    mode = "json_object"
            if response is None:
                response = create(
                    {
                        "messages": _with_schema_instruction(messages, schema, name),
                        "response_format": {"type": "json_object"},
                    }
                )
            usage = Usage.from_openai(response.usage)
            data = _parse_structured(response, validator, attempts=attempts)
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
    ) -> tuple[Any, int]:
        """Send the request (retrying transient failures); log every attempt."""

        def send(request: dict[str, Any], attempt: int) -> Any:
            connection_release_to_pool()
            started_at, started = datetime.now(UTC), time.monotonic()
            try:
                response = _chat_completion(self._client, request)
            except openai.OpenAIError as exc:
                self._log_request(request, None, purpose=purpose, kind=kind, attempt=attempt,
                                  started_at=started_at, started=started, error=exc)
                raise
            self._log_request(request, response, purpose=purpose, kind=kind, attempt=attempt,
                              started_at=started_at, started=started, error=None)
            return response

        return self._send_with_retries(kwargs, max_tokens=max_tokens, deadline=deadline,
                                       send=send)

    def _send_with_retries(
        self,
        kwargs: dict[str, Any],
        *,
        max_tokens: int | None,
        deadline: Deadline | None,
        send: Callable[[dict[str, Any], int], Any],
    ) -> tuple[Any, int]:
        cfg = settings.HINDSIGHT
        deadline = _earliest(deadline)
        request_timeout = (
            self._timeout_seconds if self._timeout_seconds is not None else cfg.llm_timeout_seconds
        )
        max_retries = self._max_retries if self._max_retries is not None else cfg.llm_max_retries
        attempt = 0
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
            try:
                return send(request, attempt), attempt
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
                    "response_format", "temperature", "tool_choice", "tools")


def _chat_completion(client: openai.OpenAI, request: dict[str, Any]) -> ChatCompletion:
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
    return client.post("/chat/completions", cast_to=ChatCompletion, body=body,
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


def _refuses_strict_schema(exc: LLMProviderError) -> bool:
    text = str(exc).lower()
    return exc.status_code in (400, 422) and ("response_format" in text or "json_schema" in text)


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
        arguments: dict[str, Any] = {}
        error: str | None = None
        try:
            parsed = json.loads(raw) if raw.strip() else {}
            if isinstance(parsed, dict):
                arguments = parsed
            else:
                error = f"tool arguments must be a JSON object, got {type(parsed).__name__}"
        except json.JSONDecodeError as exc:
            error = f"tool arguments are not valid JSON: {exc}"
        calls.append(ToolCall(id=call.id, name=function.name, arguments=arguments,
                              arguments_error=error))
        raw_calls.append(
            {"id": call.id, "type": "function",
             "function": {"name": function.name, "arguments": raw}}
        )
    assistant: dict[str, Any] = {"role": "assistant", "content": message.content}
    if raw_calls:
        assistant["tool_calls"] = raw_calls
    return ChatResult(
        content=message.content,
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
    text = _strip_fences(choice.message.content or "")
    if not text:
        raise LLMOutputError("LLM answer is empty; expected JSON", attempts=attempts)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
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


def _strip_fences(text: str) -> str:
    """JSON mode on some servers still wraps the object in a Markdown code fence."""
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        if text.rstrip().endswith("```"):
            text = text.rstrip()[:-3]
    return text.strip()
