"""The `memory-mcp` command line, run as a real subprocess against a real db file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(db: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMORY_DB_PATH": str(db), **(env or {})}
    env.pop("MEMORY_PLUGINS", None)
    return subprocess.run(
        [sys.executable, "-m", "semantic_memory", *args], input=stdin, capture_output=True,
        text=True, env=env, timeout=60,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


def test_store_recall_list_forget_stats(db: Path) -> None:
    stored = run(db, "store", "Use pnpm, not npm, in the web repo", "--kind", "preference",
                 "--project", "web", "--tag", "js", "--json")
    assert stored.returncode == 0, stored.stderr
    uid = json.loads(stored.stdout)["uid"]
    recalled = json.loads(run(db, "recall", "which package manager npm", "--json").stdout)
    assert recalled[0]["uid"] == uid and recalled[0]["tags"] == ["js"]
    block = run(db, "recall", "pnpm", "--block", "500").stdout
    assert block.startswith("<semantic-memory>") and uid in block
    listed = json.loads(run(db, "list", "--project", "web", "--json").stdout)
    assert [m["uid"] for m in listed] == [uid]
    stats = json.loads(run(db, "stats", "--json").stdout)
    assert stats["memories"] == 1 and stats["by_kind"] == {"preference": 1}
    assert run(db, "forget", uid).returncode == 0
    missing = run(db, "forget", uid)
    assert missing.returncode == 1 and "no live memory" in missing.stderr
    assert json.loads(run(db, "purge").stdout)["soft_deleted"] == 1
    assert "Traceback" not in missing.stderr


def test_list_says_when_more_match_than_it_shows(db: Path, tmp_path: Path) -> None:
    """`list` stopped at 20 rows without a word; `--limit 0` listed nothing; the history
    supersession.md promised (`--include-superseded`) did not exist."""
    (tmp_path / "seed.jsonl").write_text("".join(json.dumps(
        {"content": f"release note {n} about the deploy"}) + "\n" for n in range(26)))
    assert run(db, "import", str(tmp_path / "seed.jsonl")).returncode == 0
    old = json.loads(run(db, "store", "The staging database listens on port 6543",
                         "--json").stdout)["uid"]
    new = json.loads(run(db, "store", "The staging database now listens on port 6544",
                         "--json").stdout)
    assert new["supersedes"] == [old]  # 27 current memories, 28 with the history

    page = run(db, "list", env={"COLUMNS": "200"})
    assert page.returncode == 0 and page.stdout.count("release note") + 1 == 20
    assert page.stderr.strip() == "1-20 of 27 shown (--limit, --offset 20 for more)"
    last = run(db, "list", "--offset", "20")
    assert last.returncode == 0 and last.stderr == ""  # the last page: nothing more to say
    listed = run(db, "list", "--json")  # a JSON array of the page, as before; no footer
    assert len(json.loads(listed.stdout)) == 20 and listed.stderr == ""

    history = json.loads(run(db, "list", "--include-superseded", "--limit", "100",
                             "--json").stdout)
    assert len(history) == 28
    assert next(m for m in history if m["uid"] == old)["superseded_by"] == new["uid"]
    assert old not in {m["uid"] for m in json.loads(run(db, "list", "--limit", "100",
                                                        "--json").stdout)}
    shown = run(db, "list", "--include-superseded", "--limit", "2", env={"COLUMNS": "250"})
    assert "superseded by" in shown.stdout and new["uid"] in shown.stdout
    assert shown.stderr.strip() == "1-2 of 28 shown (--limit, --offset 2 for more)"

    zero = run(db, "list", "--limit", "0")  # as `recall -k 0` and memory_list's limit: >= 1
    assert zero.returncode == 2 and zero.stdout == ""
    assert "Invalid value for '--limit': 0 is not in the range 1<=x" in zero.stderr
    assert "Traceback" not in zero.stderr


def test_recall_in_a_project_brings_global_memories_unless_told_not_to(db: Path) -> None:
    def uid_of(*args: str) -> str:
        stored = run(db, "store", *args, "--json")
        assert stored.returncode == 0, stored.stderr
        return json.loads(stored.stdout)["uid"]

    shared = uid_of("Write every commit message in the imperative mood", "--kind", "preference")
    own = uid_of("The web repo squashes each commit on merge", "--project", "web")
    query = ["recall", "how should a commit message be written", "--project", "web", "--json"]
    assert {h["uid"] for h in json.loads(run(db, *query).stdout)} == {shared, own}
    assert [h["uid"] for h in json.loads(run(db, *query, "--no-global").stdout)] == [own]
    # `--project ""` means the global memories, as `update --project ""` makes one global
    assert [m["uid"] for m in json.loads(run(db, "list", "--project", "", "--json").stdout)
            ] == [shared]
    assert [h["uid"] for h in json.loads(run(db, "recall", "commit", "--project", "",
                                             "--json").stdout)] == [shared]
    missed = run(db, "recall", "kubernetes", "--project", "")
    assert "No memory matched 'kubernetes' with these filters." in missed.stderr


def test_the_block_is_what_a_hook_would_inject(db: Path, tmp_path: Path) -> None:
    """`recall --block` printed the nearest memories whatever they were, where a hook, asking
    with its relevance bar and MEMORY_PLUGIN_LIMIT, injects nothing or fewer."""
    (tmp_path / "seed.jsonl").write_text("".join(json.dumps(
        {"content": f"pnpm note {n}: the web repo pins pnpm {n}.x"}) + "\n" for n in range(8)))
    assert run(db, "import", str(tmp_path / "seed.jsonl")).returncode == 0
    off_topic = "which manager approves the kubernetes cluster budget for pnpm"
    assert json.loads(run(db, "recall", off_topic, "--json").stdout)  # the nearest memories
    nothing = run(db, "recall", off_topic, "--block", "2000")
    assert nothing.returncode == 0 and nothing.stdout == ""
    assert "Nothing clears the relevance bar" in nothing.stderr
    # (a question: one word that every memory holds vouches for none, keywords.ONE_WORD_MIN_IDF)
    question = "which pnpm does web pin"
    assert run(db, "recall", question, "--block", "4000").stdout.count("pnpm note") == 5
    assert run(db, "recall", question, "--block", "4000", "-k", "8").stdout.count("pnpm note") == 8


def test_store_from_stdin_and_errors_are_one_line(db: Path) -> None:
    assert run(db, "store", "-", stdin="from standard input\n").returncode == 0
    empty = run(db, "store", "")
    assert empty.returncode == 1 and empty.stderr.strip() == "Error: content: must not be empty"
    bad_kind = run(db, "store", "x", "--kind", "two words")
    assert bad_kind.returncode == 1 and "kind" in bad_kind.stderr
    bad_since = run(db, "recall", "x", "--since", "yesterday-ish")
    assert bad_since.returncode == 2 and "--since" in bad_since.stderr
    assert "(7d)" in bad_since.stderr  # it says what it takes
    recent = run(db, "recall", "standard input", "--since", "10m", "--json")
    assert [h["content"] for h in json.loads(recent.stdout)] == ["from standard input\n"]
    assert "Traceback" not in empty.stderr + bad_kind.stderr + bad_since.stderr


def test_text_from_standard_input_loses_its_byte_order_mark(db: Path) -> None:
    """As a Windows tool writes UTF-8; REST and `import` drop it, `store -` kept it."""
    env = {**os.environ, "MEMORY_DB_PATH": str(db)}

    def cli(*args: str, stdin: bytes) -> str:
        done = subprocess.run([sys.executable, "-m", "semantic_memory", *args], input=stdin,
                              capture_output=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.decode()

    uid = json.loads(cli("store", "-", "--json", stdin="\ufeffUse pnpm".encode()))["uid"]
    cli("update", uid, "--content", "-", stdin="Use pnpm, not npm".encode("utf-8-sig"))
    assert [m["content"] for m in json.loads(run(db, "list", "--json").stdout)] == \
        ["Use pnpm, not npm"]
    assert "\ufeff" not in run(db, "export").stdout


def test_bad_environment_is_a_one_line_error(db: Path) -> None:
    env = {**os.environ, "MEMORY_DB_PATH": str(db), "MEMORY_RRF_K": "sixty"}
    result = subprocess.run([sys.executable, "-m", "semantic_memory", "stats"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == "Error: MEMORY_RRF_K: cannot use 'sixty' as an int"
    budget = run(db, "stats", env={"MEMORY_PLUGIN_BUDGET_CHARS": "10"})
    assert (budget.returncode, budget.stderr.strip()) == (
        2, "Error: MEMORY_PLUGIN_BUDGET_CHARS must be 500..1000000, not 10")
    # above what a recall's budget_chars takes, every hook's recall was refused (422)
    budget = run(db, "stats", env={"MEMORY_PLUGIN_BUDGET_CHARS": "2000000"})
    assert (budget.returncode, budget.stderr.strip()) == (
        2, "Error: MEMORY_PLUGIN_BUDGET_CHARS must be 500..1000000, not 2000000")


def test_an_import_line_superseded_by_no_live_memory_is_current(db: Path, tmp_path: Path) -> None:
    """`superseded_by` naming the line itself, a uid stored nowhere or a memory the file marks
    forgotten hid the imported memory for good; the import clears it and says how many."""
    lines = [
        {"uid": "00000000000000e1", "content": "Self superseding fact about the green rack",
         "kind": "fact", "project": "p1", "superseded_by": "00000000000000e1"},
        {"uid": "00000000000000e2", "content": "Superseded by a forgotten one about the red rack",
         "kind": "fact", "project": "p1", "superseded_by": "00000000000000e3"},
        {"uid": "00000000000000e3", "content": "Forgotten one about the red rack moved",
         "kind": "fact", "project": "p1", "forgotten": True},
        {"uid": "00000000000000d1", "content": "The build server runs Ubuntu 22.04",
         "kind": "fact", "project": "p1", "superseded_by": "00000000000000ff"},
        {"uid": "00000000000000d2", "content": "The build server runs Ubuntu 24.04",
         "kind": "fact", "project": "p1"},
        {"uid": "00000000000000d3", "content": "The build server ran Ubuntu 20.04",
         "kind": "fact", "project": "p1", "superseded_by": "00000000000000d2"},
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = run(db, "import", str(path))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"new": 6, "duplicate": 0, "rejected": 0, "bad": 0,
                                         "current_again": 3}
    listed = json.loads(run(db, "list", "--json").stdout)
    assert sorted(m["uid"] for m in listed) == [
        "00000000000000d1", "00000000000000d2", "00000000000000e1", "00000000000000e2"]


def test_unforget_says_when_a_newer_memory_supersedes_what_comes_back(db: Path) -> None:
    def uid_of(line: str) -> str:
        return line.split()[1]

    def port(n: int) -> str:
        return uid_of(run(db, "store", f"The staging database listens on port {n}",
                          "--kind", "fact", "--project", "web").stdout)

    port(6543)
    forgotten = port(6544)
    assert run(db, "forget", forgotten).returncode == 0
    newer = port(6546)
    done = run(db, "unforget", forgotten)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"unforgot {forgotten}: it is live again, superseded by "
                                  f"the newer {newer}"), done.stdout


def test_a_bad_value_in_a_plugins_section_exits_as_a_core_one(db: Path) -> None:
    """A plugin's own setting (the llama-cpp embedder's, the PostgreSQL store's) is a setting
    too: exit code 2, one line, as a core one; it exited 1 like a failed command."""
    for name in ("MEMORY_EMBED_BATCH", "MEMORY_DB_POOL_SIZE"):
        env = {**os.environ, "MEMORY_DB_PATH": str(db), name: "many"}
        for args in (["stats"], ["list"], ["serve", "--port", "0"]):
            done = subprocess.run([sys.executable, "-m", "semantic_memory", *args],
                                  capture_output=True, text=True, env=env, timeout=60)
            assert done.returncode == 2, (name, args, done.stderr)
            assert done.stderr == f"Error: {name}: cannot use 'many' as an int\n"


def test_migrate_to_a_file_path_is_a_sqlite_file_where_the_user_is(tmp_path: Path) -> None:
    """`--to copy.db` is the SQLite file copy.db in the user's folder, as `--db` reads one."""
    source = tmp_path / "source.db"
    work = tmp_path / "work"
    work.mkdir()

    def run_here(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "semantic_memory", "--db", str(source),
                               *args], cwd=work, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "MEMORY_DB_PATH": str(tmp_path / "other.db")})

    assert run_here("store", "the build uses ninja").returncode == 0
    done = run_here("migrate", "--to", "copies/copy.db")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["target"] == str(work / "copies" / "copy.db")
    listed = subprocess.run([sys.executable, "-m", "semantic_memory", "--db",
                             str(work / "copies" / "copy.db"), "list", "--json"],
                            capture_output=True, text=True, timeout=60)
    assert [m["content"] for m in json.loads(listed.stdout)] == ["the build uses ninja"]
    again = run_here("migrate", "--to", "copies/copy.db")
    assert again.returncode == 1 and "is not empty" in again.stderr


def test_a_relative_db_path_or_a_bare_db_url_is_refused(tmp_path: Path) -> None:
    """A relative MEMORY_DB_PATH is read against each process's folder: a hook's is the agent's
    repository, where its spool (text not yet redacted) landed and no service replayed it.
    `MEMORY_DB_URL=abc` was silently the SQLite file ./abc."""
    for name, value, needle in (
            ("MEMORY_DB_PATH", "data/memory.db", "must be an absolute path (~/… is fine), not "
                                                 "'data/memory.db'"),
            ("MEMORY_DISCOVERY_FILE", "memory.json", "must be an absolute path"),
            ("MEMORY_DB_URL", "user:secret@db.lan/memory", "must be a URL")):
        env = {**os.environ, "MEMORY_DB_PATH": str(tmp_path / "m.db"), name: value}
        done = subprocess.run([sys.executable, "-m", "semantic_memory", "stats"], cwd=tmp_path,
                              capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 2 and done.stderr.startswith(f"Error: {name} {needle}")
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert "secret" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing made where it ran
    # --db is the user's own path on the command line: relative to where they are
    local = subprocess.run([sys.executable, "-m", "semantic_memory", "--db", "here.db", "store",
                            "a note"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                           env={**os.environ, "MEMORY_DB_PATH": str(tmp_path / "m.db")})
    assert local.returncode == 0, local.stderr
    assert (tmp_path / "here.db").is_file() and not (tmp_path / "m.db").exists()


@pytest.mark.parametrize(("name", "value", "error"), [
    ("MEMORY_DEDUP_SIM", "-1", " must be within 0..1, not -1.0"),
    ("MEMORY_DEDUP_SIM", "nan", " must be within 0..1, not nan"),
    ("MEMORY_DEDUP_SIM", "1e20", " must be within 0..1, not 1e+20"),
    ("MEMORY_FUSION_GATE_POWER", "inf", " must be within 0..100, not inf"),
    ("MEMORY_INJECT_BOOST", "-1", " must be within 0..10, not -1.0"),
    ("MEMORY_RECALL_MIN_COSINE", "1e400", " must be within 0..1 (or -1), not inf"),
    ("MEMORY_TTL_ARTIFACT_DAYS", "-1", " must be within 0..36500, not -1"),
    ("MEMORY_TTL_INJECTION_DAYS", "-1", " must be within 0..36500, not -1"),
    ("MEMORY_RRF_K", "99999999999999999999", " must be within 1..10000, not 99999999999999999999"),
    ("MEMORY_CHANNEL_WEIGHTS", "trigram=nan", ": trigram must be within 0..100, not nan"),
])
def test_a_setting_out_of_its_range_is_a_one_line_error(db: Path, name: str, value: str,
                                                          error: str) -> None:
    """These were taken silently: a NaN threshold, a negative TTL, a 1e20 constant."""
    env = {**os.environ, "MEMORY_DB_PATH": str(db), name: value}
    done = subprocess.run([sys.executable, "-m", "semantic_memory", "stats"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stderr) == (2, f"Error: {name}{error}\n")


def test_the_bounds_of_a_range_and_its_own_minus_one_are_taken() -> None:
    """A setting in range passes, and -1 where a range names it: the bounds are inclusive."""
    from semantic_memory.config import Settings

    for env in ({"MEMORY_DEDUP_SIM": "0"}, {"MEMORY_DEDUP_SIM": "1"},
                {"MEMORY_RECALL_MIN_COSINE": "-1"}, {"MEMORY_TTL_ARTIFACT_DAYS": "0"},
                {"MEMORY_FUSION_GATE_POWER": "0"}, {"MEMORY_NEIGHBOUR_GAP": "-1"}):
        Settings.from_env(env)


def test_unusable_db_is_a_one_line_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"garbage" * 1000)
    result = run(junk, "stats")
    assert result.returncode == 1 and "cannot open" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_store_damaged_mid_file_is_a_one_line_error(db: Path, tmp_path: Path) -> None:
    """Pages overwritten inside a file that still opens: found by the command's own queries,
    which printed a traceback."""
    lines = "\n".join(json.dumps({"content": f"note {i}: the build cache lives in /var/c{i}",
                                  "project": f"p{i % 7}"}) for i in range(3000))
    (tmp_path / "notes.jsonl").write_text(lines, encoding="utf-8")
    assert run(db, "import", str(tmp_path / "notes.jsonl")).returncode == 0
    data = bytearray(db.read_bytes())
    for page in range(20, len(data) // 4096, 20):  # the header page and the schema stay whole
        data[page * 4096 + 100 : page * 4096 + 2100] = b"\xa5" * 2000
    db.write_bytes(bytes(data))
    for command in (["stats"], ["export"]):
        result = run(db, *command)
        assert result.returncode == 1, (command, result.stderr)
        # an export meets the damage mid-way (its count reads indexes only): the progress
        # bar ends its line first, as `export --include-deleted` always did
        assert result.stderr.lstrip("\n").startswith("Error: the store cannot be read (")
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_store_that_cannot_write_is_not_called_damaged(db: Path) -> None:
    """A write the disk refuses (a full disk; here a file size limit, RLIMIT_FSIZE) was
    reported as a damaged file: 'check PRAGMA integrity_check, or restore a backup'."""
    import resource

    assert run(db, "store", "seed memory").returncode == 0
    limit = db.stat().st_size + 32 * 1024
    words = " ".join(f"{w}{i}" for i, w in enumerate(["alpha", "bravo", "charlie"] * 5000))

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    refused = subprocess.run([sys.executable, "-m", "semantic_memory", "store", words[:99_000]],
                             capture_output=True, text=True, timeout=60, preexec_fn=cap,
                             env={**os.environ, "MEMORY_DB_PATH": str(db)})
    assert refused.returncode == 1
    assert refused.stderr == f"Error: disk I/O error on {db}\n", refused.stderr
    stats = json.loads(run(db, "stats", "--json").stdout)  # the file is whole
    assert stats["memories"] == 1


def test_import_reports_bad_lines_and_keeps_good_ones(db: Path, tmp_path: Path) -> None:
    lines = [
        json.dumps({"content": "first good", "kind": "decision", "project": "p",
                    "tags": ["a"], "created_at": "2024-05-01T10:00:00Z"}),
        "{not json",
        json.dumps({"content": ""}),
        json.dumps(["a list"]),
        json.dumps({"content": "ok", "colour": "blue"}),
        "",
        json.dumps({"content": "second good", "created_at": 1700000000}),
        json.dumps({"content": "bad time", "created_at": "last tuesday"}),
        json.dumps({"content": "first good", "kind": "decision", "project": "p"}),
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = run(db, "import", str(path))
    assert result.returncode == 1
    assert json.loads(result.stdout) == {"new": 2, "duplicate": 1, "rejected": 0, "bad": 5}
    for number in (2, 3, 4, 5, 8):
        assert f"line {number}:" in result.stderr
    assert "Traceback" not in result.stderr
    exported = [json.loads(line) for line in run(db, "export").stdout.splitlines()]
    assert [e["content"] for e in exported] == ["first good", "second good"]
    assert exported[0]["created_at"] == "2024-05-01T10:00:00+00:00"
    assert exported[0]["tags"] == ["a"] and exported[0]["project"] == "p"


def test_an_import_into_a_log_leaves_no_empty_line(db: Path, tmp_path: Path) -> None:
    """The transient progress bar wrote an empty line to a stderr that is no terminal (a
    log, a pipe): every import left one."""
    path = tmp_path / "in.jsonl"
    path.write_text('{"content": "a note about the release train"}\n')
    result = run(db, "import", str(path))
    assert (result.returncode, result.stderr) == (0, ""), result.stderr


def test_a_deeply_nested_line_is_a_bad_line_and_the_good_ones_are_stored(
        db: Path, tmp_path: Path) -> None:
    """json.loads raised RecursionError: a traceback, and the lines before it not stored."""
    path = tmp_path / "deep.jsonl"
    path.write_text('{"content": "good line before"}\n'
                    '{"content": "d", "tags": ' + "[" * 5000 + "]" * 5000 + "}\n"
                    '{"content": "good line after"}\n')
    result = run(db, "import", str(path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "line 2: malformed JSON (nested too deeply)" in result.stderr
    assert json.loads(result.stdout) == {"new": 2, "duplicate": 0, "rejected": 0, "bad": 1}


def test_import_reads_a_file_that_starts_with_a_byte_order_mark(db: Path, tmp_path: Path) -> None:
    """As Windows tools write UTF-8 (PowerShell 5's Out-File, Notepad's 'UTF-8 with BOM'),
    with CRLF line ends: the first line was refused as malformed JSON."""
    path = tmp_path / "windows.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"content": "first line"}\r\n{"content": "second"}\r\n')
    result = run(db, "import", str(path))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"new": 2, "duplicate": 0, "rejected": 0, "bad": 0}
    assert sorted(e["content"] for e in map(json.loads, run(db, "export").stdout.splitlines())) \
        == ["first line", "second"]


def test_export_import_round_trip_in_batches(db: Path, tmp_path: Path) -> None:
    source = tmp_path / "many.jsonl"
    with source.open("w") as handle:
        for i in range(5_000):
            handle.write(json.dumps({"content": f"bulk memory {i} about topic {i % 37}",
                                     "kind": "fact", "project": f"p{i % 3}", "tags": [f"t{i % 5}"],
                                     "created_at": 1_600_000_000 + i}) + "\n")
    first = run(db, "import", str(source))
    assert first.returncode == 0 and json.loads(first.stdout)["new"] == 5_000
    out = tmp_path / "out.jsonl"
    assert run(db, "export", "-o", str(out)).returncode == 0
    copy_db = tmp_path / "copy.db"
    second = run(copy_db, "import", str(out))
    assert json.loads(second.stdout)["new"] == 5_000
    assert run(copy_db, "export").stdout == out.read_text()


def test_a_backup_restores_the_same_memories(db: Path, tmp_path: Path) -> None:
    lines = [{"content": f"backup memory {n}", "project": "web" if n % 2 else None,
              "created_at": 1_700_000_000 + n, "updated_at": 1_700_100_000 + n}
             for n in range(4)]
    (tmp_path / "seed.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert run(db, "import", str(tmp_path / "seed.jsonl")).returncode == 0
    first = [json.loads(x) for x in run(db, "export").stdout.splitlines()]
    assert first[1]["updated_at"] == "2023-11-16T02:00:01+00:00"  # 1_700_100_001
    # A file's lines are not one session (no neighbours) unless a line names its session.
    assert {m["session"] for m in first} == {None}
    assert run(db, "forget", first[2]["uid"]).returncode == 0
    backup = tmp_path / "backup.jsonl"
    assert run(db, "export", "--include-deleted", "-o", str(backup)).returncode == 0
    restored_db = tmp_path / "restored.db"
    result = run(restored_db, "import", str(backup))
    assert json.loads(result.stdout) == {"new": 4, "duplicate": 0, "rejected": 0, "bad": 0}
    assert run(restored_db, "export", "--include-deleted").stdout == backup.read_text()
    live = [json.loads(x) for x in run(restored_db, "export").stdout.splitlines()]
    assert [m["uid"] for m in live] == [first[n]["uid"] for n in (0, 1, 3)]
    assert json.loads(run(restored_db, "stats", "--json").stdout)["forgotten"] == 1
    again = run(restored_db, "import", str(backup))  # restoring twice changes nothing
    assert json.loads(again.stdout) == {"new": 0, "duplicate": 4, "rejected": 0, "bad": 0}
    assert run(restored_db, "export", "--include-deleted").stdout == backup.read_text()


def test_stats_name_forgotten_and_memories_without_a_project(db: Path) -> None:
    run(db, "store", "no project here")
    run(db, "store", "in the web project", "--project", "web")
    data = json.loads(run(db, "stats", "--json").stdout)
    assert data["by_project"] == {"web": 1} and data["without_project"] == 1
    assert data["forgotten"] == 0 and data["recall_mode"] == "keyword"
    text = run(db, "stats").stdout
    assert "web=1, (no project)=1" in text and "recall: by words only" in text


def test_an_empty_recall_says_so_and_what_to_try(db: Path) -> None:
    run(db, "store", "The web repo uses pnpm")
    result = run(db, "recall", "completely unrelated words")
    assert result.returncode == 0 and result.stdout == ""
    assert "No memory matched 'completely unrelated words'." in result.stderr
    assert "Recall is by words until an embedder is set up" in result.stderr
    assert json.loads(run(db, "recall", "completely unrelated words", "--json").stdout) == []
    assert "recall is by words" in run(db, "recall", "--help").stdout.replace("\n", " ")


def venv_like_this(folder: Path, leave_out: tuple[str, ...] = ()) -> Path:
    """The `memory-mcp` of a new environment in `folder` holding what this one holds but the
    semantic-memory distributions named in `leave_out` (`claude_code`; `*`: every one but the
    core): a venv whose site-packages links to this one's entries, and its console script."""
    import sysconfig
    import venv

    venv.create(folder, symlinks=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = folder / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / \
        "site-packages"
    for entry in ours.iterdir():
        name = entry.name.removeprefix("_editable_impl_")
        dist = name.removeprefix("semantic_memory_") if name.startswith("semantic_memory_") \
            else None
        if dist is not None and not dist.startswith("core") and (
                "*" in leave_out or any(dist.startswith(n) for n in leave_out)):
            continue
        if not (theirs / entry.name).exists():
            (theirs / entry.name).symlink_to(entry)
    script = folder / "bin" / "memory-mcp"
    script.write_text(f"#!{folder / 'bin' / 'python'}\n"
                      "from semantic_memory.entry import main\nmain()\n")
    script.chmod(0o755)
    return script


def test_with_no_retrieval_channel_installed_every_report_says_so(tmp_path: Path) -> None:
    """The core wheel alone stores memories but no channel can find them: recall, stats,
    doctor and the service's log say so and what to install, rather than "no memory
    matched, try other words"."""
    import select
    import time

    python = venv_like_this(tmp_path / "venv", ("*",)).with_name("python")  # the core alone
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(tmp_path / "m.db"), HOME=str(tmp_path), MEMORY_PORT="0")

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), "-m", "semantic_memory", *args], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=60)

    said = "no retrieval channel is installed (install semantic-memory-bm25-porter"
    plugins = json.loads(cli("plugins", "--json").stdout)
    assert not any(row.get("distribution") for row in plugins), plugins  # the core alone
    assert cli("store", "The web repo uses pnpm", "--project", "web").returncode == 0
    recalled = cli("recall", "pnpm", "--project", "web")
    assert recalled.returncode == 0 and said in recalled.stderr
    assert "Try other words" not in recalled.stderr
    assert json.loads(cli("recall", "pnpm", "--json").stdout) == []
    stats = cli("stats").stdout.replace("\n", " ")
    assert "channels: none" in stats and "recall: finds nothing: " + said[:30] in stats
    service = subprocess.Popen([str(python), "-m", "semantic_memory"], env=env, cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert service.stdout is not None and service.stderr is not None
        deadline = time.monotonic() + 60  # a bound against a hang, not a timing check
        line = ""
        while not line.startswith("MEMORY_MCP_LISTENING") and time.monotonic() < deadline:
            if select.select([service.stdout], [], [], 1)[0]:
                line = service.stdout.readline()
        assert line.startswith("MEMORY_MCP_LISTENING"), service.poll()
        doctor = cli("doctor")
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        assert "channels none" in doctor.stdout
        assert f"broken: {said}" in doctor.stdout
    finally:
        service.terminate()
        log = service.communicate(timeout=30)[1]
    assert f"memory-mcp: {said}" in log and "recall finds nothing" in log


def test_a_db_path_that_cannot_exist_is_a_one_line_error(tmp_path: Path) -> None:
    result = run(Path("/proc/nope/x.db"), "stats")
    assert result.returncode == 1
    assert result.stderr.strip().startswith("Error: cannot create the folder /proc/nope")
    assert "Traceback" not in result.stderr


def test_import_of_binary_or_missing_file(db: Path, tmp_path: Path) -> None:
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b'{"content": "fine"}\n\xff\xfe\x00garbage\n{"content": "after"}\n')
    result = run(db, "import", str(binary))
    assert result.returncode == 1 and "line 2: not UTF-8 text" in result.stderr
    assert json.loads(result.stdout)["new"] == 2
    missing = run(db, "import", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 1 and "cannot read" in missing.stderr
    assert "Traceback" not in result.stderr + missing.stderr
    from_stdin = run(db, "import", "-", stdin='{"content": "piped"}\n')
    assert from_stdin.returncode == 0 and json.loads(from_stdin.stdout)["new"] == 1


def test_plugins_command_lists_distributions_and_channels(db: Path) -> None:
    rows = {r["name"]: r for r in json.loads(run(db, "plugins", "--json").stdout)}
    assert rows["bm25_porter"]["distribution"] == "semantic-memory-bm25-porter"
    assert rows["bm25_porter"]["channels"] == ["porter"]
    assert rows["bm25_trigram"]["channels"] == ["trigram"]
    assert rows["hygiene"]["hooks"] == ["filter_ingest"]


def test_times_a_memory_cannot_carry_are_bad_lines_and_the_rest_is_stored(
        db: Path, tmp_path: Path) -> None:
    """NaN, infinities and times outside 1970..9999 were stored (or crashed the batch), then
    made `list`, `export` and `recall --block` raise for good."""
    lines = ['{"content": "good before"}', '{"content": "nan", "created_at": NaN}',
             '{"content": "inf", "updated_at": Infinity}',
             '{"content": "far", "created_at": 1e20}',
             '{"content": "neg", "created_at": -1e15}',
             '{"content": "iso", "updated_at": "9999-12-31T23:59:59-12:00"}',
             '{"content": "good after redis"}']
    path = tmp_path / "times.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = run(db, "import", str(path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert json.loads(result.stdout) == {"new": 2, "duplicate": 0, "rejected": 0, "bad": 5}
    assert "line 4: created_at: time out of range" in result.stderr
    for args in (["list"], ["export"], ["recall", "redis", "--block", "2000"]):
        shown = run(db, *args)
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, (args, shown.stderr)
    since = run(db, "list", "--since", "nan")
    assert since.returncode == 2 and "--since" in since.stderr


def test_text_that_is_not_utf8_is_a_one_line_error(db: Path) -> None:
    """A shell hands undecodable bytes over as surrogates, which no store can write."""
    env = {**os.environ, "MEMORY_DB_PATH": str(db)}
    for args, stdin in (([b"store", b"caf\xe9 test"], None), ([b"store", b"-"], b"caf\xe9"),
                        ([b"store", b"ok", b"--project", b"p\xe9"], None),
                        ([b"store", b"ok", b"--tag", b"t\xe9"], None)):
        result = subprocess.run([sys.executable, "-m", "semantic_memory", *args], input=stdin,
                                capture_output=True, env=env, timeout=60)
        err = result.stderr.decode()
        assert result.returncode == 1 and "not UTF-8 text" in err and "Traceback" not in err
    # every command's text arguments and options, checked in one place: these crashed
    for args, name in (([b"forget", b"\xff"], "uid"), ([b"list", b"--kind", b"\xff"], "kind"),
                       ([b"list", b"--project", b"\xff"], "project"),
                       ([b"list", b"--since", b"\xff"], "since"), ([b"recall", b"q\xff"], "query"),
                       ([b"unsupersede", b"\xff"], "uid")):
        result = subprocess.run([sys.executable, "-m", "semantic_memory", *args],
                                capture_output=True, env=env, timeout=60)
        assert (result.returncode, result.stderr.decode()) == (
            1, f"Error: {name}: not UTF-8 text\n"), args


def test_write_and_range_failures_are_one_line(db: Path, tmp_path: Path) -> None:
    run(db, "store", "The web repo uses pnpm as its package manager")
    for args in (["export", "-o", str(tmp_path)], ["export", "-o", str(tmp_path / "no/x.jsonl")],
                 ["list", "--offset", "99999999999999999999"], ["export", "--markdown", ""]):
        result = run(db, *args)
        assert result.returncode in (1, 2) and result.stderr.count("Error:") == 1, args
        assert "Traceback" not in result.stderr, args
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "semantic_memory", "export"],
                                stdout=full, stderr=subprocess.PIPE, text=True, timeout=60,
                                env={**os.environ, "MEMORY_DB_PATH": str(db)})
    assert result.returncode == 1 and "No space left" in result.stderr
    assert "Traceback" not in result.stderr
    tiny = run(db, "recall", "package manager", "--block", "100")
    assert tiny.returncode == 1 and "no block fits in 100 characters" in tiny.stderr


def test_a_refused_store_exits_1_with_json_too(db: Path) -> None:
    result = run(db, "store", "<private>only this</private>", "--json")
    assert result.returncode == 1 and json.loads(result.stdout)["status"] == "rejected"


def test_a_narrow_terminal_never_cuts_a_uid(db: Path) -> None:
    uid = json.loads(run(db, "store", "a long memory " * 20, "--project", "web",
                         "--json").stdout)["uid"]
    env = {**os.environ, "MEMORY_DB_PATH": str(db), "COLUMNS": "50"}
    for args in (["list"], ["recall", "long memory"]):
        shown = subprocess.run([sys.executable, "-m", "semantic_memory", *args],
                               capture_output=True, text=True, env=env, timeout=60)
        assert uid in shown.stdout, shown.stdout


def test_json_output_escapes_c1_controls_of_memories_stored_before_ingest_stripped_them(
        db: Path) -> None:
    import sqlite3

    uid = json.loads(run(db, "store", "old memory", "--json").stdout)["uid"]
    with sqlite3.connect(db) as conn:  # as a store written before the sanitiser left it
        conn.execute("UPDATE memories SET content = ? WHERE uid = ?", ("old \x9b2J memory", uid))
    for args in (["list", "--json"], ["export"]):
        out = run(db, *args).stdout
        assert "\x9b" not in out and "\\u009b2J" in out
        assert "old \x9b2J memory" in out.replace("\\u009b", "\x9b")


def test_a_nul_in_a_project_session_or_tag_is_a_bad_line_not_a_cut_value(
        db: Path, tmp_path: Path) -> None:
    """SQLite cut `p\\u0000q` to `p`; PostgreSQL refused the whole batch with a traceback."""
    lines = ['{"content": "good line"}', '{"content": "x", "project": "p\\u0000q"}',
             '{"content": "y", "session": "s\\u0000x"}', '{"content": "z", "tags": ["a\\u0000b"]}']
    path = tmp_path / "nul.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = run(db, "import", str(path))
    assert json.loads(result.stdout) == {"new": 1, "duplicate": 0, "rejected": 0, "bad": 3}
    for number, name in ((2, "project"), (3, "session"), (4, "tags")):
        assert f"line {number}: {name}: contains NUL characters" in result.stderr


def test_an_export_that_fails_midway_leaves_the_earlier_file_whole(db: Path, tmp_path: Path
                                                                    ) -> None:
    """`export -o backup.jsonl` on a disk that filled up truncated the last good backup and
    left half a file. A file size limit (RLIMIT_FSIZE) stands in for the full disk."""
    import resource

    words = " ".join(f"w{i}" for i in range(400))
    (tmp_path / "seed.jsonl").write_text("".join(
        json.dumps({"content": f"memory {n}: {words}"}) + "\n" for n in range(40)))
    assert run(db, "import", str(tmp_path / "seed.jsonl")).returncode == 0
    folder = tmp_path / "backups"
    folder.mkdir()
    backup = folder / "backup.jsonl"
    assert run(db, "export", "-o", str(backup)).returncode == 0
    before = backup.read_bytes()
    backup.chmod(0o640)
    assert run(db, "store", "one more memory " + words * 4).returncode == 0
    limit = len(before) + 4096  # the old export fits, the new one does not

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = subprocess.run([sys.executable, "-m", "semantic_memory", "export", "-o",
                             str(backup)], capture_output=True, text=True, timeout=60,
                            preexec_fn=cap, env={**os.environ, "MEMORY_DB_PATH": str(db)})
    assert result.returncode == 1 and "File too large" in result.stderr
    assert "Traceback" not in result.stderr
    assert backup.read_bytes() == before and [p.name for p in folder.iterdir()] == [backup.name]
    assert run(db, "export", "-o", str(backup)).returncode == 0  # unlimited, it replaces it
    assert len(backup.read_text().splitlines()) == 41 and backup.stat().st_mode & 0o777 == 0o640


def test_spool_list_names_an_unreadable_file_unreadable(db: Path) -> None:
    """A torn or foreign file in the spool (waiting or refused) was listed with `None` for its
    reason, where --json says "unreadable"."""
    for folder in (db.parent / "spool", db.parent / "spool" / "rejected"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "00000000000000000001-1-abcd.json").write_text("{torn")
    shown = run(db, "spool", "list", env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    rows = [line for line in shown.stdout.splitlines() if "?" in line]
    assert len(rows) == 2 and all(row.rstrip().endswith("unreadable") for row in rows), rows
    assert "None" not in shown.stdout
    listed = json.loads(run(db, "spool", "list", "--json").stdout)
    assert [r["error"] for r in listed["pending"] + listed["rejected"]] == ["unreadable"] * 2



def test_a_db_path_on_the_command_line_wins_over_a_store_url_in_the_environment(
        tmp_path: Path) -> None:
    """`--db FILE` names the store: with MEMORY_DB_URL (a team's PostgreSQL) or
    MEMORY_DB_URL_FILE set, the write went there, and `personal.db` was never created."""
    team, personal = tmp_path / "team.db", tmp_path / "personal.db"
    url_file = tmp_path / "url"
    url_file.write_text(f"sqlite:///{team}\n")
    for env in ({"MEMORY_DB_URL": f"sqlite:///{team}"}, {"MEMORY_DB_URL_FILE": str(url_file)}):
        stored = run(tmp_path / "default.db", "--db", str(personal), "store",
                     "personal note: the dentist is on Friday", env=env)
        assert stored.returncode == 0, stored.stderr
        stats = run(tmp_path / "default.db", "--db", str(personal), "stats", env=env)
        assert f"in {personal}" in stats.stdout, stats.stdout
    assert personal.exists() and not team.exists()
    listed = run(tmp_path / "default.db", "--db", str(personal), "list", "--json")
    assert len(json.loads(listed.stdout)) == 1  # the second store was a duplicate


def test_a_channel_weight_no_channel_has_is_said_in_one_line(db: Path) -> None:
    """A typo (`trigam`) or a plugin's name (`bm25_porter`, what MEMORY_PLUGINS takes) in
    MEMORY_CHANNEL_WEIGHTS was taken silently, and the weights stayed at their defaults."""
    typo = run(db, "stats", env={"MEMORY_CHANNEL_WEIGHTS": "trigam=0.5,porter=2"})
    assert typo.returncode == 0, typo.stderr
    [line] = typo.stderr.splitlines()
    assert line.startswith("plugin channels: MEMORY_CHANNEL_WEIGHTS names 'trigam', which no "
                           "installed channel has (") and "porter, trigram" in line, line
    assert "porter (weight 2.0)" in typo.stdout and "trigram (weight 0.15)" in typo.stdout
    right = run(db, "stats", env={"MEMORY_CHANNEL_WEIGHTS": "trigram=0.5"})
    assert right.returncode == 0 and right.stderr == "", right.stderr
    assert "trigram (weight 0.5)" in right.stdout
