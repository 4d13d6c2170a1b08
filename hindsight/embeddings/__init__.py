"""Embeddings: the one place texts become vectors.

``get_embedder()`` returns the process's embedder for the configured profile (local
all-MiniLM-L6-v2 by default, or an OpenAI-compatible endpoint), built once and reused.
``profile_ensure()`` and the ``hindsight.E100`` system check compare the configured profile
with the one the database's vectors were made with (``hindsight.embeddings.profile``).
"""

from __future__ import annotations

from hindsight.embeddings.base import Embedder, EmbeddingError, Profile
from hindsight.embeddings.factory import configured_profile, embed_one, get_embedder
from hindsight.embeddings.profile import ProfileMismatch, profile_ensure, profile_recorded

__all__ = [
    "Embedder",
    "EmbeddingError",
    "Profile",
    "ProfileMismatch",
    "configured_profile",
    "embed_one",
    "get_embedder",
    "profile_ensure",
    "profile_recorded",
]
