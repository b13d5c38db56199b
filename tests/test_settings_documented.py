"""Every environment variable the core and the shipped plugins read is in a reference page:
docs/configuration.md, or docs/vector.md for the vector channel and its embedder. A setting
added without its row is a knob no user can find."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
from semantic_memory.config import Settings, SettingsSection
from semantic_memory_llama_cpp.settings import LlamaCppSettings
from semantic_memory_postgres.settings import PostgresSettings
from semantic_memory_vector.settings import VectorSettings

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ("docs/configuration.md", "docs/vector.md")


def variables(section: type[SettingsSection]) -> list[str]:
    """The variables `section.from_env` reads."""
    return [section.variable(f.name) for f in fields(section)  # type: ignore[arg-type]
            if f.init and f.metadata.get("from_env") is not False]


@pytest.mark.parametrize("section", [Settings, VectorSettings, LlamaCppSettings, PostgresSettings],
                         ids=lambda s: s.__name__)
def test_every_variable_has_a_reference_entry(section: type[SettingsSection]) -> None:
    text = "\n".join((ROOT / page).read_text(encoding="utf-8") for page in REFERENCE)
    names = variables(section)
    assert names, f"{section.__name__} reads no variables"
    missing = [name for name in names if f"`{name}`" not in text]
    assert not missing, f"not in {' or '.join(REFERENCE)}: {', '.join(missing)}"


@pytest.mark.parametrize("section", [Settings, VectorSettings, LlamaCppSettings, PostgresSettings],
                         ids=lambda s: s.__name__)
def test_every_declared_range_is_in_its_row(section: type[SettingsSection]) -> None:
    """A range declared on a field (`within`) is written in its variable's table row (the Range
    column of docs/configuration.md), so a changed bound cannot leave the page behind."""
    rows: dict[str, str] = {}  # a variable -> its rows (of either page)
    for page in REFERENCE:
        for line in (ROOT / page).read_text(encoding="utf-8").splitlines():
            if line.startswith("| `MEMORY_"):
                name = line.split(" | ")[0][3:-1]
                rows[name] = rows.get(name, "") + line
    wrong = [f"{section.variable(f.name)} (`{f.metadata['range']}`)"
             for f in fields(section)  # type: ignore[arg-type]
             if "range" in f.metadata
             and f"| `{f.metadata['range']}` |" not in rows.get(section.variable(f.name), "")]
    assert not wrong, f"not in their rows of {' or '.join(REFERENCE)}: {', '.join(wrong)}"
