"""Build the configured embedder once per process (per profile and endpoint) and hand it out."""

from __future__ import annotations

import threading

from django.conf import settings

from hindsight.infra.config import Config
from hindsight.infra.embeddings.base import Embedder, Profile

_lock = threading.Lock()
_cache: dict[tuple[object, ...], Embedder] = {}


def configured_profile() -> Profile:
    """The profile the current settings describe (no model is loaded)."""
    cfg: Config = settings.HINDSIGHT
    return Profile(cfg.embeddings_provider, cfg.embeddings_model, cfg.embeddings_dimensions)


def _key(cfg: Config) -> tuple[object, ...]:
    if cfg.embeddings_provider == "local":
        return ("local",)
    return (
        cfg.embeddings_provider,
        cfg.embeddings_model,
        cfg.embeddings_dimensions,
        cfg.embeddings_dimensions_probed,
        cfg.embeddings_base_url,
        cfg.embeddings_api_key,
        cfg.embeddings_timeout_seconds,
        cfg.embeddings_max_retries,
    )


def get_embedder() -> Embedder:
    """The embedder for the settings as they are now; loading the local model happens once."""
    cfg: Config = settings.HINDSIGHT
    key = _key(cfg)
    embedder = _cache.get(key)
    if embedder is not None:
        return embedder
    with _lock:
        embedder = _cache.get(key)
        if embedder is None:
            embedder = _build(cfg)
            _cache[key] = embedder
    return embedder


def _build(cfg: Config) -> Embedder:
    # Imported here so that only the configured provider's dependencies load (onnxruntime and
    # the model files for ``local``, the openai SDK's client for ``openai``).
    if cfg.embeddings_provider == "local":
        from hindsight.infra.embeddings.local import LocalEmbedder  # noqa: PLC0415

        return LocalEmbedder()
    from hindsight.infra.embeddings.openai_provider import OpenAIEmbedder  # noqa: PLC0415

    return OpenAIEmbedder(
        base_url=cfg.embeddings_base_url,
        api_key=cfg.embeddings_api_key,
        model=cfg.embeddings_model,
        dimensions=cfg.embeddings_dimensions,
        send_dimensions=not cfg.embeddings_dimensions_probed,
        timeout_seconds=cfg.embeddings_timeout_seconds,
        max_retries=cfg.embeddings_max_retries,
    )


def embed_one(text: str) -> list[float]:
    return get_embedder().embed([text])[0]
