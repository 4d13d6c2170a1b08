"""The OpenAI-compatible embedding model's dimension, asked of the model at start when unset.

Upstream Hindsight does this when ``HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS`` is unset, so its
environment carries over without the variable. Here the answer is needed before Django imports
the models (the ``vector(N)`` columns are declared with it), so the settings module calls
``embeddings_dimensions_probe`` on the configuration it read: one embeddings request, without
``dimensions``, whose vector length is the model's dimension. A probe that cannot be answered is a
configuration error naming the variable (the system checks stop start-up with it), never a guess.

A declared dimension is not probed: it is requested and checked against every answer, the first
included (``hindsight.infra.embeddings.openai_provider``).

Only the openai SDK and the configuration are used: Django is not set up yet.
"""

from __future__ import annotations

import dataclasses

from hindsight.infra.config import (
    INVALID_VALUE,
    LOCAL_EMBEDDING_DIMENSIONS,
    MISSING_TOGETHER,
    Config,
    ConfigProblem,
)
from hindsight.infra.lazy import openai  # imported at the first use

VARIABLE = "HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS"
MAX_DIMENSIONS = 2000  # pgvector's HNSW limit
PROBE_TEXT = "dimension probe"
# A start should not hang on an embeddings server that accepts and never answers.
PROBE_TIMEOUT_SECONDS = 30.0


def probe_dimensions(config: Config) -> int:
    """Ask the configured model for one vector and return its length (raises on failure).
    The SDK is imported here, at its first use (``hindsight.infra.lazy``): the settings import
    this module, and only a probe needs it (beat, for one, never does;
    hindsight.project.settings_beat)."""
    client = openai.OpenAI(
        base_url=config.embeddings_base_url or None,
        api_key=config.embeddings_api_key or "unused",
        timeout=min(config.embeddings_timeout_seconds, PROBE_TIMEOUT_SECONDS),
        max_retries=config.embeddings_max_retries,
    )
    response = client.embeddings.create(model=config.embeddings_model, input=[PROBE_TEXT])
    if not response.data or not isinstance(response.data[0].embedding, list):
        raise ValueError("the answer held no float vector")
    return len(response.data[0].embedding)


def embeddings_dimensions_probe(config: Config) -> Config:
    """``config`` with the embedding dimension filled in by a probe, when it has to be."""
    if config.embeddings_provider != "openai" or config.embeddings_dimensions:
        return config
    if not config.embeddings_model:
        # Already an error of its own (the model must be set); nothing to ask.
        return dataclasses.replace(config, embeddings_dimensions=LOCAL_EMBEDDING_DIMENSIONS)
    where = config.embeddings_base_url or "the OpenAI API"
    problem = None
    rule = MISSING_TOGETHER  # the variable must be set when the model cannot be asked
    dimensions = 0
    try:
        dimensions = probe_dimensions(config)
    except Exception as exc:  # any failure: say which and stop start-up through the checks
        problem = (
            f"is unset and the dimension of {config.embeddings_model!r} could not be probed at "
            f"{where} ({type(exc).__name__}: {exc}); make the embeddings server reachable or set "
            "the variable to the model's dimension"
        )
    if problem is None and not 0 < dimensions <= MAX_DIMENSIONS:
        rule = INVALID_VALUE
        problem = (
            f"is unset and {config.embeddings_model!r} answers with {dimensions} dimensions; "
            f"at most {MAX_DIMENSIONS} fit pgvector's HNSW index: set the variable to a "
            "dimension the model can reduce to"
        )
    if problem is not None:
        return dataclasses.replace(
            config, embeddings_dimensions=LOCAL_EMBEDDING_DIMENSIONS,
            errors=(*config.errors, ConfigProblem(VARIABLE, problem, rule)),
        )
    return dataclasses.replace(config, embeddings_dimensions=dimensions,
                               embeddings_dimensions_probed=True)
