"""A small address-space limit (`ulimit -v`): the secret library's Go runtime, which aborts the
whole process where it cannot reserve its memory, is not loaded; the project's own rules
redact alone, and the service and the CLI say why in one line."""

from __future__ import annotations

from pathlib import Path

from lock_support import PLUGINS
from test_ops_support import address_space, run_cli, start, wait_for

from semantic_memory import spool

#: Well below what the library's Go runtime needs (it aborted loading under any limit up to
#: 900 MiB, measured at 2 Ps), and enough for the service without it.
LIMIT = 768 << 20
#: Where the runtime's need and the service's own address space do not depend on the machine:
#: 2 Ps, 2 malloc arenas (a thread's arena reserves 64 MiB of address space).
ENV = {"GOMAXPROCS": "2", "MALLOC_ARENA_MAX": "2", "MEMORY_PLUGINS": PLUGINS}
#: A commit SHA (a 12+ character run with digits: what the library is asked about) and a
#: token the project's own rules know.
TEXT = ("remember that commit 3f9c2a7b1d04e6aa fixed the flaky test; the CI token is "
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789")


def test_a_spooled_write_is_stored_under_a_small_address_space_limit(tmp_path: Path) -> None:
    """The service died (`fatal error: out of memory` from the Go runtime) at the first text
    holding a commit SHA, and, that write being spooled, at every restart after."""
    spool.append(tmp_path / "spool", "/ingest", {"content": TEXT, "project": "p"})
    service = start(tmp_path, "serve", preexec=address_space(LIMIT), **ENV)
    try:
        assert wait_for(lambda: not spool.pending(tmp_path / "spool")
                        or service.proc.poll() is not None)
        assert service.proc.poll() is None, service.stderr()[-2000:]
        with service.client() as client:
            items = client.get("/api/memories", params={"project": "p"}).json()["items"]
            assert [item["content"] for item in items] == [
                "remember that commit 3f9c2a7b1d04e6aa fixed the flaky test; the CI token is "
                "[REDACTED:github-token]"]
            info = client.get("/api/stats").json()["secret_ruleset"]
        assert info["status"].startswith("unavailable (the address-space limit (ulimit -v)")
    finally:
        service.stop()
    log = service.stderr().splitlines()
    warnings = [line for line in log if "betterleaks is not loaded" in line]
    assert len(warnings) == 1, log
    assert "ulimit -v" in warnings[0] and "the project's own rules run alone" in warnings[0]
    # said as the service starts, before it serves: not at the first write
    assert log.index(warnings[0]) < next(i for i, line in enumerate(log) if "serving" in line)


def test_stats_and_store_under_a_small_address_space_limit(tmp_path: Path) -> None:
    """`memory-mcp stats` loads the library to name it: it aborted the same way."""
    stored = run_cli(tmp_path, "store", TEXT, preexec=address_space(LIMIT), **ENV)
    assert stored.returncode == 0, stored.stderr
    stats = run_cli(tmp_path, "stats", preexec=address_space(LIMIT), **ENV)
    assert stats.returncode == 0, stats.stderr
    assert "secret ruleset: betterleaks unavailable (the address-space limit (ulimit -v) " \
           "allows 768 MiB" in " ".join(stats.stdout.split())
    assert "own rules only" in stats.stdout
    for done in (stored, stats):
        assert "Traceback" not in done.stderr and "fatal error" not in done.stderr
        assert [line for line in done.stderr.splitlines() if line.strip()] == [
            line for line in done.stderr.splitlines() if "betterleaks is not loaded" in line]
    exported = run_cli(tmp_path, "export", **ENV)
    assert "commit 3f9c2a7b1d04e6aa fixed" in exported.stdout
    assert "[REDACTED:github-token]" in exported.stdout and "ghp_" not in exported.stdout
