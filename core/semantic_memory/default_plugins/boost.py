"""Telemetry feedback: memories that were really injected before score a little higher.

score × (1 + α·ln(1 + injections)), α = MEMORY_INJECT_BOOST; the log dampens rich-get-richer.
"""

from __future__ import annotations

import math
from typing import Any

from ..config import Settings
from ..models import RecallHit
from ..hookspecs import hookimpl
from ..stores import MemoryStore


@hookimpl
def modify_hits(hits: list[RecallHit], settings: Settings, store: MemoryStore, conn: Any) -> None:
    alpha = settings.inject_boost
    if alpha <= 0 or not hits:
        return
    counts = store.injection_counts(conn, [h.memory.uid for h in hits])
    for hit in hits:
        n = counts.get(hit.memory.uid, 0)
        if n:
            hit.score *= 1 + alpha * math.log1p(n)
            hit.signals["injections"] = float(n)
