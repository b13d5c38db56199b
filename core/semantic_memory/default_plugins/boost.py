"""Telemetry feedback: memories that were really injected before score a little higher.

score × (1 + α·ln(1 + injections)), α = MEMORY_INJECT_BOOST; the log dampens rich-get-richer.
"""

from __future__ import annotations

import math
from typing import Any

from ..config import Settings
from ..models import RecallHit
from ..plugins import hookimpl


@hookimpl
def modify_hits(query: str, hits: list[RecallHit], settings: Settings, conn: Any) -> None:
    alpha = settings.inject_boost
    if alpha <= 0 or not hits:
        return
    uids = [h.memory.uid for h in hits]
    marks = ",".join("?" * len(uids))
    counts = dict(
        conn.execute(
            f"SELECT uid, count(*) FROM injection_items WHERE uid IN ({marks}) GROUP BY uid", uids
        ).fetchall()
    )
    for hit in hits:
        n = counts.get(hit.memory.uid, 0)
        if n:
            hit.score *= 1 + alpha * math.log1p(n)
            hit.signals["injections"] = float(n)
