"""Shared fixtures: every test gets real SQLite files in its own temp dir."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from semantic_memory.config import Settings
from semantic_memory.pipeline import MemoryEngine


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(db_path=str(tmp_path / "memory.db"), device="cpu")


@pytest.fixture
def engine(settings: Settings) -> Iterator[MemoryEngine]:
    eng = MemoryEngine(settings)
    yield eng
    eng.close()
