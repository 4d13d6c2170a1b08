"""Offline token counting for recall's token budget.

Counts word pieces with the local MiniLM tokenizer (``tokenizer.json`` shipped in a pip package,
see ``hindsight.infra.embeddings.model_files``); nothing is downloaded. Where that tokenizer is not
installed, a documented heuristic stands in: one token per four characters, rounded up, which
over-counts English slightly (the safe side of a budget).
"""

from __future__ import annotations

import math
import threading
from typing import Any

from tokenizers import Tokenizer

from hindsight.infra.embeddings.model_files import tokenizer_path

_lock = threading.Lock()
_tokenizer: Any = None
_loaded = False


def _get_tokenizer() -> Any:
    global _tokenizer, _loaded
    if _loaded:
        return _tokenizer
    with _lock:
        if not _loaded:
            try:
                tokenizer = Tokenizer.from_file(str(tokenizer_path()))
                tokenizer.no_truncation()
                tokenizer.no_padding()
                _tokenizer = tokenizer
            except Exception:  # a missing package only downgrades counting to the heuristic
                _tokenizer = None
            _loaded = True
    return _tokenizer


def heuristic_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def count_tokens(text: str) -> int:
    """Tokens in ``text`` (word pieces, no special tokens)."""
    if not text:
        return 0
    tokenizer = _get_tokenizer()
    if tokenizer is None:
        return heuristic_tokens(text)
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


def count_tokens_batch(texts: list[str]) -> list[int]:
    tokenizer = _get_tokenizer()
    if tokenizer is None:
        return [heuristic_tokens(t) for t in texts]
    if not texts:
        return []
    encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
    return [len(e.ids) for e in encodings]


def count_tokens_to_store(texts: list[str]) -> list[int | None]:
    """Counts to store with each text (``MemoryUnit.text_tokens``), or nulls where only the
    heuristic is available: a stored count is always the tokenizer's, so a row written without
    the tokenizer is counted again — by whatever is installed then — when it is read."""
    if _get_tokenizer() is None:
        return [None] * len(texts)
    return list(count_tokens_batch(texts))
