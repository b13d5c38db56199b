"""What an outside plugin author met loading plugins (docs/plugins.md "Settings" and "Loading",
docs/harness-adapters.md): a settings section read only inside a run-time hook was checked at
the first write (the service started, then refused every one); harness problems read
`DIST (plugin NAME): …` while every other problem reads `plugin NAME (DIST VERSION): …`; the
register hooks were typed looser than the loader checks.

Installed plugins (a module plus a `*.dist-info`, on PYTHONPATH) run through the real
`memory-mcp` and a real service; in-process ones through the plugin manager."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, get_args, get_type_hints

import pytest
from semantic_memory import hookspecs, testing
from semantic_memory import plugins as plugin_loading
from semantic_memory.config import Settings, SettingsSection
from semantic_memory.hookspecs import hookimpl
from semantic_memory.plugins import build_plugin_manager
from semantic_memory.stores import StoreKind, check_store_kind
from semantic_memory.stores.sqlite import SQLiteStore
from test_plugin_isolation import install


@pytest.fixture(autouse=True)
def _fresh_log() -> None:
    """Each problem is logged once per process: every test starts with none logged."""
    plugin_loading._logged.clear()


#: A `filter_ingest` plugin whose own section is read only inside that hook: it refuses
#: memories shorter than MEMORY_MINLEN_CHARS, and declares the section at load.
MINLEN = """
    from dataclasses import dataclass
    from typing import ClassVar

    from semantic_memory.config import SettingsSection
    from semantic_memory.errors import Rejected
    from semantic_memory.hookspecs import hookimpl


    @dataclass(frozen=True)
    class MinLen(SettingsSection):
        prefix: ClassVar[str] = "MEMORY_MINLEN_"
        chars: int = 0


    @hookimpl
    def register_settings(register):
        register(MinLen)


    @hookimpl
    def filter_ingest(memory, settings):
        if len(memory.content) < settings.section(MinLen).chars:
            raise Rejected("shorter than MEMORY_MINLEN_CHARS")
    """

BAD_VALUE = "Error: plugin minlen (minlen-plugin 0.1): MEMORY_MINLEN_CHARS: cannot use 'abc' as an int"


def run(tmp_path: Path, site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`memory-mcp ARGS` as a user runs it, with the plugins on `site` and `env` (MEMORY_*)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update({"PYTHONPATH": str(site), "HOME": str(tmp_path), "MEMORY_PORT": "9",
                        "MEMORY_DB_PATH": str(tmp_path / "m.db"),
                        "MEMORY_PLUGINS": "bm25_porter," +
                        ",".join(p.stem for p in site.glob("*.py")), **env})
    return subprocess.run([sys.executable, "-c",
                           "from semantic_memory.entry import main; main()", *args],
                          env=environment, capture_output=True, text=True, timeout=60)


# --- F3: a plugin's settings are validated as it loads -----------------------------------------

def test_a_bad_value_in_a_section_read_only_by_a_run_time_hook_stops_every_command_at_start(
        tmp_path: Path) -> None:
    site = install(tmp_path / "site", "minlen", MINLEN)
    for command in (["stats"], ["store", "the build needs java 21"]):
        done = run(tmp_path, site, *command, MEMORY_MINLEN_CHARS="abc")
        assert done.returncode == 2, done
        assert done.stderr.strip().splitlines() == [BAD_VALUE], done.stderr
    # A service does not start only to refuse every write: it stops at once, in that line.
    with pytest.raises(RuntimeError, match="MEMORY_MINLEN_CHARS: cannot use 'abc' as an int"):
        testing.start_service(tmp_path / "service", PYTHONPATH=str(site),
                              MEMORY_PLUGINS="bm25_porter,minlen", MEMORY_MINLEN_CHARS="abc")
    # A good value loads the plugin, and its hook reads the section.
    short = run(tmp_path, site, "store", "java 21", MEMORY_MINLEN_CHARS="10")
    assert "shorter than MEMORY_MINLEN_CHARS" in short.stdout + short.stderr, short
    kept = run(tmp_path, site, "store", "the build needs java 21", MEMORY_MINLEN_CHARS="10")
    assert kept.returncode == 0 and kept.stdout.startswith("new "), kept


@dataclass(frozen=True)
class Broken(SettingsSection):
    """A section whose `validate` has a bug (not a ConfigError: the plugin's, not the user's)."""

    prefix: ClassVar[str] = "MEMORY_BROKEN_"
    level: int = 1

    def validate(self) -> None:
        raise KeyError("level")


class Declaring:
    """Declares what `sections` holds; `boom` makes its register_settings raise."""

    def __init__(self, *sections: Any, boom: bool = False) -> None:
        self.sections, self.boom = sections, boom

    @hookimpl
    def register_settings(self, register: Callable[[type[SettingsSection]], None]) -> None:
        if self.boom:
            raise RuntimeError("settings exploded")
        for section in self.sections:
            register(section)


@pytest.mark.parametrize(("plugin", "line"), [
    (Declaring(Broken), "settings section Broken failed: KeyError: 'level'"),
    (Declaring(dict), "settings section refused: <class 'dict'> is not a SettingsSection "
                      "dataclass"),
    (Declaring(boom=True), "register_settings failed: RuntimeError: settings exploded")])
def test_a_declaration_that_is_the_plugins_bug_is_one_problem_line_and_the_rest_loads(
        tmp_path: Path, plugin: Declaring, line: str) -> None:
    settings = Settings(db_path=str(tmp_path / "m.db"), plugins="none", env={})
    pm = build_plugin_manager(settings, [plugin])
    assert [str(p) for p in pm.problems] == [f"plugin Declaring: {line}"]
    assert pm.is_registered(plugin)


# --- F5.3: the register hooks say what the loader checks ---------------------------------------

def test_register_stores_and_a_store_kind_are_checked_against_the_protocol() -> None:
    hints = get_type_hints(hookspecs.register_stores, localns={"StoreKind": StoreKind})
    assert get_args(hints["register"]) == ([StoreKind], type(None))
    hints = get_type_hints(hookspecs.register_settings,
                           localns={"SettingsSection": SettingsSection})
    assert get_args(hints["register"]) == ([type[SettingsSection]], type(None))
    assert check_store_kind(SQLiteStore) is None

    class NoOpen:
        name = "noopen"
        schemes = ("noopen",)

    assert check_store_kind(NoOpen) == ("NoOpen is not a store kind (a class with name, "
                                        "schemes and open(url, settings))")
    assert check_store_kind("junk") == ("str is not a store kind (a class with name, schemes "
                                        "and open(url, settings))")


# --- F5.5: harness problems read as every other problem ----------------------------------------

ADAPTER = """
    from semantic_memory.harness import HarnessAdapter, hookimpl


    class Adapter(HarnessAdapter):
        name = "twin"
        events = {{"prompt": "prompt"}}


    @hookimpl
    def register_harnesses(register):
        {body}
    """


def test_harness_problems_read_plugin_name_distribution_version(tmp_path: Path) -> None:
    site = install(tmp_path / "site", "toy", ADAPTER.format(
        body="raise RuntimeError('adapter exploded')"))
    install(site, "twin_a", ADAPTER.format(body="register(Adapter())"))
    install(site, "twin_b", ADAPTER.format(body="register(Adapter())"))
    listed = run(tmp_path, site, "plugins")
    assert listed.returncode == 0, listed
    broken = [line for line in listed.stdout.splitlines() if line.startswith("broken: ")]
    assert broken == [
        "broken: plugin toy (toy-plugin 0.1): register_harnesses failed: RuntimeError: "
        "adapter exploded",
        "broken: plugin twin_b (twin_b-plugin 0.1): harness adapter 'twin' refused: the name "
        "is taken by twin_a (twin_a-plugin 0.1)"], listed.stdout
