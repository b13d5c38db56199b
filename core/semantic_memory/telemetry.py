"""Read-side queries over the injection telemetry tables (`injections`, `injection_items`).

`MemoryEngine` calls these on its own read connection or snapshot; the browse page and the REST
API show what they return. Times are unix seconds in the tables and ISO 8601 UTC on the way out.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from .models import iso

#: The columns an injection row is read with, in `row_to_dict`'s order.
INJECTION_COLUMNS = "id, ts, harness, hook, project, query, uids, chars, session"
DAY = 86_400.0


def row_to_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    """One `injections` row (INJECTION_COLUMNS, optionally prefixed `s.`) as the API shows it."""
    return {"id": row[0], "ts": iso(row[1]), "harness": row[2], "hook": row[3],
            "project": row[4], "query": row[5], "uids": json.loads(row[6]), "chars": row[7],
            "session": row[8]}


def per_day(conn: Any, days: int, now: float) -> list[dict[str, Any]]:
    """Injections and characters for each of the last `days` UTC days, oldest first, days
    without an injection included (a chart needs its gaps)."""
    today = datetime.fromtimestamp(now, tz=UTC).date()
    first = today - timedelta(days=days - 1)
    start = datetime(first.year, first.month, first.day, tzinfo=UTC).timestamp()
    found = {day: (count, chars) for day, count, chars in conn.execute(
        "SELECT date(ts, 'unixepoch'), count(*), coalesce(sum(chars), 0) FROM injections "
        "WHERE ts >= ? GROUP BY 1", (start,))}
    out = []
    for offset in range(days):
        day = (first + timedelta(days=offset)).isoformat()
        count, chars = found.get(day, (0, 0))
        out.append({"day": day, "count": count, "chars": chars})
    return out


def memory_injections(conn: Any, uid: str, limit: int, offset: int
                      ) -> tuple[list[dict[str, Any]], int]:
    """The injections one memory took part in, newest first, and how many there are."""
    total = conn.execute("SELECT count(DISTINCT injection_id) FROM injection_items WHERE uid = ?",
                         (uid,)).fetchone()[0]
    columns = ", ".join(f"s.{c}" for c in INJECTION_COLUMNS.split(", "))
    rows = conn.execute(
        f"SELECT DISTINCT {columns} FROM injection_items i JOIN injections s "
        "ON s.id = i.injection_id WHERE i.uid = ? ORDER BY s.ts DESC, s.id DESC LIMIT ? OFFSET ?",
        (uid, max(0, limit), max(0, offset))).fetchall()
    return [row_to_dict(r) for r in rows], total
