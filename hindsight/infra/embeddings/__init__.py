"""Embeddings: the one place texts become vectors.

``get_embedder()`` returns the process's embedder for the configured profile (local
all-MiniLM-L6-v2 by default, or an OpenAI-compatible endpoint), built once and reused.
``hindsight.infra.embeddings.profile.profile_ensure()`` and the ``hindsight.E100`` system check
compare the configured profile
with the one the database's vectors were made with (``hindsight.infra.embeddings.profile``).
"""

from __future__ import annotations

from hindsight.infra.embeddings.base import Embedder, EmbeddingError, Profile
from hindsight.infra.embeddings.factory import configured_profile, embed_one, get_embedder

__all__ = [
    "Embedder",
    "EmbeddingError",
    "Profile",
    "configured_profile",
    "embed_one",
    "get_embedder",
]
