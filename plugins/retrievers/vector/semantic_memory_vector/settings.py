"""The vector channel's own settings section, `MEMORY_VECTOR_ANN*` (no numpy: an inactive
channel reads this at start). docs/vector.md says how the defaults were measured."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from semantic_memory.config import ConfigError, SettingsSection, within

#: Below this many vectors the in-RAM exact matrix is used (see docs/vector.md for the measure).
DEFAULT_MIN_ROWS = 20_000


@dataclass(frozen=True)
class VectorSettings(SettingsSection):
    prefix: ClassVar[str] = "MEMORY_VECTOR_"

    # The ANN index: auto (from ann_min_rows vectors), on (always) or off (exact search).
    ann: str = "auto"
    ann_min_rows: int = field(default=DEFAULT_MIN_ROWS, metadata=within(0, 1_000_000_000))
    # The index's element type: i8 (default), f16 or f32.
    ann_dtype: str = "i8"
    # Threads of a background index build.
    ann_threads: int = field(default=1, metadata=within(1, 1024))

    def validate(self) -> None:
        if self.ann not in ("auto", "on", "off"):
            raise ConfigError(f"MEMORY_VECTOR_ANN must be auto, on or off, not {self.ann!r}")
        if self.ann_dtype not in ("i8", "f16", "f32"):
            raise ConfigError("MEMORY_VECTOR_ANN_DTYPE must be i8, f16 or f32, "
                              f"not {self.ann_dtype!r}")

    def wants(self, rows: int) -> bool:
        """Whether a store of `rows` vectors is searched through the ANN index."""
        return self.ann == "on" or (self.ann == "auto" and rows >= self.ann_min_rows)
