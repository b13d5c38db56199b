"""The vector channel's tables, and the SQL conditions over them that both its searches (the
in-RAM matrix and the ANN index) share. No numpy here: the channel imports this at start."""

from __future__ import annotations

import sqlite3

from semantic_memory.stores.sqlite import run_script

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories_vec (
    memory_id INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vec BLOB NOT NULL,
    seq INTEGER NOT NULL,
    content_hash TEXT
);
CREATE INDEX IF NOT EXISTS memories_vec_seq ON memories_vec(seq);
CREATE INDEX IF NOT EXISTS memories_vec_model ON memories_vec(model, dim);
CREATE TABLE IF NOT EXISTS vector_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL DEFAULT 0,
    deletes INTEGER NOT NULL DEFAULT 0,
    token TEXT NOT NULL DEFAULT ''
);
CREATE TRIGGER IF NOT EXISTS memories_vec_ad AFTER DELETE ON memories_vec BEGIN
    UPDATE vector_state SET deletes = deletes + 1 WHERE id = 1;
END;
"""

#: Holds when a row `v` of `memories_vec` is the vector of its memory `m`'s current text. An
#: edit made while this channel was not loaded (MEMORY_PLUGINS without it) leaves the old
#: text's vector behind, tagged with the model like a current one: its hash tells it apart.
#: NULL is a row written before rows kept the hash of their text, taken as current (checking
#: them would embed the whole store again).
FRESH = "(v.content_hash IS NULL OR v.content_hash = m.content_hash)"


def create(conn: sqlite3.Connection) -> None:
    """Create the tables, or bring older ones up to date; reads only when they are current (a
    store another process writes to opens without the write lock)."""
    run_script(conn, SCHEMA)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(memories_vec)")}
    if "content_hash" not in columns:  # a table from before edits were caught: O(1)
        conn.execute("ALTER TABLE memories_vec ADD COLUMN content_hash TEXT")
    # Written once: an INSERT, even one that inserts nothing, takes the write lock
    if conn.execute("SELECT 1 FROM vector_state WHERE id = 1").fetchone() is None:
        conn.execute("INSERT OR IGNORE INTO vector_state (id) VALUES (1)")
