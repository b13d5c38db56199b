"""JSON with comments (JSONC: `//` and `/* */` comments, trailing commas), read and edited in
place.

Some harnesses (opencode) read their config as JSONC, and people comment their configs. A
plain `json.loads` refuses such a file, and writing it back with `json.dumps` would drop every
comment. `update` instead edits the original text where the new document differs from it: a
changed value is rewritten, a new key is added after the last one, a removed key or list item
is cut out, and every byte elsewhere (comments, layout, key order) stays as it was. The result
is parsed again and must equal the document; if it does not, the whole document is written as
plain JSON (the comments are lost then, never an entry).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class JSONCError(ValueError):
    """The text is not JSONC."""


@dataclass
class Node:
    """A value in the text: its span, its parsed value, and for containers their parts."""

    start: int
    end: int
    value: Any
    members: list[Member] = field(default_factory=list)  # objects
    items: list[Item] = field(default_factory=list)  # arrays


@dataclass
class Member:
    key: str
    key_start: int
    node: Node
    comma: int | None  # the comma after the value, if any


@dataclass
class Item:
    node: Node
    comma: int | None


def loads(text: str) -> Any:
    """The document a JSONC text holds."""
    return _Parser(text).document().value


def update(text: str, new: Any) -> str:
    """`text` edited so that it holds `new`, keeping its comments and layout where the two
    agree; plain JSON when `text` is empty or the edit cannot be made exactly."""
    edited = edit(text, new)
    return dump(new) if edited is None else edited


def edit(text: str, new: Any) -> str | None:
    """`text` edited in place so that it holds `new`; None when `text` is empty or the edit
    cannot be made exactly (the caller writes the document anew)."""
    if not text.strip():
        return None
    root = _Parser(text).document()
    edits: list[tuple[int, int, str]] = []
    try:
        _edit(text, root, new, edits)
    except _Rewrite:
        return None
    out = _apply(text, edits)
    try:
        same = loads(out) == new
    except JSONCError:
        same = False
    return out if same else None


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def dump(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


class _Rewrite(Exception):
    """This edit cannot keep the layout (e.g. a duplicate key): write plain JSON."""


# --- editing -----------------------------------------------------------------------------


def _edit(text: str, node: Node, new: Any, edits: list[tuple[int, int, str]]) -> None:
    """Record the edits that turn `node`'s text into `new`."""
    if node.value == new and type(node.value) is type(new):
        return
    if isinstance(node.value, dict) and isinstance(new, dict) and node.members:
        _edit_object(text, node, new, edits)
    elif isinstance(node.value, list) and isinstance(new, list) and node.items:
        _edit_array(text, node, new, edits)
    elif type(node.value) is type(new) and isinstance(new, (dict, list)):  # was empty
        entries = list(new.items()) if isinstance(new, dict) else [(None, v) for v in new]
        _fill(text, node, entries, edits)
    else:
        edits.append((node.start, node.end, _render(new, _indent_of(text, node.start), _unit_of(text))))


def _edit_object(text: str, node: Node, new: dict[str, Any],
                 edits: list[tuple[int, int, str]]) -> None:
    keys = [m.key for m in node.members]
    if len(set(keys)) != len(keys):
        raise _Rewrite  # which of the duplicates counts is a parser's choice: do not guess
    members = {m.key: m for m in node.members}
    entries = [_Entry(m.key_start, m.node, m.comma) for m in node.members]
    removed = {i for i, m in enumerate(node.members) if m.key not in new}
    added = [(k, v) for k, v in new.items() if k not in members]
    tail_goes = bool(removed) and len(node.members) - 1 in removed
    if added and (tail_goes or len(removed) == len(entries)):
        # Its last entry goes while others come: write it anew.
        edits.append((node.start, node.end, _render(new, _indent_of(text, node.start), _unit_of(text))))
        return
    edits.extend(_remove_all(text, node, entries, removed))
    for member in node.members:
        if member.key in new:
            _edit(text, member.node, new[member.key], edits)
    if added:
        _append(text, node, entries[-1], [(k, v) for k, v in added], edits)


def _edit_array(text: str, node: Node, new: list[Any], edits: list[tuple[int, int, str]]) -> None:
    old = node.value
    entries = [_Entry(i.node.start, i.node, i.comma) for i in node.items]
    if len(new) == len(old):  # items changed in place
        for item, value in zip(node.items, new, strict=True):
            _edit(text, item.node, value, edits)
    elif len(new) > len(old) and new[: len(old)] == old:  # items appended
        _append(text, node, entries[-1], [(None, v) for v in new[len(old):]], edits)
    elif (kept := _subsequence(old, new)) is not None:  # items removed
        edits.extend(_remove_all(text, node, entries, set(range(len(old))) - kept))
    else:
        edits.append((node.start, node.end, _render(new, _indent_of(text, node.start), _unit_of(text))))


def _subsequence(old: list[Any], new: list[Any]) -> set[int] | None:
    """Indexes of `old` that make up `new` in order (items only removed), else None."""
    kept: set[int] = set()
    i = 0
    for index, value in enumerate(old):
        if i < len(new) and value == new[i]:
            kept.add(index)
            i += 1
    return kept if i == len(new) else None


@dataclass
class _Entry:
    """A member or an item: where it starts (its key, or its value), its value, its comma."""

    start: int
    node: Node
    comma: int | None


def _append(text: str, container: Node, last: _Entry, added: list[tuple[str | None, Any]],
            edits: list[tuple[int, int, str]]) -> None:
    """Add entries (key or None, value) after the container's last one, in its style: one per
    line, indented like it, when its entries are on their own lines, else inline; a trailing
    comma when the last one has one. A comment ending the last entry's line stays there."""
    first = container.members[0].key_start if container.members else container.items[0].node.start
    multiline = "\n" in text[container.start:first]
    indent = _indent_of(text, last.start)

    def render(key: str | None, value: Any) -> str:
        shown = (_render(value, indent, _unit_of(text)) if multiline
                 else json.dumps(value, ensure_ascii=False))
        return f"{json.dumps(key, ensure_ascii=False)}: {shown}" if key is not None else shown

    sep = f"\n{indent}" if multiline else " "
    rendered = [render(key, value) for key, value in added]
    if last.comma is not None:  # trailing-comma style
        at = _line_rest(text, last.comma + 1) if multiline else last.comma + 1
        edits.append((at, at, "".join(f"{sep}{entry}," for entry in rendered)))
        return
    at = _line_rest(text, last.node.end) if multiline else last.node.end
    body = ",".join(sep + entry for entry in rendered)
    if at == last.node.end:
        edits.append((at, at, "," + body))
    else:  # the comma goes before the comment that ends the line, the entries after it
        edits.append((last.node.end, last.node.end, ","))
        edits.append((at, at, body))


def _fill(text: str, container: Node, added: list[tuple[str | None, Any]],
          edits: list[tuple[int, int, str]]) -> None:
    """Put entries into an empty container, one per line, keeping what is inside it (a
    comment); the closing bracket stays on its own line if it was."""
    close = container.end - 1
    outer = _indent_of(text, container.start)
    unit = _unit_of(text)
    inner = outer + unit
    rendered = [(f"{json.dumps(k, ensure_ascii=False)}: " if k is not None else "")
                + _render(v, inner, unit) for k, v in added]
    body = ",\n".join(inner + entry for entry in rendered)
    line = text.rfind("\n", container.start, close) + 1
    if line > container.start and not text[line:close].strip():  # `}` on its own line
        edits.append((line, line, body + "\n"))
    else:
        edits.append((close, close, f"\n{body}\n{outer}"))


def _remove(text: str, container: Node, entries: list[_Entry],
            removed: set[int]) -> list[tuple[int, int, str]]:
    """The edits that cut these entries out with their commas: an entry on lines of its own
    goes with those whole lines (comments on other lines stay), an inline one with the space
    before it. A comment ending the line of an entry that stays stays with it."""
    edits: list[tuple[int, int, str]] = []
    index = 0
    while index < len(entries):
        if index not in removed:
            index += 1
            continue
        first = index
        while index + 1 < len(entries) and index + 1 in removed:
            index += 1
        last = entries[index]
        before = entries[first - 1] if first else None
        line = text.rfind("\n", 0, entries[first].start) + 1
        own_line = line > container.start and not text[line:entries[first].start].strip()
        if own_line:
            # Whole lines: from this line's start through the newline that ends the last, or,
            # when the container closes on that line, from the newline before this one.
            begin = line
            end = _line_rest(text, last.comma + 1 if last.comma is not None else last.node.end)
            if text.startswith("\n", end):
                end += 1
            else:
                begin = line - 1
        else:
            begin = (before.comma + 1 if before is not None and before.comma is not None
                     else container.start + 1)
            end = last.comma + 1 if last.comma is not None else last.node.end
        if last.comma is None and before is not None and before.comma is not None:
            edits.append((before.comma, before.comma + 1, ""))  # the comma before the tail
        edits.append((begin, end, ""))
        index += 1
    return edits


def _remove_all(text: str, container: Node, entries: list[_Entry],
                removed: set[int]) -> list[tuple[int, int, str]]:
    """`_remove`, except that a container left holding only blanks closes up (`{}`, `[]`):
    what `_fill` had opened, as an empty container is most often written."""
    edits = _remove(text, container, entries, removed)
    if len(removed) == len(entries) and entries:
        inside = _apply(text, edits)[container.start + 1:]
        length = len(text) - container.end + 1  # what follows the closing bracket
        if not inside[:len(inside) - length].strip():
            return [(container.start + 1, container.end - 1, "")]
    return edits


def _line_rest(text: str, position: int) -> int:
    """`position`, moved past blanks and a `//` comment up to the end of its line (when only
    those follow it there)."""
    rest = re.match(r"[ \t]*(?://[^\n]*)?(?=\r?\n)", text[position:])
    return position + rest.end() if rest else position


def _indent_of(text: str, position: int) -> str:
    """The whitespace that starts the line `position` is on."""
    line_start = text.rfind("\n", 0, position) + 1
    match = re.match(r"[ \t]*", text[line_start:position])
    return match.group(0) if match else ""


def _render(value: Any, indent: str, unit: str = "  ") -> str:
    """`value` as JSON whose later lines are indented to sit at `indent`, each level by
    `unit`."""
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _unit_of(text: str) -> str:
    """The text's indentation step: its least indentation (a tab when it indents with tabs);
    two spaces when nothing is indented."""
    found = re.findall(r"\n([ \t]+)\S", text)
    if not found:
        return "  "
    return "\t" if min(found, key=len).startswith("\t") else " " * min(len(f) for f in found)


# --- parsing -----------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 1 if text.startswith("\ufeff") else 0

    def document(self) -> Node:
        node = self.value()
        self.skip()
        if self.pos != len(self.text):
            self.fail("text after the document")
        return node

    def fail(self, message: str) -> None:
        line = self.text.count("\n", 0, self.pos) + 1
        raise JSONCError(f"{message} at line {line}")

    def skip(self) -> None:
        """Past whitespace and comments."""
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n\ufeff":
                self.pos += 1
            elif text.startswith("//", self.pos):
                newline = text.find("\n", self.pos)
                self.pos = len(text) if newline < 0 else newline
            elif text.startswith("/*", self.pos):
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    self.fail("unterminated comment")
                self.pos = close + 2
            else:
                return

    def value(self) -> Node:
        self.skip()
        if self.pos >= len(self.text):
            self.fail("unexpected end")
        char = self.text[self.pos]
        if char == "{":
            return self.object()
        if char == "[":
            return self.array()
        if char == '"':
            start = self.pos
            return Node(start, self.pos_after_string(), self.string_value(start))
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                start, self.pos = self.pos, self.pos + len(word)
                return Node(start, self.pos, literal)
        match = _NUMBER.match(self.text, self.pos)
        if not match:
            self.fail(f"unexpected {char!r}")
        assert match is not None
        start, self.pos = self.pos, match.end()
        return Node(start, self.pos, json.loads(match.group(0)))

    def pos_after_string(self) -> int:
        text, i = self.text, self.pos + 1
        while i < len(text):
            if text[i] == "\\":
                i += 2
            elif text[i] == '"':
                self.pos = i + 1
                return self.pos
            elif text[i] == "\n":
                break
            else:
                i += 1
        self.fail("unterminated string")
        return -1

    def string_value(self, start: int) -> str:
        try:
            return json.loads(self.text[start:self.pos])
        except ValueError:
            self.fail("bad string")
        return ""

    def object(self) -> Node:
        node = Node(self.pos, -1, {})
        self.pos += 1
        while True:
            self.skip()
            if self.text.startswith("}", self.pos):
                break
            if not self.text.startswith('"', self.pos):
                self.fail("expected a key")
            key_start = self.pos
            self.pos_after_string()
            key = self.string_value(key_start)
            self.skip()
            if not self.text.startswith(":", self.pos):
                self.fail("expected ':'")
            self.pos += 1
            value = self.value()
            self.skip()
            comma = None
            if self.text.startswith(",", self.pos):
                comma, self.pos = self.pos, self.pos + 1
            node.members.append(Member(key, key_start, value, comma))
            node.value[key] = value.value
            if comma is None:
                self.skip()
                if not self.text.startswith("}", self.pos):
                    self.fail("expected ',' or '}'")
                break
        self.pos += 1
        node.end = self.pos
        return node

    def array(self) -> Node:
        node = Node(self.pos, -1, [])
        self.pos += 1
        while True:
            self.skip()
            if self.text.startswith("]", self.pos):
                break
            value = self.value()
            self.skip()
            comma = None
            if self.text.startswith(",", self.pos):
                comma, self.pos = self.pos, self.pos + 1
            node.items.append(Item(value, comma))
            node.value.append(value.value)
            if comma is None:
                self.skip()
                if not self.text.startswith("]", self.pos):
                    self.fail("expected ',' or ']'")
                break
        self.pos += 1
        node.end = self.pos
        return node
