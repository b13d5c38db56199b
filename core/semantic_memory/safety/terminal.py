"""Terminal control sequences out of text that is stored and shown again.

Captured tool output carries colours, cursor moves and progress-bar carriage returns
(`\\x1b[31mError\\x1b[39m`, `50%\\r100%`). Stored as they come they cost an agent's context
budget and split words for search (`[31mError`), and printed by `memory-mcp list` they drive the
reader's terminal: an OSC sequence in a memory can retitle the window, plant a hyperlink or
write the clipboard (OSC 52). Ingest takes them out; the CLI and the injection block take them
out again for memories stored before.

ECMA-48 shapes: CSI (`ESC [` or U+009B, parameters, intermediates, a final byte); the string
controls OSC, DCS, SOS, PM and APC when terminated (BEL or ST; an unterminated one loses only
its opening, never the text after it); any other escape with its intermediates and final byte;
then every remaining C0 and C1 control but tab, newline and NUL (which validation refuses as
binary data). A carriage return ends a line.

Shown on a terminal (`shown_on_terminal`), bidi embeddings, overrides and isolates are made
visible too: the terminal reorders the text after one ("Trojan Source"), so a memory reviewed
with `memory-mcp list` could read differently from what an agent is given (the injected block
drops them). They stay in the stored text: right-to-left writing may mean them.
"""

from __future__ import annotations

import re

_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"  # CSI
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"  # any other escape (ESC ( B, ESC 7, a lone ESC)
)
_CONTROL = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_CARRIAGE_RETURN = re.compile(r"\r\n?")
_ANY = re.compile(r"[\x01-\x08\x0b-\x1f\x7f-\x9f]")  # cheap test: most text has none


def strip_terminal_controls(text: str) -> str:
    """`text` without terminal control sequences or control characters (see the module
    docstring); text without any comes back as it is."""
    if not _ANY.search(text):
        return text
    return _CONTROL.sub("", _SEQUENCE.sub("", _CARRIAGE_RETURN.sub("\n", text)))


_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def shown_on_terminal(text: str) -> str:
    """`text` as a command prints it: without terminal controls, each bidi embedding,
    override or isolate written as its code point (`<U+202E>`), so that a person reads the
    characters in the order they are stored."""
    return _BIDI_CONTROLS.sub(lambda m: f"<U+{ord(m.group()):04X}>",
                              strip_terminal_controls(text))
