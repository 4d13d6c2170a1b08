"""The embedder interface every provider implements, its profile, and its error."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass


class EmbeddingError(Exception):
    """Embedding failed (provider unreachable, wrong answer, model missing); says why."""


@dataclass(frozen=True)
class Profile:
    """What makes two vectors comparable: same provider, model and dimension."""

    provider: str
    model: str
    dimensions: int

    def describe(self) -> str:
        return f"{self.provider}/{self.model} ({self.dimensions} dims)"


class Embedder(ABC):
    """Turns texts into L2-normalised vectors of ``profile.dimensions`` floats."""

    profile: Profile

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order. An empty sequence returns ``[]`` without any work."""

    def embed_one(self, text: str) -> list[float]:
        return self.embed([text])[0]
