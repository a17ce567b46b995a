"""The built-in agent's sessions, persisted in SQLite so a conversation survives a kernel restart.

Modelled on Goose's session manager (``crates/goose/src/session/session_manager.rs`` in
block/goose), which keeps a ``sessions`` table and one ``messages`` row per message in
``sessions.db``, a ``schema_version`` table with numbered migrations, WAL mode and a busy timeout,
``YYYYMMDD_N`` session ids, ``copy_session`` (a new session with the old one's settings and
conversation) and ``truncate_conversation``. What is matched, and what differs on purpose:

* **ids** -- Goose's ``YYYYMMDD_N`` (short, typed by hand into ``--resume``, the day in front).
  Goose computes N as ``MAX(N)+1`` of today's ids, so deleting the newest session hands its id
  to the next one; here a per-day counter only ever grows, so an id is never reused. The day is
  the local date (what the user thinks of as "today"); Goose uses UTC.
* **order** -- Goose orders messages by a second-resolution ``timestamp`` column and truncates by
  ``created_timestamp >= t``, so two messages in the same second tie and a cut can take a
  neighbour. Here each message has an integer ``seq``, and :meth:`SessionStore.truncate` cuts at a
  message *id* (Goose later added ``truncate_conversation_from_message`` for the same reason).
* **fork** -- Goose's ``copy_session`` copies everything in separate steps (create, update,
  replace), so a failure leaves a half-made copy, and records no lineage. :meth:`SessionStore.fork`
  copies in one transaction, optionally only up to a message, and sets ``parent_id``.
* **delete** -- Goose deletes the messages by hand; here ``ON DELETE CASCADE`` does it, and a
  fork outlives its parent (``parent_id`` becomes NULL: the fork holds its own copy).

Durability and concurrency choices:

* ``journal_mode=WAL`` with ``synchronous=NORMAL``: every committed transaction is in the WAL
  file before ``commit`` returns, so a killed or crashed process (the kernel, SIGKILL) loses no
  appended message. Only a power cut or OS crash can drop the last few commits (never corrupt the
  file); ``FULL`` would close that gap with an fsync per message, which is milliseconds on a slow
  disk and these calls run on the kernel's event loop. WAL needs a local file system (not NFS).
* Writes use ``BEGIN IMMEDIATE``: the write lock is taken up front, so two kernels sharing the
  file queue on the 30 s busy timeout instead of failing to upgrade a read lock.
* One connection guarded by a lock (``check_same_thread=False``), not one per thread: the agent
  calls from the kernel's event-loop thread and from a private loop thread, per-thread
  connections could not all be closed by :meth:`SessionStore.close`, and with ``":memory:"`` each
  thread would see a different, empty database. Every call is short, so the lock is not contended.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from nb_agent.agent.messages import Message
from nb_agent.agent.session_schema import SCHEMA_VERSION, migrate, private_file
from nb_agent.errors import UsageError

__all__ = ["SCHEMA_VERSION", "Resumed", "SessionInfo", "SessionStore", "default_path"]

log = logging.getLogger("nb_agent.agent")

_SESSION_COLUMNS = (
    "s.id, s.name, s.created, s.updated, s.metadata, s.parent_id, "
    "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)"
)


def default_path() -> Path:
    """``$NB_AGENT_DATA_DIR/sessions.db``, else the platform's user data dir for nb-agent."""
    override = os.environ.get("NB_AGENT_DATA_DIR")
    base = Path(override).expanduser() if override else Path(platformdirs.user_data_dir("nb-agent", appauthor=False))
    return base / "sessions.db"


@dataclass
class Resumed:
    """A stored conversation as it can be resumed; ``notice`` says what was set aside, if anything."""

    messages: builtins.list[Message]
    quarantined: int = 0
    notice: str | None = None


@dataclass
class SessionInfo:
    """A session without its messages (cheap to list); ``parent_id`` names the session it forked."""

    id: str
    name: str
    created: float
    updated: float
    message_count: int
    metadata: dict[str, Any]
    parent_id: str | None


class SessionStore:
    """Sessions and their messages in one SQLite file; safe to share between threads."""

    def __init__(self, path: str | Path | None = None) -> None:
        if path is None:
            path = default_path()
        self.path: str | Path = path if str(path) == ":memory:" else Path(path)
        if isinstance(self.path, Path):
            private_file(self.path)
        self._lock = threading.RLock()
        self._last_time = 0.0
        conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            migrate(conn, self.path)
        except BaseException:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn

    # -- plumbing ---------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise UsageError("the session store is closed")
        return self._conn

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._connection()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed when the block ends, rolled back on any error."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _now(self) -> float:
        """Wall-clock time, strictly increasing within this store so "most recent" never ties."""
        now = max(time.time(), self._last_time + 1e-6)
        self._last_time = now
        return now

    def _require(self, conn: sqlite3.Connection, session_id: str) -> None:
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
            raise self._missing(session_id)

    def _missing(self, session_id: str) -> UsageError:
        return UsageError(f"no session {session_id!r} in {self.path}; SessionStore.list() shows the stored sessions")

    def _info(self, conn: sqlite3.Connection, session_id: str) -> SessionInfo:
        row = conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE s.id = ?", (session_id,)).fetchone()
        if row is None:
            raise self._missing(session_id)
        return _to_info(row)

    def _new_id(self, conn: sqlite3.Connection, now: float) -> str:
        day = time.strftime("%Y%m%d", time.localtime(now))
        while True:
            conn.execute(
                "INSERT INTO id_counters (day, n) VALUES (?, 1) ON CONFLICT(day) DO UPDATE SET n = n + 1", (day,)
            )
            n = conn.execute("SELECT n FROM id_counters WHERE day = ?", (day,)).fetchone()[0]
            session_id = f"{day}_{n}"
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                return session_id

    def _touch(self, conn: sqlite3.Connection, session_id: str) -> None:
        conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (self._now(), session_id))

    def _seq_of(self, conn: sqlite3.Connection, session_id: str, message_id: str) -> int:
        row = conn.execute(
            "SELECT seq FROM messages WHERE session_id = ? AND message_id = ?", (session_id, message_id)
        ).fetchone()
        if row is None:
            raise UsageError(f"session {session_id!r} has no message {message_id!r}")
        seq: int = row[0]
        return seq

    # -- sessions ---------------------------------------------------------------------------

    def create(
        self, name: str | None = None, metadata: dict[str, Any] | None = None, *, session_id: str | None = None
    ) -> SessionInfo:
        """A new, empty session; its name defaults to its id. ``session_id`` is for callers whose
        sessions already have ids (``nb-agent serve``'s clients choose theirs)."""
        meta = _dump_metadata(metadata or {})
        with self._write() as conn:
            now = self._now()
            if session_id is None:
                session_id = self._new_id(conn, now)
            elif conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None:
                raise UsageError(f"a session {session_id!r} already exists in {self.path}")
            conn.execute(
                "INSERT INTO sessions (id, name, created, updated, metadata) VALUES (?, ?, ?, ?, ?)",
                (session_id, name or session_id, now, now, meta),
            )
            return self._info(conn, session_id)

    def get(self, session_id: str) -> SessionInfo:
        with self._read() as conn:
            return self._info(conn, session_id)

    def list(self, limit: int | None = None) -> builtins.list[SessionInfo]:
        """Most recently updated first (what a "resume" picker wants on top)."""
        sql = f"SELECT {_SESSION_COLUMNS} FROM sessions s ORDER BY s.updated DESC, s.rowid DESC"
        params: tuple[int, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            params = (max(limit, 0),)
        with self._read() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [_to_info(row) for row in rows]

    def rename(self, session_id: str, name: str) -> None:
        with self._write() as conn:
            self._require(conn, session_id)
            conn.execute("UPDATE sessions SET name = ?, updated = ? WHERE id = ?", (name, self._now(), session_id))

    def update_metadata(self, session_id: str, **values: Any) -> None:
        """Merge ``values`` into the session's metadata (read and written in one transaction)."""
        with self._write() as conn:
            row = conn.execute("SELECT metadata FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise self._missing(session_id)
            merged = {**_load_metadata(row[0]), **values}
            conn.execute(
                "UPDATE sessions SET metadata = ?, updated = ? WHERE id = ?",
                (_dump_metadata(merged), self._now(), session_id),
            )

    def delete(self, session_id: str) -> None:
        """Delete a session and (by cascade) its messages; its forks stay, with ``parent_id`` None."""
        with self._write() as conn:
            self._require(conn, session_id)
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    def fork(self, session_id: str, *, until_message_id: str | None = None, name: str | None = None) -> SessionInfo:
        """Copy a session (up to and including ``until_message_id``) into a new one; the source is untouched.

        The copy keeps the message ids and the metadata (model, usage so far), so the same id
        names the same message in both; ``parent_id`` records where it came from.
        """
        with self._write() as conn:
            source = self._info(conn, session_id)
            last = (
                self._seq_of(conn, session_id, until_message_id)
                if until_message_id is not None
                else conn.execute(
                    "SELECT COALESCE(MAX(seq), -1) FROM messages WHERE session_id = ?", (session_id,)
                ).fetchone()[0]
            )
            now = self._now()
            new_id = self._new_id(conn, now)
            conn.execute(
                "INSERT INTO sessions (id, name, created, updated, metadata, parent_id) VALUES (?, ?, ?, ?, ?, ?)",
                (new_id, name or f"{source.name} (fork)", now, now, _dump_metadata(source.metadata), session_id),
            )
            conn.execute(
                "INSERT INTO messages (session_id, seq, message_id, json) "
                "SELECT ?, seq, message_id, json FROM messages WHERE session_id = ? AND seq <= ?",
                (new_id, session_id, last),
            )
            return self._info(conn, new_id)

    # -- messages ---------------------------------------------------------------------------

    def append(self, session_id: str, message: Message) -> None:
        """Add one message, committed before returning: a crash right after loses nothing."""
        data = message.model_dump_json()
        with self._write() as conn:
            self._require(conn, session_id)
            try:
                conn.execute(
                    "INSERT INTO messages (session_id, seq, message_id, json) "
                    "SELECT ?, COALESCE(MAX(seq), -1) + 1, ?, ? FROM messages WHERE session_id = ?",
                    (session_id, message.id, data, session_id),
                )
            except sqlite3.IntegrityError as exc:
                raise UsageError(f"session {session_id!r} already has a message with id {message.id!r}") from exc
            self._touch(conn, session_id)

    def replace(self, session_id: str, messages: builtins.list[Message]) -> None:
        """Swap the whole conversation (after compaction) in one transaction: all or nothing."""
        rows = [(session_id, seq, m.id, m.model_dump_json()) for seq, m in enumerate(messages)]
        with self._write() as conn:
            self._require(conn, session_id)
            conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            try:
                conn.executemany("INSERT INTO messages (session_id, seq, message_id, json) VALUES (?, ?, ?, ?)", rows)
            except sqlite3.IntegrityError as exc:
                raise UsageError(f"replace({session_id!r}): two messages share an id; nothing was changed") from exc
            self._touch(conn, session_id)

    def messages(self, session_id: str) -> builtins.list[Message]:
        return self.resume(session_id).messages

    def resume(self, session_id: str) -> Resumed:
        """The conversation to go on with. A row that no longer reads as a message (a hand edit, a
        bad disk, a newer writer) is moved to ``quarantined_messages`` rather than failing the whole
        session; the result's ``notice`` says so, once."""
        with self._read() as conn:
            # one statement, so a concurrent delete cannot slip between the check and the read
            rows = conn.execute(
                "SELECT m.seq, m.message_id, m.json FROM sessions s LEFT JOIN messages m ON m.session_id = s.id "
                "WHERE s.id = ? ORDER BY m.seq",
                (session_id,),
            ).fetchall()
        if not rows:
            raise self._missing(session_id)
        out: builtins.list[Message] = []
        bad: builtins.list[tuple[str, int, str, str, str, float]] = []
        for seq, message_id, data in rows:
            if data is None:
                continue
            try:
                out.append(Message.model_validate_json(data))
            except (ValueError, TypeError) as exc:  # pydantic's ValidationError: not JSON, or not a Message
                bad.append((session_id, seq, message_id, data, str(exc)[:2000], time.time()))
        if not bad:
            return Resumed(out)
        with self._write() as conn:
            conn.executemany("INSERT INTO quarantined_messages VALUES (?, ?, ?, ?, ?, ?)", bad)
            conn.executemany("DELETE FROM messages WHERE session_id = ? AND seq = ?", [(b[0], b[1]) for b in bad])
        them = "them" if len(bad) > 1 else "it"
        notice = (
            f"{len(bad)} stored message(s) of session {session_id} could not be read and were set aside "
            f"(table quarantined_messages in {self.path}); the conversation goes on without {them}"
        )
        log.warning("%s", notice)
        return Resumed(out, len(bad), notice)

    def truncate(self, session_id: str, from_message_id: str) -> int:
        """Delete ``from_message_id`` and every later message (edit-and-resend, undo); returns how many."""
        with self._write() as conn:
            self._require(conn, session_id)
            seq = self._seq_of(conn, session_id, from_message_id)
            deleted = conn.execute("DELETE FROM messages WHERE session_id = ? AND seq >= ?", (session_id, seq)).rowcount
            self._touch(conn, session_id)
            return deleted

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise ``UsageError``."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _dump_metadata(metadata: dict[str, Any]) -> str:
    try:
        return json.dumps(metadata)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"session metadata must be JSON-serializable: {exc}") from exc


def _load_metadata(raw: Any) -> dict[str, Any]:
    """A session's metadata; unreadable metadata (a hand edit) reads as none rather than failing."""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        value = None
    if not isinstance(value, dict):
        log.warning("a stored session's metadata is not a JSON object; ignored: %.120r", raw)
        return {}
    return value


def _to_info(row: tuple[Any, ...]) -> SessionInfo:
    session_id, name, created, updated, metadata, parent_id, count = row
    return SessionInfo(
        id=session_id,
        name=name,
        created=created,
        updated=updated,
        message_count=count,
        metadata=_load_metadata(metadata),
        parent_id=parent_id,
    )
