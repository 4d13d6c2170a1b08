"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint, through the openai SDK.

Configured by ``HINDSIGHT_API_EMBEDDINGS_OPENAI_BASE_URL`` / ``_API_KEY`` / ``_MODEL`` /
``_DIMENSIONS`` (probed at start when unset: ``hindsight.infra.embeddings.probe``). A configured
dimension is requested (``dimensions=``) and checked against every answer, the first included: a vector of
any other length is an ``EmbeddingError`` naming the variable, because it could never be stored
next to the others. Servers that refuse the ``dimensions`` parameter (older models,
some OpenAI-compatible servers) are asked again without it, once, and remembered.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from hindsight.infra.embeddings.base import Embedder, EmbeddingError, Profile
from hindsight.infra.lazy import openai  # imported at the first use
from hindsight.infra.llm.retry import backoff_seconds, is_transient

REQUEST_BATCH_SIZE = 128


class OpenAIEmbedder(Embedder):
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        dimensions: int,
        timeout_seconds: float,
        max_retries: int,
        send_dimensions: bool = True,
    ) -> None:
        self.profile = Profile("openai", model, dimensions)
        self._max_retries = max_retries
        # False when the dimension was probed (the model's own): nothing to ask for.
        self._send_dimensions = send_dimensions
        # We count attempts ourselves (see hindsight.infra.llm.retry), so the SDK must not retry too.
        self._client = openai.OpenAI(
            base_url=base_url or None,
            api_key=api_key or "unused",
            timeout=timeout_seconds,
            max_retries=0,
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        out: list[list[float]] = []
        for start in range(0, len(texts), REQUEST_BATCH_SIZE):
            out.extend(self._embed_batch(list(texts[start : start + REQUEST_BATCH_SIZE])))
        return out

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        # OpenAI rejects empty strings; a single space embeds "no content" and keeps positions.
        inputs = [t if t.strip() else " " for t in texts]
        response = self._request(inputs)
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != len(inputs):
            raise EmbeddingError(
                f"embedding server returned {len(data)} vectors for {len(inputs)} inputs"
            )
        vectors: list[list[float]] = []
        for item in data:
            vector = item.embedding
            if not isinstance(vector, list):
                raise EmbeddingError("embedding server returned a non-float encoding")
            if len(vector) != self.profile.dimensions:
                raise EmbeddingError(
                    f"embedding model {self.profile.model!r} returned {len(vector)} dimensions but "
                    f"HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS={self.profile.dimensions}; set it "
                    "to the model's dimension (then run `manage.py reembed`) or use a model that "
                    "supports the configured one"
                )
            norm = math.sqrt(sum(x * x for x in vector))
            if not math.isfinite(norm) or norm == 0.0:
                raise EmbeddingError("embedding server returned a zero or non-finite vector")
            vectors.append([x / norm for x in vector])
        return vectors

    def _request(self, inputs: list[str]) -> openai.types.CreateEmbeddingResponse:
        attempt = 0
        while True:
            attempt += 1
            try:
                kwargs: dict[str, object] = {"model": self.profile.model, "input": inputs}
                if self._send_dimensions:
                    kwargs["dimensions"] = self.profile.dimensions
                return self._client.embeddings.create(**kwargs)  # type: ignore[arg-type]
            except openai.BadRequestError as exc:
                if self._send_dimensions and "dimension" in str(exc).lower():
                    self._send_dimensions = False
                    attempt -= 1  # not a failure of the server, a capability we learnt about
                    continue
                raise EmbeddingError(f"embedding request refused: {_describe(exc)}") from exc
            except openai.OpenAIError as exc:
                if is_transient(exc) and attempt <= self._max_retries:
                    time.sleep(backoff_seconds(attempt))
                    continue
                raise EmbeddingError(
                    f"embedding request failed after {attempt} attempt(s): {_describe(exc)}"
                ) from exc


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    return f"HTTP {status}: {exc}" if status else f"{type(exc).__name__}: {exc}"
