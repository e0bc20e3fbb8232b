"""An independent reference for the local embedder's tests: a sentence-transformers BERT folder
run in float64 with numpy, one text at a time, by the textbook formulas.

Reads `{"model": DIR, "texts": [...]}` on stdin and writes `{"vectors": [[...], ...]}` on
stdout. The folder is read as sentence-transformers lays it out: `config.json` (the encoder's
shape), `model.safetensors` (parsed here: an 8-byte header length, a JSON header, raw
little-endian tensors), `tokenizer.json` (Hugging Face `tokenizers`, with the folder's padding
turned off and truncation at `sentence_bert_config.json`'s `max_seq_length`),
`1_Pooling/config.json` (mean pooling only) and `modules.json` (a `Normalize` module divides by
the vector's norm). Nothing is downloaded.
"""

import json
import math
import os
import sys

import numpy as np
from tokenizers import Tokenizer

ERF = np.vectorize(math.erf)

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    base = 8 + size
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = DTYPES[meta["dtype"]]
        array = np.frombuffer(data[base + start : base + end], dtype=dtype)
        key = name[len("bert.") :] if name.startswith("bert.") else name
        tensors[key] = array.reshape(meta["shape"]).astype(np.float64)
    return tensors


class Bert:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        assert config.get("hidden_act", "gelu") == "gelu", config.get("hidden_act")
        self.w = load_safetensors(os.path.join(folder, "model.safetensors"))
        self.hidden = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.layers = config["num_hidden_layers"]
        self.eps = config.get("layer_norm_eps", 1e-12)
        max_len = 512
        st_config = os.path.join(folder, "sentence_bert_config.json")
        if os.path.exists(st_config):
            with open(st_config) as f:
                max_len = json.load(f).get("max_seq_length", max_len)
        self.tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_len)
        pooling = os.path.join(folder, "1_Pooling", "config.json")
        if os.path.exists(pooling):
            with open(pooling) as f:
                assert json.load(f).get("pooling_mode_mean_tokens", True), "mean pooling only"
        self.normalize = False
        modules = os.path.join(folder, "modules.json")
        if os.path.exists(modules):
            with open(modules) as f:
                self.normalize = any(m["type"].endswith("Normalize") for m in json.load(f))

    def layer_norm(self, x, prefix):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[prefix + ".weight"] + self.w[
            prefix + ".bias"
        ]

    def linear(self, x, prefix):
        return x @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]

    def embed(self, text):
        encoding = self.tokenizer.encode(text)
        ids = np.array(encoding.ids)
        types = np.array(encoding.type_ids)
        n = len(ids)
        h, heads = self.hidden, self.heads
        d = h // heads
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = self.layer_norm(x, "embeddings.LayerNorm")
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}"

            def split(part):
                y = self.linear(x, f"{p}.attention.self.{part}")
                return y.reshape(n, heads, d).transpose(1, 0, 2)

            q, k, v = split("query"), split("key"), split("value")
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(n, h)
            x = self.layer_norm(
                x + self.linear(context, f"{p}.attention.output.dense"),
                f"{p}.attention.output.LayerNorm",
            )
            up = self.linear(x, f"{p}.intermediate.dense")
            up = 0.5 * up * (1.0 + ERF(up / math.sqrt(2.0)))
            x = self.layer_norm(x + self.linear(up, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        pooled = x.mean(0)
        if self.normalize:
            pooled = pooled / np.linalg.norm(pooled)
        return pooled.tolist()


def main():
    request = json.load(sys.stdin.buffer)
    model = Bert(request["model"])
    sys.stdout.write(json.dumps({"vectors": [model.embed(t) for t in request["texts"]]}))


if __name__ == "__main__":
    main()
