"""Injection telemetry as the API shows it: the stores keep `injections` / `injection_items`
rows with unix-second times (`stores.base.injection_to_dict`); the browse page and the REST API
get ISO 8601 UTC times and a chart's days without a gap.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from .models import iso
from .stores import MemoryStore


def to_api(row: dict[str, Any]) -> dict[str, Any]:
    """One injection report with its time in ISO 8601 UTC."""
    return {**row, "ts": iso(row["ts"])}


def fill_days(store: MemoryStore, conn: Any, days: int, now: float) -> list[dict[str, Any]]:
    """Injections and characters for each of the last `days` UTC days, oldest first, days
    without an injection included (a chart needs its gaps)."""
    today = datetime.fromtimestamp(now, tz=UTC).date()
    first = today - timedelta(days=days - 1)
    start = datetime(first.year, first.month, first.day, tzinfo=UTC).timestamp()
    found = store.injections_per_day(conn, start)
    out = []
    for offset in range(days):
        day = (first + timedelta(days=offset)).isoformat()
        count, chars = found.get(day, (0, 0))
        out.append({"day": day, "count": int(count), "chars": int(chars)})
    return out
