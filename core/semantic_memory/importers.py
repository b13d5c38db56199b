"""Import what agents already remember (CLAUDE.md, Claude Code's auto-memory, AGENTS.md, a
folder of markdown notes) and export memories back to markdown a person can read and edit.

Markdown is cut into memories at headings and top-level bullets: each bullet is one memory, the
prose under a heading is one more; a memory keeps its heading path as context ("Testing: use
pnpm"). Every imported memory has a deterministic uid derived from (scope, file, heading path,
ordinal), so an import run twice changes nothing, and a changed file updates its memories in
place (`MemoryEngine.update`: uid kept, earlier text kept as a revision). A scope is one group of
files read together (the user-wide files of a harness, a project's files, a notes folder): a
section gone from a file, or a file gone from its scope, is forgotten (soft delete). A uid the
store has forgotten is never revived: a notes section comes back under a next-generation uid,
an exported entry naming it is skipped.

An export header and its uid comments are honoured only in a file a person names (`import DIR`,
one notes file): a harness's instruction file is what a cloned repository holds, so it is plain
markdown, filed under the project detected for its folder. And a uid comment never reaches a
memory of another project than the one its file writes to.

Everything is written through the engine, so ingest filters (`<private>`, redaction) apply.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shlex
import shutil
import unicodedata
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from tempfile import SpooledTemporaryFile
from typing import IO, Callable, Iterable, Iterator

from .errors import InvalidMemory
from .ingest import UID, validate
from .models import LOADED_BY, Memory, NewMemory, RecallFilters, project_name
from .pipeline import MemoryEngine
from .private import strip_private
from .safety.redaction import redact

HARNESS_NAMES = ("claude-code", "codex", "opencode", "kimi-code")
#: The harnesses that read a project's AGENTS.md into every session themselves.
AGENTS_MD_READERS = ("codex", "opencode", "kimi-code")
SOURCE = "import"
TAG_CHARS = 64
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_BULLET = re.compile(r"^(?:[-*+]|\d{1,9}[.)])[ \t]+(.*)$")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
_INDEX_LINE = re.compile(r"^[-*+][ \t]+\[[^\]]*\]\(([^)#]+\.md)\)")
#: The line's last comment, any text in it as the uid, checked against `UID` after: a damaged
#: comment is refused, not stored as part of the memory's text. Its text holds no `<` or `>`
#: (no uid does), so a `<!-- uid:… -->` in the memory's own text, which comes before the
#: entry's comment on its line, is never where the match begins.
_UID_COMMENT = re.compile(r" ?<!--[ \t]*uid:([^<>]*?)[ \t]*-->[ \t]*$")
EXPORT_MARK = "<!-- semantic-memory-mcp export:"
#: UTF-8's byte order mark, which some editors write first.
BOM = "\ufeff".encode()
#: Greedy up to the line's last `-->`: a project name may hold one itself.
_EXPORT_HEADER = re.compile(r"^<!--[ \t]*semantic-memory-mcp export:[ \t]*project=(.*)-->[ \t]*$")
#: Claude Code auto-memory `type` → our kind ("feedback" is how the user wants work done).
_TYPE_KINDS = {"user": "preference", "feedback": "preference", "preference": "preference",
               "project": "fact", "reference": "fact", "fact": "fact", "decision": "decision"}
KINDS = ("preference", "decision", "fact")
#: What one kind's bullets of an exported project file keep in memory before a temporary file.
SPOOL_BYTES = 1 << 20


class ImportFailed(Exception):
    """Unreadable input: the CLI prints the message as one line and exits 1."""


@dataclass(frozen=True)
class Section:
    """One memory-to-be cut from a file."""

    key: str  # heading path + kind of block + ordinal: its identity inside the file
    content: str
    heading: str | None
    kind: str
    uid: str | None = None  # an exported entry names its memory


@dataclass(frozen=True)
class SourceFile:
    """One markdown file of an import, with what its memories inherit."""

    path: Path
    label: str  # the `path:` tag and the report's name for it
    scope: str
    project: str | None
    kind: str  # the default kind of its memories
    source: str  # the `import:` tag
    auto_memory: bool = False  # one Claude Code auto-memory file (front matter, MEMORY.md index)
    #: The harnesses that load this file into every session themselves (`loaded-by:` tags).
    loaded_by: tuple[str, ...] = ()
    #: Whether an export header makes it an exported file (its project, its entries' uids):
    #: only for a file a person passed (`import DIR`, one notes file). A harness file
    #: (CLAUDE.md, AGENTS.md, auto-memory) may come with a clone, so it is plain markdown:
    #: its header cannot pick another project, nor its uid comments another memory.
    may_be_export: bool = False


@dataclass
class FileReport:
    label: str
    #: The project its new entries go to (an export header's, else the import's); None:
    #: global. Shown per file, so a dry run of a folder from elsewhere says where it writes.
    project: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("new", "updated", "unchanged", "forgotten", "duplicate", "rejected", "skipped"), 0))
    actions: list[str] = field(default_factory=list)  # "new <uid> <content…>" (dry run detail)


# --- locating the files ---------------------------------------------------------------------


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def _label(path: Path, root: Path | None) -> str:
    """A file's name in tags and reports: relative to the project root, else `~/…`."""
    if root is not None:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            pass
    try:
        return "~/" + path.relative_to(_home()).as_posix()
    except ValueError:
        return path.as_posix()


def claude_auto_memory_dir(project_dir: Path) -> Path:
    """Claude Code's auto-memory folder for the checkout whose top folder is `project_dir`:
    ~/.claude/projects/<key, mangled>/memory, the key being the main checkout's path for a
    git worktree (Claude Code 2.1 shares the folder between them)."""
    key = _claude_mangled(os.fspath(_claude_key(project_dir)))
    folder = os.path.join(_claude_home(), "projects", key, "memory")
    return Path(unicodedata.normalize("NFC", folder))  # as Claude Code writes it


#: Claude Code cuts a mangled path at this many characters (UTF-16 code units) and appends a
#: hash of the whole path, so that two long paths sharing a beginning keep apart.
CLAUDE_NAME_CHARS = 200
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _claude_mangled(path: str) -> str:
    """The folder name Claude Code gives a path: each UTF-16 code unit that is not an ASCII
    letter or digit becomes `-` (an emoji, two units, two dashes); a name over 200 is cut
    there, plus `-` and base 36 of the absolute value of the path's 32-bit Java-style
    string hash (`h = 31 * h + unit`). Claude Code runs on JavaScript strings, hence units;
    its path holds U+FFFD where a name's bytes are not UTF-8."""
    text = os.fsencode(path).decode("utf-8", "replace")
    data = text.encode("utf-16-le", "surrogatepass")
    units = [int.from_bytes(data[i:i + 2], "little") for i in range(0, len(data), 2)]
    name = "".join(chr(u) if u < 128 and chr(u).isalnum() else "-" for u in units)
    if len(name) <= CLAUDE_NAME_CHARS:
        return name
    value = 0
    for unit in units:
        value = (value * 31 + unit) & 0xFFFFFFFF
    value = abs(value - (1 << 32) if value >= 1 << 31 else value)
    digits = ""
    while True:
        value, digit = divmod(value, 36)
        digits = _BASE36[digit] + digits
        if not value:
            break
    return f"{name[:CLAUDE_NAME_CHARS]}-{digits}"


def _claude_key(top: Path) -> Path:
    """The folder Claude Code keys a checkout's auto-memory by: a linked worktree's main
    checkout (a bare repository's worktree: that repository), else `top` itself (a clone, a
    submodule). Its checks, read from git's files as it reads them: `.git` names a gitdir
    under `<common dir>/worktrees/`, whose `gitdir` file points back at this `.git`."""
    own = _git_path_file(top / ".git")
    if own is None:
        return top
    git_dir = Path(os.path.normpath(top / own))
    common = _git_path_file(git_dir / "commondir")
    back = _git_path_file(git_dir / "gitdir")
    if common is None or back is None:
        return top
    common_dir = Path(os.path.normpath(git_dir / common))
    if git_dir.parent != common_dir / "worktrees" or \
            os.path.realpath(git_dir / back) != os.path.join(os.path.realpath(top), ".git"):
        return top
    if common_dir.name == ".git":
        return common_dir.parent
    # A bare repository: keyed by itself, unless it is a checkout's after all.
    return top if (common_dir / ".git").exists() else common_dir


def _git_path_file(path: Path) -> str | None:
    """The path a small git file names (`.git`'s after `gitdir:`; `commondir`, `gitdir`),
    else None (no such file, a folder, another kind of `.git` file)."""
    try:
        if not path.is_file() or path.stat().st_size > 65536:
            return None
        text = os.fsdecode(path.read_bytes().strip())
    except OSError:
        return None
    if path.name == ".git":
        if not text.startswith("gitdir:"):
            return None
        text = text[len("gitdir:"):].strip()
    return text or None


def _claude_home() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or _home() / ".claude")


def _user_agents_md(harness: str) -> list[Path]:
    """The user-wide instruction files each harness reads."""
    home = _home()
    if harness == "claude-code":
        return [_claude_home() / "CLAUDE.md"]
    if harness == "codex":
        return [Path(os.environ.get("CODEX_HOME") or home / ".codex") / "AGENTS.md"]
    if harness == "opencode":
        config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        return [config / "opencode" / "AGENTS.md"]
    return [Path(os.environ.get("KIMI_CODE_HOME") or home / ".kimi-code") / "AGENTS.md"]


def harness_scopes(harness: str, project: str | None) -> list[str]:
    """The scopes `import <harness>` answers for: a file gone from one is forgotten."""
    shared = "claude-code" if harness == "claude-code" else "agents-md"
    return [f"{harness}:user", f"{shared}:project:{project}"]


#: The files of a project `import claude-code` reads, besides the auto-memory folder.
CLAUDE_PROJECT_FILES = ("CLAUDE.md", "CLAUDE.local.md", ".claude/CLAUDE.md")
#: Whether a memory's `path:` tag names a file this import reads (a scope's file it does not
#: read is not gone from the scope).
Reads = Callable[[str], bool]


def harness_reads(harness: str, project_dir: Path, project: str | None) -> dict[str, Reads]:
    """The scopes of `harness_scopes` that other checkouts share, with what this checkout's
    import reads of them. A project's scope is keyed by its name, which every clone and
    worktree shares, while Claude Code keeps an auto-memory folder per clone (a worktree uses
    its main checkout's): an import in one clone must not forget the notes of another clone's
    folder as files gone."""
    if harness != "claude-code":
        return {}
    own = {_tag("path", name) for name in CLAUDE_PROJECT_FILES}
    folder = _label(claude_auto_memory_dir(project_dir), None)

    def reads(tag: str) -> bool:
        return tag in own or tag == _tag("path", f"{folder}/{tag.rsplit('/', 1)[-1]}")

    return {f"claude-code:project:{project}": reads}


def harness_files(harness: str, project_dir: Path, project: str | None) -> list[SourceFile]:
    """The existing files `import <harness>` reads, with their scope, kind and project."""
    files = [SourceFile(p, _label(p, None), f"{harness}:user", None, "preference", harness,
                        loaded_by=(harness,))
             for p in _user_agents_md(harness)]
    if harness == "claude-code":
        scope = f"claude-code:project:{project}"
        for rel in CLAUDE_PROJECT_FILES:
            files.append(SourceFile(project_dir / rel, rel, scope, project, "preference",
                                    harness, loaded_by=(harness,)))
        auto = claude_auto_memory_dir(project_dir)
        if auto.is_dir():  # Claude Code loads the MEMORY.md index, the other files on demand
            files += [SourceFile(p, _label(p, None), scope, project, "fact", harness, True,
                                 (harness,) if p.name == "MEMORY.md" else ())
                      for p in sorted(auto.glob("*.md"))]
    else:  # the project's AGENTS.md is shared by codex, opencode and kimi-code: one identity
        files.append(SourceFile(project_dir / "AGENTS.md", "AGENTS.md",
                                f"agents-md:project:{project}", project, "preference",
                                "agents-md", loaded_by=AGENTS_MD_READERS))
    return [f for f in files if f.path.is_file()]


def folder_files(folder: Path, project: str | None) -> list[SourceFile]:
    """Every `*.md` under a notes folder (hidden folders left out)."""
    return [note_file(folder, p, project) for p in sorted(folder.rglob("*.md"))
            if not any(part.startswith(".") for part in p.relative_to(folder).parts)]


def note_file(folder: Path, path: Path, project: str | None) -> SourceFile:
    """One notes file of `folder`: the same identity whether its folder or the file alone is
    imported, so importing either after the other finds its memories unchanged."""
    return SourceFile(path, path.relative_to(folder).as_posix(), f"folder:{folder}", project,
                      "fact", "notes", may_be_export=True)


# --- reading markdown ------------------------------------------------------------------------


def read_text(path: Path) -> str:
    """A file's text, without the byte order mark some editors put first (Notepad++'s
    "UTF-8-BOM", PowerShell 5.1, Visual Studio): kept, it hid an export's header and made a
    first heading or front matter plain text."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ImportFailed(f"cannot read {path}: not UTF-8 text") from None
    except OSError as exc:
        raise ImportFailed(f"cannot read {path}: {exc.strerror}") from None


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """(`key: value` fields, body) of a file that opens with a `---` block."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            fields = {}
            for line in lines[1:end]:
                key, sep, value = line.partition(":")
                if sep and key.strip():
                    fields[key.strip().lower()] = value.strip().strip("'\"")
            return fields, "\n".join(lines[end + 1:])
    return {}, text


def _kind_for(heading_path: list[str], default: str) -> str:
    """A section under a "Decisions" heading is a decision; otherwise the file's kind."""
    if any(re.search(r"\bdecisions?\b", h, re.IGNORECASE) for h in heading_path):
        return "decision"
    return default


def split_markdown(text: str, default_kind: str, *, skip_index: bool = False
                   ) -> list[Section]:
    """Cut markdown into memories: one per top-level bullet, one per heading's prose."""
    sections: list[Section] = []
    path: list[tuple[int, str]] = []  # (level, title)
    ordinals: dict[str, int] = {}
    block: list[str] = []
    block_type = ""  # "bullet", "prose" or "" (nothing open)
    prose: list[str] = []
    fenced = False

    def emit(kind_of_block: str, lines: list[str]) -> None:
        body = "\n".join(lines).strip()
        if not body:
            return
        titles = [t for _, t in path]
        where = " > ".join(titles)
        key_base = f"{where}\0{kind_of_block}"
        ordinal = ordinals.get(key_base, 0)
        ordinals[key_base] = ordinal + 1
        content = f"{where}: {body}" if where else body
        sections.append(Section(f"{key_base}\0{ordinal}", content, titles[-1] if titles else None,
                                _kind_for(titles, default_kind)))

    def close_bullet() -> None:
        nonlocal block_type
        if block_type == "bullet":
            emit("bullet", block)
        block.clear()
        block_type = ""

    def close_prose() -> None:
        emit("prose", prose)
        prose.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            heading = _HEADING.match(line)
            if heading:
                close_bullet()
                close_prose()
                level = len(heading.group(1))
                path = [(lv, t) for lv, t in path if lv < level] + [(level, heading.group(2))]
                continue
            bullet = _BULLET.match(line)
            if bullet:
                close_bullet()
                if skip_index and _INDEX_LINE.match(line):
                    continue
                block_type = "bullet"
                block.append(bullet.group(1))
                continue
            if block_type == "bullet" and (line[:1] in (" ", "\t") or not line.strip()):
                block.append(line[2:] if line.startswith("  ") else line.strip())
                continue
            close_bullet()
        (block if block_type == "bullet" else prose).append(line)
    close_bullet()
    close_prose()
    return sections


def split_export(text: str) -> tuple[str | None, list[Section]]:
    """An exported file: (its project, entries). An entry is `- text <!-- uid:… -->` under a
    `## kind` heading, continuation lines indented two spaces; entries a person added without a
    uid comment are new memories."""
    lines = text.splitlines()
    header = _EXPORT_HEADER.match(lines[0]) if lines else None
    if header is None:
        raise ValueError("its first line is not a whole export header "
                         "(<!-- semantic-memory-mcp export: project=… -->)")
    project = header.group(1).strip()
    sections: list[Section] = []
    kind = "fact"
    entry: list[str] = []
    uid: str | None = None
    seen_uids: set[str] = set()
    ordinal = 0

    def close() -> None:
        nonlocal entry, uid, ordinal
        while entry and not entry[-1].strip():  # blank lines between entries, not the text's
            entry.pop()
        body = "\n".join(entry)
        if body.strip():
            sections.append(Section(f"{kind}\0export\0{ordinal}", body, None, kind, uid))
            ordinal += 1
        entry, uid = [], None

    for number, line in enumerate(lines[1:], start=2):
        heading = _HEADING.match(line)
        if heading:
            close()
            if len(heading.group(1)) == 2:
                kind = heading.group(2).strip().lower() or "fact"
        elif line.startswith("- "):
            close()
            first = line[2:]
            found = _UID_COMMENT.search(first)
            if found:
                uid, first = found.group(1), first[:found.start()]
                if not UID.match(uid):  # the shape `import` of JSON lines accepts
                    raise ValueError(f"line {number}: its uid comment holds no uid "
                                     "(1..64 letters, digits, _ or -)")
                if uid in seen_uids:  # a copied entry: which text should the memory keep?
                    raise ValueError(f"uid {uid} is on two entries; keep it on one (an entry "
                                     "without a uid comment is a new memory)")
                seen_uids.add(uid)
            entry = [first]
        elif entry:
            entry.append(line[2:] if line.startswith("  ") else line.lstrip())
    close()
    return (project or None), sections


def sections_of(source: SourceFile) -> tuple[list[Section], str | None]:
    """The memories of one file, and the project an exported file names (else None; always
    None for a file that may not be an export, `SourceFile.may_be_export`)."""
    text = read_text(source.path)
    if source.may_be_export and text.startswith(EXPORT_MARK):
        try:
            project, sections = split_export(text)
        except ValueError as exc:
            raise ImportFailed(f"{source.label}: {exc}") from None
        return sections, project
    if source.auto_memory:
        if source.path.name == "MEMORY.md":  # the index: only lines that are not links to files
            return split_markdown(text, source.kind, skip_index=True), None
        fields, body = front_matter(text)
        kind = _TYPE_KINDS.get(fields.get("type", "").lower(), source.kind)
        content = body.strip() or fields.get("description", "")
        title = fields.get("name") or source.path.stem
        if not content:
            return [], None
        return [Section("file", content, title, kind)], None
    _, body = front_matter(text)
    return split_markdown(body, source.kind), None


# --- identities and tags ---------------------------------------------------------------------


def _digest(text: str, n: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


def scope_prefix(scope: str) -> str:
    return "imp" + _digest(scope, 8)


def file_prefix(source: SourceFile) -> str:
    return scope_prefix(source.scope) + _digest(source.label, 10)


#: `file_prefix`'s length: "imp", the scope's digest, the file's.
FILE_PREFIX_CHARS = 3 + 8 + 10


def section_uid(source: SourceFile, section: Section, generation: int = 0) -> str:
    base = file_prefix(source) + _digest(section.key, 10)
    return base if generation == 0 else f"{base}-{generation}"


def _base_uid(uid: str) -> str:
    return uid.split("-", 1)[0]


@lru_cache(maxsize=4096)  # a file's tags repeat on each of its sections
def _tag(prefix: str, value: str) -> str:
    """`prefix:value` within the tag limit: a long value keeps its end (a path's file name).
    Private text goes and secrets are redacted before the cut: a cut that drops a token's
    prefix (`xoxb-`, `sk-proj-`) leaves a tail no rule knows, which was stored in clear, and
    one that drops a `<private>` opening tag leaves the text it hid."""
    value = redact(strip_private(value))
    room = TAG_CHARS - len(prefix) - 1
    return f"{prefix}:{value if len(value) <= room else '…' + value[-(room - 1):]}"


def tags_for(source: SourceFile, section: Section) -> list[str]:
    tags = [_tag("import", source.source), _tag("path", source.label),
            *(LOADED_BY + harness for harness in source.loaded_by)]
    heading = " ".join(strip_private(section.heading or "").split())
    if heading:
        tags.append(_tag("heading", heading))
    return sorted(set(tags))


# --- running an import -----------------------------------------------------------------------


def _imported(engine: MemoryEngine) -> dict[str, Memory]:
    """Live imported memories by base uid (an import's own uids start with `imp`)."""
    found: dict[str, Memory] = {}
    offset = 0
    while True:
        page = engine.list(RecallFilters(source=SOURCE), 1000, offset)
        found.update((_base_uid(m.uid), m) for m in page if m.uid.startswith("imp"))
        if len(page) < 1000:
            break
        offset += len(page)
    return found


#: Told (files done, files in all) after each file of an import: a caller's progress bar.
Progress = Callable[[int, int], None]


def run_import(engine: MemoryEngine, files: list[SourceFile], scopes: list[str], *,
               dry_run: bool = False, reads: dict[str, Reads] | None = None,
               progress: Progress | None = None) -> list[FileReport]:
    """Import `files`, forget what disappeared from `scopes` (of a scope in `reads`, only the
    files this import reads); one report per file (and one per vanished file). Reads every
    file before writing anything: unreadable input changes nothing. A section no memory can
    hold (`_refused`) is counted `rejected` and the rest goes on. Linear in files plus the
    store's imported memories."""
    parsed = [(source, *sections_of(source)) for source in files]
    named: dict[str, str] = {}  # uid -> the file whose entry names it
    for source, sections, _ in parsed:
        for section in sections:
            if section.uid is None:
                continue
            first = named.setdefault(section.uid, source.label)
            if first != source.label:  # an earlier export's file left beside a newer one
                raise ImportFailed(f"uid {section.uid} is in {first} and in {source.label}; "
                                   "keep it in one file (an earlier export's file?)")
    by_base = _imported(engine)
    # An entry may name an imported memory of another file (moved to another project, so
    # exported into that project's file): it is not gone, whatever its uid's file says.
    gone = {base: memory for base, memory in by_base.items() if memory.uid not in named}
    # Grouped once by file: the store holds every import's memories (all projects, harnesses
    # and folders), so a scan of them per file made a re-import quadratic.
    gone_by_file = _by_file(gone)
    reports: list[FileReport] = []
    for done, (source, sections, export_project) in enumerate(parsed, start=1):
        report = FileReport(source.label, source.project if export_project is None
                            else redact(export_project))  # shown as it is stored
        reports.append(report)
        prefix = file_prefix(source)
        kept: set[str] = set()
        for section in sections:
            kept.add(_import_section(engine, source, section, export_project, by_base, report,
                                     dry_run))
        for base, memory in gone_by_file.pop(prefix, ()):
            if base not in kept:
                _forget(engine, memory, report, dry_run)
        if progress is not None:
            progress(done, len(parsed))
    # Files gone from a scope take their memories along: the files read are out of
    # `gone_by_file` now, what is left there is gone.
    for scope in scopes:
        prefix = scope_prefix(scope)
        read = (reads or {}).get(scope)
        vanished: dict[str, FileReport] = {}
        for file in sorted(f for f in gone_by_file if f.startswith(prefix)):
            for base, memory in gone_by_file[file]:
                tag = next((t for t in memory.tags if t.startswith("path:")), None)
                if read is not None and tag is not None and not read(tag):
                    continue  # another checkout's file
                label = tag[5:] if tag is not None else file
                report = vanished.setdefault(label, FileReport(f"{label} (gone)",
                                                                memory.project))
                _forget(engine, memory, report, dry_run)
        reports += vanished.values()
    return reports


def _by_file(memories: dict[str, Memory]) -> dict[str, list[tuple[str, Memory]]]:
    """Imported memories by the `file_prefix` their base uid starts with, each file's in uid
    order."""
    groups: dict[str, list[tuple[str, Memory]]] = {}
    for base, memory in sorted(memories.items()):
        groups.setdefault(base[:FILE_PREFIX_CHARS], []).append((base, memory))
    return groups


def _forget(engine: MemoryEngine, memory: Memory, report: FileReport, dry_run: bool) -> None:
    uid = memory.uid
    if dry_run or engine.forget(uid):
        report.counts["forgotten"] += 1
        report.actions.append(f"forget {uid} {_preview(memory.content)}")


def _preview(text: str) -> str:
    """One line of what is (or would be) stored: a report is a log (a CI job's, a shared
    terminal, an agent's transcript), so private text goes and secrets are redacted, before
    the cut."""
    one_line = " ".join(redact(strip_private(text)).split())
    return one_line if len(one_line) <= 80 else one_line[:79] + "…"


def _import_section(engine: MemoryEngine, source: SourceFile, section: Section,
                    export_project: str | None, by_base: dict[str, Memory], report: FileReport,
                    dry_run: bool) -> str:
    """Store, update or leave one section; returns the base uid it answers for."""
    if section.uid is not None:  # an exported entry: update the memory it names
        project = export_project
        tags = None
        current = engine.get(section.uid)
        base = section.uid
        if current is not None and current.deleted:
            # Forgotten on purpose (`forget`, or an import): an older export must not bring
            # it back, under its uid or another.
            report.counts["skipped"] += 1
            report.actions.append(f"skip {section.uid} (forgotten) {_preview(section.content)}")
            return base
        if current is not None and _refused_move(source, section, current, project, report):
            return base
    else:
        project = source.project if export_project is None else export_project
        tags = tags_for(source, section)
        base = section_uid(source, section)
        current = by_base.get(base)
    if current is None:  # (an exported entry of another store's: it keeps its uid)
        if not _refused(engine, source, section, project, base, report):
            _store(engine, source, section, base, project, tags or tags_for(source, section),
                   report, dry_run)
        return base
    # Trailing whitespace is not kept by the markdown form: "x\n" exported reads back as "x".
    wanted = (strip_private(section.content).rstrip(), section.kind, project,
              current.tags if tags is None else tags)
    if wanted == (current.content.rstrip(), current.kind, current.project, current.tags):
        report.counts["unchanged"] += 1
        return base
    if _refused(engine, source, section, project, current.uid, report):
        return base  # the stored version stays: its section is still in the file
    if dry_run:
        report.counts["updated"] += 1
        report.actions.append(f"update {current.uid} {_preview(section.content)}")
        return base
    result = engine.update(current.uid, content=section.content, kind=section.kind,
                           tags=tags, project=project or "")
    report.counts[result.status if result.status in report.counts else "rejected"] += 1
    if result.status == "updated":
        report.actions.append(f"update {current.uid} {_preview(result.memory.content)}")
    elif result.status in ("rejected", "duplicate"):
        report.actions.append(f"{result.status} {current.uid} {result.reason}")
    return base


def _refused_move(source: SourceFile, section: Section, current: Memory,
                  project: str | None, report: FileReport) -> bool:
    """Whether an exported entry names a memory of another project than its file's header:
    then it is counted `rejected` and that memory is left as it is. A file's uid comment
    would otherwise rewrite (and move) any memory whose uid it knows, and imported uids are
    derived, so known; moving a memory is `memory-mcp update UID --project`."""
    if current.project == (project_name(project) or None):
        return False
    owner = f"project '{current.project}'" if current.project else "no project (global)"
    target = f"'{project}'" if project else "no project"
    report.counts["rejected"] += 1
    report.actions.append(redact(strip_private(  # an export header's project is the file's text
        f"rejected {section.uid} {source.label}: it names a memory of {owner}, and this file "
        f"writes to {target}; left as it is (to move it: memory-mcp update {section.uid} "
        f"--project {shlex.quote(project or '')})")))
    return True


def _refused(engine: MemoryEngine, source: SourceFile, section: Section, project: str | None,
             uid: str, report: FileReport) -> bool:
    """Whether the memory a section would write fails `validate` (text over
    MEMORY_MAX_CONTENT_CHARS, an exported file's `## kind` no kind can be): then it is
    counted `rejected`, its file and heading in the reason, and the import goes on. Checked
    before the write, in a dry run too, so a refused section is never a traceback halfway."""
    item = NewMemory(section.content, kind=section.kind, source=SOURCE, project=project or None,
                     tags=tags_for(source, section), uid=uid,
                     session=file_prefix(source))
    try:
        validate(item, engine.settings.max_content_chars)
    except InvalidMemory as exc:
        where = source.label + (f' under "{section.heading}"' if section.heading else "")
        report.counts["rejected"] += 1
        # The heading and the reason may quote the file's text: shown as it would be stored.
        report.actions.append(f"rejected {uid} {redact(strip_private(f'{where}: {exc}'))}")
        return True
    return False


def _store(engine: MemoryEngine, source: SourceFile, section: Section, base: str,
           project: str | None, tags: list[str], report: FileReport, dry_run: bool) -> None:
    uid = _free_uid(engine, base)
    if dry_run:
        report.counts["new"] += 1
        report.actions.append(f"new {uid} {_preview(section.content)}")
        return
    item = NewMemory(section.content, kind=section.kind, source=SOURCE, project=project,
                     tags=tags, uid=uid, session=file_prefix(source))
    result = engine.ingest([item], batch_is_session=False)[0]
    report.counts[result.status] += 1
    detail = {"new": _preview(section.content), "rejected": result.reason,
              "duplicate": f"already remembered as {result.uid}"}[result.status]
    report.actions.append(f"{result.status} {uid} {detail}")


def _free_uid(engine: MemoryEngine, base: str) -> str:
    """`base`, or its next generation when the store has forgotten `base` (never revived)."""
    candidates = [base] + [f"{base}-{n}" for n in range(1, 50)]
    with engine.store.snapshot() as conn:
        known = engine.store.known_uids(conn, candidates)
    return next(uid for uid in candidates if uid not in known)


# --- exporting to markdown --------------------------------------------------------------------


#: Opens a file to write by its path, as a context manager. `export -o`'s (`cli._open_output`)
#: writes beside the file, fsyncs, and renames it over the file once whole.
Opener = Callable[[str], AbstractContextManager[IO[str]]]


def _open_in_place(path: str) -> AbstractContextManager[IO[str]]:
    """Not atomic: for callers that hold no atomic writer (engine-level tests)."""
    return open(path, "w", encoding="utf-8")


def export_markdown(engine: MemoryEngine, folder: Path, open_file: Opener = _open_in_place
                    ) -> list[tuple[Path, int]]:
    """One file per project (and `_global.md` for memories without one): memories grouped by
    kind, each bullet carrying its uid in an HTML comment so `import DIR` updates in place.
    The current view: superseded memories (history) are left out, or importing the file would
    make each replaced value current again. Refuses (FileExistsError, before writing anything)
    a folder holding an earlier export's file that this one would not rewrite, and a file of
    its own names that no export wrote.

    Each file is written through `open_file`: the CLI passes its atomic writer, so a full disk
    leaves the earlier export's file whole (a cut one's last entry would import as a new
    memory); an OSError names the file it failed on (`filename`).

    Streamed: the projects are counted first, then each file is written from its project's
    memories read a page at a time, so memory stays bounded whatever the store's size."""
    with engine.store.snapshot() as conn:
        projects = sorted(engine.store.value_counts(conn, ("project",))["project"],
                          key=lambda p: p or "")
    _check_folder(folder, {folder / _file_name(project) for project in projects})
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for project in projects:
        path = folder / _file_name(project)
        filters = RecallFilters(project=project, global_only=project is None)
        try:
            with open_file(str(path)) as out:
                count = _write_project(out, project, engine.store.export_current(filters))
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
        written.append((path, count))
    return written


def _write_project(out: IO[str], project: str | None, memories: Iterable[Memory]) -> int:
    """Write one project's file to `out`: a header, then a section per kind (KINDS first),
    each memory a bullet, in the order given within its kind; returns how many. Each kind's
    bullets wait in a temporary file (in memory up to SPOOL_BYTES) until the kinds are
    written in their order."""
    by_kind: dict[str, IO[str]] = {}
    count = 0
    with ExitStack() as stack:
        for memory in memories:
            spool = by_kind.get(memory.kind)
            if spool is None:
                spool = stack.enter_context(SpooledTemporaryFile(
                    max_size=SPOOL_BYTES, mode="w+", encoding="utf-8", newline=""))
                by_kind[memory.kind] = spool
            spool.write("\n".join(_bullet(memory)) + "\n")
            count += 1
        out.write("\n".join(_header(project)) + "\n")
        for n, kind in enumerate(sorted(by_kind, key=_kind_order)):
            out.write(("\n" if n else "") + f"## {kind}\n\n")
            spool = by_kind[kind]
            spool.seek(0)
            shutil.copyfileobj(spool, out)
    return count


def _check_folder(folder: Path, planned: set[Path]) -> None:
    """Refuse what a person would lose or an import would misread. An earlier export's file
    whose project has no current memory now (moved or forgotten) is not rewritten, and
    importing the folder with it would move its memories back: the person removes it (it may
    hold their edits, so the export never deletes it). A file the export would overwrite must
    be an earlier export's (its first line), not someone's notes."""
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*.md")):  # what `import DIR` reads (`folder_files`)
        name = path.relative_to(folder)
        if any(part.startswith(".") for part in name.parts):
            continue
        ours = _starts_with_mark(path)
        if path in planned and not ours:
            raise FileExistsError(errno.EEXIST, f"{name.as_posix()} is not an earlier "
                                  "export's file; move it, or export into another folder")
        if path not in planned and ours:
            raise FileExistsError(errno.EEXIST, f"{name.as_posix()} is an earlier export's "
                                  "file, for a project with no current memories now; remove "
                                  "it (importing it could move memories back there), or "
                                  "export into another folder")


def _starts_with_mark(path: Path) -> bool:
    """Whether a file opens with the export header, after a byte order mark an editor may
    have added (`read_text` reads past it too)."""
    try:
        with path.open("rb") as handle:
            start = handle.read(len(BOM) + len(EXPORT_MARK))
    except OSError:
        return False  # unreadable: not provably the export's
    return start.removeprefix(BOM).startswith(EXPORT_MARK.encode())


def _file_name(project: str | None) -> str:
    if project is None:
        return "_global.md"
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", project).strip("._") or "project"
    return f"{safe}-{_digest(project, 6)}.md"  # two projects never share a file


def _header(project: str | None) -> list[str]:
    return [f"<!-- semantic-memory-mcp export: project={project or ''} -->",
            f"# {project or 'Memories without a project'}", ""]


def _kind_order(kind: str) -> tuple[bool, int, str]:
    """KINDS first, in their order, then the others by name."""
    return (kind not in KINDS, KINDS.index(kind) if kind in KINDS else 0, kind)


def _bullet(memory: Memory) -> list[str]:
    first, *rest = memory.content.split("\n")
    return [f"- {first} <!-- uid:{memory.uid} -->", *(f"  {line}" if line else ""
                                                       for line in rest)]


def iter_actions(reports: list[FileReport]) -> Iterator[str]:
    for report in reports:
        for action in report.actions:
            yield f"  {action}"
