"""Read a GGUF file's metadata (key/value header) without loading the model.

The embedder needs the architecture, pooling type, context length and embedding length before
llama.cpp loads anything: to pick the model's prompts, to refuse a configuration that would
abort the process, and to know the model id/dimension that tag stored vectors. Arrays (the
tokenizer's vocabulary) are skipped, not decoded.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

GGUF_MAGIC = b"GGUF"

# gguf value types
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL, _STRING, _ARRAY = range(10)
_UINT64, _INT64, _FLOAT64 = 10, 11, 12
_SCALAR = {
    _UINT8: "<B", _INT8: "<b", _UINT16: "<H", _INT16: "<h", _UINT32: "<I", _INT32: "<i",
    _FLOAT32: "<f", _BOOL: "<?", _UINT64: "<Q", _INT64: "<q", _FLOAT64: "<d",
}

#: llama.cpp's pooling type numbers (LLAMA_POOLING_TYPE_*).
POOLING = {"none": 0, "mean": 1, "cls": 2, "last": 3, "rank": 4}
POOLING_NAMES = {v: k for k, v in POOLING.items()}


class GGUFError(ValueError):
    """The file is not a GGUF model this reader understands."""


@dataclass
class GGUFInfo:
    path: Path
    version: int
    metadata: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def arch_value(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(f"{self.architecture}.{key}", default)

    @property
    def pooling_type(self) -> int | None:
        """The pooling the GGUF records, or None when it records none."""
        value = self.arch_value("pooling_type")
        return int(value) if value is not None else None

    @property
    def context_length(self) -> int | None:
        value = self.arch_value("context_length")
        return int(value) if value is not None else None

    @property
    def embedding_length(self) -> int | None:
        value = self.arch_value("embedding_length")
        return int(value) if value is not None else None

    @property
    def causal(self) -> bool:
        return bool(self.arch_value("attention.causal", True))

    @property
    def name(self) -> str:
        return str(self.metadata.get("general.name") or self.path.stem)


def _read(handle: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = handle.read(size)
    if len(data) != size:
        raise GGUFError("truncated GGUF header")
    return struct.unpack(fmt, data)[0]


def _string(handle: BinaryIO) -> str:
    length = _read(handle, "<Q")
    if length > 1 << 24:
        raise GGUFError("implausible string length in GGUF header")
    return handle.read(length).decode("utf-8", errors="replace")


def _value(handle: BinaryIO, kind: int) -> Any:
    if kind in _SCALAR:
        return _read(handle, _SCALAR[kind])
    if kind == _STRING:
        return _string(handle)
    if kind == _ARRAY:
        item_kind = _read(handle, "<I")
        count = _read(handle, "<Q")
        if item_kind in _SCALAR:  # skip fixed-size items in one seek
            handle.seek(struct.calcsize(_SCALAR[item_kind]) * count, 1)
        elif item_kind == _STRING:
            for _ in range(count):
                handle.seek(_read(handle, "<Q"), 1)
        else:
            for _ in range(count):
                _value(handle, item_kind)
        return _Skipped(count)
    raise GGUFError(f"unknown GGUF value type {kind}")


class _Skipped:
    """Stands for an array value that was not decoded."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __repr__(self) -> str:
        return f"<array of {self.count}>"


def read_gguf(path: str | Path) -> GGUFInfo:
    """Metadata of the GGUF file at `path`; raises GGUFError / OSError with a clear message."""
    path = Path(path).expanduser()
    with open(path, "rb") as handle:
        if handle.read(4) != GGUF_MAGIC:
            raise GGUFError(f"{path} is not a GGUF file (bad magic)")
        version = _read(handle, "<I")
        if version < 2:
            raise GGUFError(f"{path}: GGUF version {version} is too old")
        _read(handle, "<Q")  # tensor count
        kv_count = _read(handle, "<Q")
        metadata: dict[str, Any] = {}
        for _ in range(kv_count):
            key = _string(handle)
            metadata[key] = _value(handle, _read(handle, "<I"))
        header_end = handle.tell()
        handle.seek(0)
        digest = hashlib.sha256(handle.read(min(header_end, 1 << 20)))
        digest.update(str(path.stat().st_size).encode())
    return GGUFInfo(path, version, metadata, digest.hexdigest()[:12])
