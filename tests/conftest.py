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


# Real GGUF models for the vector tests, built offline from PyPI packages on first use and cached
# (tests/models.py; CI builds them once before the suite). Imported lazily: BM25-only test runs
# never touch numpy or gguf.

@pytest.fixture(scope="session")
def minilm_path() -> Path:
    import models

    return models.minilm()


@pytest.fixture(scope="session")
def qwen3_path() -> Path:
    import models

    return models.tiny_qwen3()
