"""The session database's schema (numbered migrations) and its file: created private to the user."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path

from nb_agent.errors import UsageError

__all__ = ["SCHEMA_VERSION", "migrate", "private_file"]

SCHEMA_VERSION = 2

# Migration N brings a database from version N-1 to N; all run in one transaction with the
# version bump, so a failed upgrade leaves the file as it was. Add versions, never edit old ones.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            parent_id TEXT REFERENCES sessions(id) ON DELETE SET NULL
        )""",
        "CREATE INDEX sessions_updated ON sessions(updated DESC)",
        """CREATE TABLE messages (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            message_id TEXT NOT NULL,
            json TEXT NOT NULL,
            PRIMARY KEY (session_id, seq),
            UNIQUE (session_id, message_id)
        )""",
        # per-day id counters: only ever incremented, so a deleted session's id is never reused
        "CREATE TABLE id_counters (day TEXT PRIMARY KEY, n INTEGER NOT NULL)",
    ),
    # message rows that no longer read as a Message, set aside (not deleted) so the session resumes
    2: (
        """CREATE TABLE quarantined_messages (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            message_id TEXT NOT NULL,
            json TEXT NOT NULL,
            error TEXT NOT NULL,
            quarantined REAL NOT NULL
        )""",
    ),
}


def migrate(conn: sqlite3.Connection, path: object) -> None:
    """Create or upgrade the schema; refuse a file from a newer nb-agent rather than damage it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        ).fetchone()
        if has_table is None:
            conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied REAL NOT NULL)")
            current = 0
        else:
            current = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0]
        if current > SCHEMA_VERSION:
            raise UsageError(
                f"session database {path} has schema version {current}, newer than this nb-agent "
                f"understands ({SCHEMA_VERSION}): upgrade nb-agent or set NB_AGENT_DATA_DIR elsewhere"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in _MIGRATIONS[version]:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version, applied) VALUES (?, ?)", (version, time.time()))
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def private_file(path: Path) -> None:
    """The database and its ``-wal`` / ``-shm`` files readable by the user only: they hold whole
    conversations (code, data, pasted secrets). SQLite gives the WAL files the database's mode."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    if os.name == "posix":
        for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            with contextlib.suppress(FileNotFoundError, PermissionError):
                if file.stat().st_mode & 0o077:  # made by an older nb-agent, or by hand
                    file.chmod(0o600)
