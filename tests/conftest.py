"""Shared fixtures: every test gets real SQLite files in its own temp dir; a module marked
`both_stores` runs each engine test once more on a fresh PostgreSQL database (tests/pg.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import os

import pytest

from semantic_memory.config import Settings
from semantic_memory.pipeline import MemoryEngine

#: Folders a developer's shell may move a harness's config (or XDG's) to: tests point HOME at a
#: temp folder, and a hook, install or opencode run they start would still write there, into
#: the developer's real config. A test that means one sets it itself.
for _name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "KIMI_CODE_HOME", "XDG_CONFIG_HOME",
              "XDG_DATA_HOME", "XDG_STATE_HOME"):
    os.environ.pop(_name, None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "both_stores: run on the SQLite and PostgreSQL stores")
    config.addinivalue_line("markers", "sqlite_only: in a both_stores module, SQLite only "
                                       "(it looks at the file or SQLite's own channels)")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop this process's PostgreSQL server and remove its data dir while the process still
    has time: an xdist worker may be ended before its exit hooks finish, which left the dir
    half removed (~400 MB a worker)."""
    import sys

    if "pg" in sys.modules:
        sys.modules["pg"].shutdown()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_kind" not in metafunc.fixturenames:
        return
    both = (metafunc.definition.get_closest_marker("both_stores") is not None
            and metafunc.definition.get_closest_marker("sqlite_only") is None)
    metafunc.parametrize("store_kind", ["sqlite", "postgresql"] if both else ["sqlite"])


@pytest.fixture
def settings(tmp_path: Path, store_kind: str) -> Settings:
    """SQLite in the test's temp dir, or (store_kind "postgresql") a new PostgreSQL database."""
    db_url = ""
    if store_kind == "postgresql":
        import pg

        db_url = pg.new_database()
    return Settings(db_path=str(tmp_path / "memory.db"), db_url=db_url, device="cpu")


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
