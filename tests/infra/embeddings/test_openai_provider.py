"""The OpenAI-compatible embedder against the scripted server (real HTTP through the SDK)."""

from __future__ import annotations

import numpy as np
import pytest

from fakes.llm_server import pseudo_embedding
from hindsight.infra.embeddings import EmbeddingError, embed_one, get_embedder


def test_openai_provider_returns_the_servers_vectors_in_order(openai_embeddings) -> None:
    embedder = get_embedder()
    assert embedder.profile.provider == "openai"
    assert embedder.profile.model == "scripted-embed"
    texts = ["alice likes tea", "bob likes coffee", "alice likes green tea"]
    vectors = embedder.embed(texts)
    assert len(vectors) == 3 and all(len(v) == 384 for v in vectors)
    for text, vector in zip(texts, vectors):
        assert vector == pytest.approx(pseudo_embedding(text, 384), abs=1e-9)
    (request,) = openai_embeddings.embedding_requests
    assert request["model"] == "scripted-embed"
    assert request["dimensions"] == 384
    assert request["input"] == texts


def test_openai_provider_batches_large_inputs(openai_embeddings) -> None:
    vectors = get_embedder().embed([f"text number {i}" for i in range(300)])
    assert len(vectors) == 300
    assert [len(r["input"]) for r in openai_embeddings.embedding_requests] == [128, 128, 44]
    assert vectors[299] == pytest.approx(pseudo_embedding("text number 299", 384), abs=1e-9)


def test_wrong_dimension_is_an_error_naming_the_configured_dimension(openai_embeddings) -> None:
    openai_embeddings.embedding_dimensions = 256
    with pytest.raises(EmbeddingError) as excinfo:
        embed_one("anything")
    assert "HINDSIGHT_API_EMBEDDINGS_OPENAI_DIMENSIONS=384" in str(excinfo.value)
    assert "256" in str(excinfo.value)


def test_empty_strings_are_sent_as_a_space_and_keep_their_position(openai_embeddings) -> None:
    vectors = get_embedder().embed(["a b", "", "c"])
    assert len(vectors) == 3
    assert openai_embeddings.embedding_requests[0]["input"] == ["a b", " ", "c"]
    assert np.linalg.norm(vectors[1]) == pytest.approx(1.0)


def test_transient_failure_is_retried_up_to_the_configured_count(
    openai_embeddings, settings
) -> None:
    import dataclasses

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, embeddings_max_retries=2)
    openai_embeddings.fail_embeddings(2, status=503)
    assert len(embed_one("recovers")) == 384
    assert len(openai_embeddings.embedding_requests) == 3


def test_failure_without_retries_raises_embedding_error_after_one_request(
    openai_embeddings,
) -> None:
    openai_embeddings.fail_embeddings(1, status=500)
    with pytest.raises(EmbeddingError, match="HTTP 500"):
        embed_one("fails")
    assert len(openai_embeddings.embedding_requests) == 1


def test_client_error_is_not_retried(openai_embeddings, settings) -> None:
    import dataclasses

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, embeddings_max_retries=3)
    openai_embeddings.fail_embeddings(1, status=401)
    with pytest.raises(EmbeddingError, match="HTTP 401"):
        embed_one("unauthorised")
    assert len(openai_embeddings.embedding_requests) == 1


def test_server_refusing_the_dimensions_parameter_is_asked_again_without_it(
    openai_embeddings,
) -> None:
    openai_embeddings.refuse_embedding_dimensions = True
    assert len(embed_one("first")) == 384
    assert len(embed_one("second")) == 384
    sent = [("dimensions" in r) for r in openai_embeddings.embedding_requests]
    assert sent == [True, False, False]  # learnt once, remembered


def test_vectors_sent_out_of_order_are_put_back_by_their_index(openai_embeddings) -> None:
    openai_embeddings.embedding_fault = "shuffled"
    texts = ["alice likes tea", "bob likes coffee", "carol likes cocoa"]
    vectors = get_embedder().embed(texts)
    for text, vector in zip(texts, vectors, strict=True):
        assert vector == pytest.approx(pseudo_embedding(text, 384), abs=1e-9)


def test_one_vector_fewer_than_the_inputs_is_an_error_naming_both_counts(
    openai_embeddings,
) -> None:
    openai_embeddings.embedding_fault = "one_short"
    with pytest.raises(EmbeddingError, match="returned 2 vectors for 3 inputs"):
        get_embedder().embed(["one", "two", "three"])


def test_a_nan_in_a_vector_is_an_error_not_a_stored_vector(openai_embeddings) -> None:
    openai_embeddings.embedding_fault = "nan"
    with pytest.raises(EmbeddingError, match="non-finite"):
        get_embedder().embed(["one", "two"])
