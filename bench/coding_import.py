"""Turn committed coding-agent transcripts into the coding benchmark's memories
(bench/data/coding/README.md, "How it was made").

Reads SpecStory exports (`.specstory/history/*.md`: Cursor, Copilot, Claude Code chats) and aider
logs (`.aider.chat.history.md`) from a git directory at one commit, and writes what the project
would have stored for each session: the compaction flush of its turns (the harness adapters'
`chunk_turns`), a capture record (`capture_record`) for each shell command run with its output,
and each "remember …" prompt's fact. Memory ids are `<repo key>/<session n>/<memory n>`, stable as
long as the sources, their order and this script do not change.

    python bench/coding_import.py GIT_DIR OWNER/NAME COMMIT:PATH [COMMIT:PATH …] >> memories.jsonl

The manifest (repository, commit, licence, paths, split) is written by hand; see the README.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field

from semantic_memory.harness.adapter import ToolCall, capture_record
from semantic_memory.harness.transcript import Turn, chunk_turns

try:  # the adapters' own "remember …" detection, where this checkout has it
    from semantic_memory.harness.transcript import remembered
except ImportError:  # older checkouts: the same rule, "remember [that] <fact>"
    _REMEMBER = re.compile(r"^\s*remember\b[\s:,.-]*(?:that\s+)?(?P<rest>.+)$", re.I | re.S)

    def remembered(prompt: str) -> str | None:
        found = _REMEMBER.match(prompt)
        return found.group("rest").strip() if found else None

#: Tools whose output is captured: the shell (MEMORY_PLUGIN_TOOL_CAPTURE=Bash and its peers).
SHELL_TOOLS = {"bash", "run_terminal_cmd", "run_in_terminal", "shell", "terminal"}

_SPEC_TURN = re.compile(r"^_\*\*(User|Assistant|Agent|Cursor)\b[^\n]*\*\*_[ \t]*$", re.M)
_DETAILS = re.compile(r"(?:<tool-use\b[^>]*>)?<details\b[^>]*>(.*?)</details>(?:</tool-use>)?",
                      re.S)
# Cursor's older export of a terminal call: the command in a bash block, its output in the next.
_TERMINAL = re.compile(r"^```(?:bash|sh|shell|zsh|powershell)\n(.*?)\n```\n\s*```[a-z]*\n(.*?)```", re.S | re.M)
_BLOCK = re.compile(f"{_DETAILS.pattern}|{_TERMINAL.pattern}", re.S | re.M)
_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S)
_TOOL_NAME = re.compile(r'data-tool-name="([^"]+)"')
_AIDER_SESSION = re.compile(r"^# aider chat started at (.+?)\s*$", re.M)
_COMMENT = re.compile(r"<!--.*?-->", re.S)


@dataclass
class Session:
    """One agent session: its turns and shell tool calls in order, and its remember notes."""

    name: str
    items: list[Turn | ToolCall] = field(default_factory=list)


def specstory_sessions(name: str, text: str) -> list[Session]:
    """A SpecStory export is one session: `_**User**_` / `_**Assistant**_` (or `_**Agent (…)**_`)
    headers; tool calls are `<details>` blocks (summary = the call, body = its output), thinking
    is a `<details>` block too and is dropped."""
    session = Session(name)
    parts = _SPEC_TURN.split(_COMMENT.sub("", text))
    for role, body in zip(parts[1::2], parts[2::2], strict=True):
        body = body.strip().strip("-").strip()
        if role == "User":
            session.items.append(Turn("user", body))
            continue
        prose = []
        last = 0
        for found in _BLOCK.finditer(body):
            if found.group(1) is None:  # a terminal block
                call: ToolCall | None = ToolCall(
                    "Bash", {"command": found.group(2).strip()}, found.group(3).strip())
            else:
                call = _spec_tool(found.group(0), found.group(1))
            prose.append(body[last:found.start()])
            last = found.end()
            if call is not None:  # other blocks (thinking, reads, edits) are not conversation
                session.items.append(Turn("assistant", "\n".join(prose).strip()))
                prose = []
                session.items.append(call)
        prose.append(body[last:])
        session.items.append(Turn("assistant", "\n".join(prose).strip().strip("-").strip()))
    session.items = [i if isinstance(i, ToolCall) else Turn(i.role, _tidy(i.text))
                     for i in session.items]
    session.items = [i for i in session.items if not isinstance(i, Turn) or i.text]
    return [session]


def _tidy(text: str) -> str:
    """Without the export's `---` separators and runs of blank lines left by removed blocks."""
    text = re.sub(r"^\s*---\s*$", "", text, flags=re.M)
    text = re.sub(r"<think>.*?</think>|<tool-use\b[^>]*>\s*</tool-use>", "", text, flags=re.S)
    text = re.sub(r"^```[a-z]*\s*\n\s*```\s*$", "", text, flags=re.M)  # emptied code blocks
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _spec_tool(whole: str, inner: str) -> ToolCall | None:
    """A shell call in a `<details>` block, or None (thinking, reads, edits, searches)."""
    summary = _SUMMARY.search(inner)
    title = " ".join(re.sub(r"<[^>]+>|\*\*", "", summary.group(1)).split()) if summary else ""
    named = _TOOL_NAME.search(whole)
    tool = (named.group(1) if named else title.split(":")[-1]).strip()
    body = inner[summary.end():] if summary else inner
    if tool.lower() not in SHELL_TOOLS and not title.lower().startswith("terminal"):
        return None
    # The command: an inline `cmd` line (Claude Code) or a fenced bash block, whichever is
    # first; plain fences after it hold the output. No command found: nothing worth keeping.
    inline = re.search(r"^\s*`([^`\n]+)`\s*$", body, re.M)
    fenced = re.search(r"```(?:bash|sh|shell|zsh|powershell)\s*\n(.*?)```", body, re.S)
    found = min((f for f in (inline, fenced) if f), key=lambda f: f.start(), default=None)
    if found is None or not found.group(1).strip():
        return None
    command = found.group(1).strip()
    output = re.sub(r"^```[a-z]*\s*$", "", body[found.end():], flags=re.M).strip()
    return ToolCall("Bash", {"command": command}, output)


def aider_sessions(name: str, text: str) -> list[Session]:
    """An aider log holds one session per `# aider chat started at …`; `#### ` lines are the
    user's, `> ` lines aider's own output (a shell command's output follows `> Running CMD`),
    everything else the model's reply."""
    starts = list(_AIDER_SESSION.finditer(text))
    out = []
    for n, start in enumerate(starts):
        end = starts[n + 1].start() if n + 1 < len(starts) else len(text)
        session = Session(f"{name}@{start.group(1)}")
        _aider_items(session, text[start.end():end].split("\n"))
        if any(isinstance(i, Turn) and i.role == "user" for i in session.items):
            out.append(session)
    return out


def _aider_items(session: Session, lines: list[str]) -> None:
    user: list[str] = []
    reply: list[str] = []
    command: str | None = None
    output: list[str] = []

    def flush_text() -> None:
        if user:
            session.items.append(Turn("user", "\n".join(user).strip()))
            user.clear()
        if "".join(reply).strip():
            session.items.append(Turn("assistant", "\n".join(reply).strip()))
        reply.clear()

    def flush_command() -> None:
        nonlocal command
        if command is not None:
            session.items.append(ToolCall("Bash", {"command": command}, "\n".join(output)))
        command = None
        output.clear()

    for raw in lines:
        line = raw.rstrip()
        if line == "####":  # an empty line of a multi-line prompt
            line = "#### "
        if line.startswith("#### "):
            flush_command()
            if reply:
                flush_text()
            prompt = line[5:]
            if re.match(r"(Add|Create|Run|Apply|Attempt|Fix|Allow)\b.*\? \(Y\)es", prompt):
                continue  # an answer to one of aider's questions
            if prompt.startswith(("/run ", "!")):
                flush_text()
                command = prompt.split(" ", 1)[1] if prompt.startswith("/run ") else prompt[1:]
                continue
            user.append(prompt)
        elif line.startswith(">"):
            body = line[2:] if line.startswith("> ") else line[1:]
            if body.startswith("Running "):
                flush_command()
                flush_text()
                command = body[len("Running "):]
            elif command is not None and not re.search(r"\? \(Y\)es|^Tokens: |^Added \d+ lines", body):
                output.append(body)
            elif command is not None and "to the chat?" in body:
                flush_command()
        else:
            flush_command()
            if user and line.strip():
                session.items.append(Turn("user", "\n".join(user).strip()))
                user.clear()
            reply.append(line)
    flush_command()
    flush_text()


def memories(repo_key: str, project: str, sessions: list[Session], source_path: str
             ) -> list[dict]:
    """The stored memories of each session, in order, with stable ids."""
    out = []
    for n, session in enumerate(sessions, 1):
        rows: list[tuple[str, str, str]] = []  # (content, kind, source)
        turns: list[Turn] = []
        for item in session.items:
            if isinstance(item, ToolCall):
                rows.extend((c, "note", "compaction") for c in chunk_turns(turns))
                turns = []
                if item.output.strip() or item.input.get("command"):
                    rows.append((capture_record(item), "artifact", "tool"))
                continue
            fact = remembered(item.text) if item.role == "user" else None
            if fact:
                rows.append((fact, "note", "remember"))
            turns.append(item)
        rows.extend((c, "note", "compaction") for c in chunk_turns(turns))
        seen: set[str] = set()
        for content, kind, source in rows:
            if content in seen:
                continue
            seen.add(content)
            out.append({"id": f"{repo_key}/{n}/{len(seen)}", "project": project,
                        "session": session.name, "source_path": source_path,
                        "kind": kind, "source": source, "content": content})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir")
    parser.add_argument("repo", help="OWNER/NAME, the memories' project")
    parser.add_argument("sources", nargs="+", metavar="COMMIT:PATH",
                        help="transcript files, each at the commit it is taken from")
    parser.add_argument("--key", help="the id prefix (default: the repository's name)")
    args = parser.parse_args(argv)
    key = args.key or args.repo.split("/")[1]
    sessions: list[Session] = []
    sources: list[str] = []
    for spec in args.sources:
        path = spec.split(":", 1)[1]
        text = subprocess.run(["git", "-C", args.git_dir, "show", spec],
                              capture_output=True, check=True).stdout.decode("utf-8", "replace")
        found = (aider_sessions if path.endswith(".aider.chat.history.md")
                 else specstory_sessions)(path, text)
        sessions.extend(found)
        sources.extend([path] * len(found))
    rows = []
    for n, (session, path) in enumerate(zip(sessions, sources, strict=True), 1):
        for row in memories(key, args.repo, [session], path):
            row["id"] = row["id"].replace(f"{key}/1/", f"{key}/{n}/", 1)
            rows.append(row)
    for row in rows:
        print(json.dumps(row, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
