"""POST /v1/default/banks/{bank_id}/reflect: parse, run the agent loop once, render.

A thin edge (STYLE 1): the request is validated by ``ReflectRequestSerializer``, the scope by the
one tag-scope compiler, then ``reflect_run`` does the work under the reflect wall timeout. A
failed lookup is a 503 (we could not look), an LLM failure a 502 (a timeout 504): neither is
dressed up as an answer; each is a domain error of ``mentalmodels.refresh.errors``, which the one handler
(``hindsight.infra.edge.errors``) maps by its class.
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hindsight.banks.budget import bank_budget_require
from hindsight.banks.selectors import bank_exists
from hindsight.infra.edge.schema import errors
from hindsight.infra.edge.serializers import body_of
from hindsight.infra.errors import NotFound
from hindsight.infra.llm import Deadline, LLMError, LLMTimeout
from hindsight.infra.llm.context import llm_context
from mentalmodels.reflect import RetrievalError, reflect_run
from mentalmodels.reflect.schema import ReflectResponseSerializer
from mentalmodels.reflect.serializers import ReflectRequestSerializer
from mentalmodels.refresh.errors import ReflectLLMFailed, ReflectLLMTimedOut, ReflectRetrievalFailed


class ReflectView(APIView):
    @extend_schema(
        operation_id="reflect",
        request=ReflectRequestSerializer,
        responses={200: ReflectResponseSerializer, **errors(400, 404, 422, 502, 503, 504)},
        summary="Reflect and generate answer",
    )
    def post(self, request: Request, bank_id: str) -> Response:
        data = ReflectRequestSerializer.parse(body_of(request))
        scope = data["scope"]
        if not bank_exists(bank_id=bank_id):
            raise NotFound(f"Bank '{bank_id}' not found")
        bank_budget_require(bank_id=bank_id)
        query = data["query"]
        if data.get("context"):
            query = f"{query}\n\nContext: {data['context']}"
        include = data.get("include") or {}
        try:
            with llm_context(bank_id=bank_id, operation="reflect"):  # the request log's labels
                result = reflect_run(
                    bank_id=bank_id,
                    query=query,
                    budget=data["budget"],
                    max_tokens=data["max_tokens"],
                    scope=scope,
                    exclude_mental_model_ids=data.get("exclude_mental_model_ids") or (),
                    include_mental_models=not data.get("exclude_mental_models"),
                    response_schema=data.get("response_schema"),
                    deadline=Deadline(settings.HINDSIGHT.reflect_wall_timeout_seconds),
                    observations_max_tokens=data.get("reflect_search_observations_max_tokens"),
                    apply_all_directives=bool(data.get("apply_all_directives")),
                )
        except RetrievalError as exc:
            raise ReflectRetrievalFailed(f"retrieval failed: {exc}") from exc
        except LLMTimeout as exc:
            raise ReflectLLMTimedOut(f"LLM timed out: {exc}") from exc
        except LLMError as exc:
            raise ReflectLLMFailed(f"LLM request failed: {exc}") from exc
        tool_calls = include.get("tool_calls")
        body = ReflectResponseSerializer.render_result(
            result,
            include_facts=include.get("facts") is not None,
            include_tool_calls=tool_calls is not None,
            include_tool_output=bool(tool_calls and tool_calls.get("output", True)),
            schema_requested=data.get("response_schema") is not None,
        )
        return Response(body)
