"""The pages that state the store's schema version state the current one."""

from __future__ import annotations

from pathlib import Path

from semantic_memory.stores.sqlite import SCHEMA_VERSION

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_the_architecture_page_states_the_current_sqlite_schema_version() -> None:
    text = " ".join((DOCS / "architecture.md").read_text(encoding="utf-8").split())
    assert f"`PRAGMA user_version` is the schema version ({SCHEMA_VERSION})" in text
