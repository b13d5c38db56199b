"""What automatic capture writes, in one place for the service (`ingest`, the stores) and the
hooks that write it (`harness/adapter.py`, `harness/transcript.py`; the opencode plugin's
memory.ts writes the same strings): its `source` values and the head of a cut exchange's later
pieces. Constants only: hook processes import it.
"""

#: A flush of the turns a compaction or the session's end drops (the hooks' and the opencode
#: plugin's).
FLUSH_SOURCE = "compaction"
#: An allow-listed tool's output (PostToolUse, opencode's `tool.execute.after`).
TOOL_SOURCE = "tool"
#: The sources of automatic capture, spooled or not: such an item never brings back a memory
#: its user forgot, nor one purged (`ingest._captured`).
CAPTURED_SOURCES = frozenset({FLUSH_SOURCE, TOOL_SOURCE})
#: Content from outside the conversation (a tool's output, a file, a web page): what the
#: injection filter reads (`default_plugins/hygiene.py`), and what never supersedes what the
#: user said (`supersede.may_replace`).
UNTRUSTED_SOURCES = frozenset({TOOL_SOURCE, "web", "file", "fetch"})
#: How each piece of a long exchange after its first begins: its question, then a new line
#: and the piece (`transcript._head`).
PIECE_HEAD = "(User asked: "
