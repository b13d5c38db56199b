"""The ANN index's settings, read from the environment (no numpy: an inactive channel imports
this at start)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

#: Below this many vectors the in-RAM exact matrix is used (see docs/vector.md for the measure).
DEFAULT_MIN_ROWS = 20_000


@dataclass(frozen=True)
class AnnConfig:
    mode: str = "auto"  # auto | on | off
    min_rows: int = DEFAULT_MIN_ROWS
    dtype: str = "i8"
    threads: int = 1

    @classmethod
    def from_env(cls, env: Any = None) -> AnnConfig:
        env = os.environ if env is None else env

        def get(name: str, default: str) -> str:
            return (env.get(f"MEMORY_VECTOR_ANN{name}") or default).strip().lower()

        mode, dtype = get("", "auto"), get("_DTYPE", "i8")
        if mode not in ("auto", "on", "off"):
            raise ValueError(f"MEMORY_VECTOR_ANN must be auto, on or off, not {mode!r}")
        if dtype not in ("i8", "f16", "f32"):
            raise ValueError(f"MEMORY_VECTOR_ANN_DTYPE must be i8, f16 or f32, not {dtype!r}")
        try:
            min_rows = int(get("_MIN_ROWS", str(DEFAULT_MIN_ROWS)))
            threads = int(get("_THREADS", "1"))
        except ValueError as exc:
            raise ValueError(f"MEMORY_VECTOR_ANN_MIN_ROWS/_THREADS must be integers ({exc})")
        return cls(mode, min_rows, dtype, max(1, threads))

    def wants(self, rows: int) -> bool:
        return self.mode == "on" or (self.mode == "auto" and rows >= self.min_rows)
