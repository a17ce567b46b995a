"""The session store: round trips, fork/truncate/replace, crash survival, threads, clear errors."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from nb_agent.agent.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from nb_agent.agent.sessions import SCHEMA_VERSION, SessionStore, default_path
from nb_agent.errors import UsageError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    s = SessionStore(tmp_path / "sessions.db")
    yield s
    s.close()


def every_part() -> list[Message]:
    return [
        Message(role="system", content=[TextPart(text="be brief")]),
        Message.user("plot x²  ünïcode ✓"),
        Message(
            role="assistant",
            content=[
                ThinkingPart(text="need a tool", signature="sig=="),
                ThinkingPart(text="no signature"),
                TextPart(text="calling"),
                ToolCallPart(id="c1", name="run_cell", arguments={"code": "1+1", "n": [1, 2.5, None]}),
                ToolCallPart(id="c2", name="broken", arguments=None, raw_arguments='{"code": '),
            ],
        ),
        Message(
            role="tool",
            content=[
                ToolResultPart(tool_call_id="c1", content="2"),
                ToolResultPart(tool_call_id="c2", content="bad JSON", is_error=True),
            ],
        ),
        Message(role="user", content=[ImagePart(mime_type="image/png", data="iVBORw0KGgo="), TextPart(text="this?")]),
        Message(role="assistant", content=[]),
    ]


def test_round_trip_every_part_type(store: SessionStore) -> None:
    info = store.create(name="demo", metadata={"model": "m1"})
    msgs = every_part()
    for m in msgs:
        store.append(info.id, m)
    assert store.messages(info.id) == msgs
    got = store.get(info.id)
    assert (got.name, got.message_count, got.metadata, got.parent_id) == ("demo", len(msgs), {"model": "m1"}, None)
    assert got.updated > got.created


def test_ids_are_goose_style_and_never_reused(store: SessionStore) -> None:
    a, b = store.create(), store.create()
    day, n = a.id.split("_")
    assert len(day) == 8
    assert day.isdigit()
    assert b.id == f"{day}_{int(n) + 1}"
    assert a.name == a.id  # the default name
    store.delete(b.id)
    assert store.create().id == f"{day}_{int(n) + 2}"


def test_list_most_recently_updated_first(store: SessionStore) -> None:
    a, b, c = store.create("a"), store.create("b"), store.create("c")
    assert [s.name for s in store.list()] == ["c", "b", "a"]
    store.append(a.id, Message.user("hi"))
    assert [s.name for s in store.list()] == ["a", "c", "b"]
    store.update_metadata(b.id, input_tokens=10)
    assert [s.name for s in store.list(limit=2)] == ["b", "a"]
    assert store.list()[1].message_count == 1
    assert c.message_count == 0


def test_fork_whole_session(store: SessionStore) -> None:
    src = store.create("orig", metadata={"model": "m1"})
    msgs = every_part()
    for m in msgs:
        store.append(src.id, m)
    before = store.get(src.id)
    fork = store.fork(src.id)
    assert fork.id != src.id
    assert (fork.parent_id, fork.name, fork.message_count, fork.metadata) == (src.id, "orig (fork)", 6, {"model": "m1"})
    assert store.messages(fork.id) == msgs
    # the copies are independent: changing the fork leaves the parent as it was
    store.append(fork.id, Message.user("only in the fork"))
    store.truncate(fork.id, msgs[1].id)
    assert store.messages(src.id) == msgs
    assert store.get(src.id) == before


def test_fork_up_to_a_message(store: SessionStore) -> None:
    src = store.create("orig")
    msgs = every_part()
    for m in msgs:
        store.append(src.id, m)
    fork = store.fork(src.id, until_message_id=msgs[2].id, name="branch")
    assert (fork.name, fork.parent_id, fork.message_count) == ("branch", src.id, 3)
    assert store.messages(fork.id) == msgs[:3]
    assert store.messages(src.id) == msgs
    # the fork continues with fresh numbering after the copied prefix
    new = Message.user("another way")
    store.append(fork.id, new)
    assert store.messages(fork.id) == [*msgs[:3], new]


def test_fork_of_empty_session_and_unknown_message(store: SessionStore) -> None:
    empty = store.create()
    assert store.fork(empty.id).message_count == 0
    with pytest.raises(UsageError, match="has no message 'nope'"):
        store.fork(empty.id, until_message_id="nope")
    assert len(store.list()) == 2  # the failed fork left nothing behind


def test_truncate(store: SessionStore) -> None:
    s = store.create()
    msgs = every_part()
    for m in msgs:
        store.append(s.id, m)
    assert store.truncate(s.id, msgs[3].id) == 3
    assert store.messages(s.id) == msgs[:3]
    assert store.truncate(s.id, msgs[0].id) == 3
    assert store.messages(s.id) == []
    with pytest.raises(UsageError, match="has no message"):
        store.truncate(s.id, msgs[0].id)
    # a message id freed by truncation can be appended again
    store.append(s.id, msgs[0])
    assert store.messages(s.id) == msgs[:1]


def test_replace_is_atomic(store: SessionStore) -> None:
    s = store.create()
    msgs = every_part()
    for m in msgs:
        store.append(s.id, m)
    summary = [Message.user("summary of the above"), msgs[-1]]
    store.replace(s.id, summary)
    assert store.messages(s.id) == summary
    # a duplicate id fails the insert after the delete already ran: the transaction rolls both back
    dup = Message.user("x")
    with pytest.raises(UsageError, match="nothing was changed"):
        store.replace(s.id, [Message.user("new"), dup, dup])
    assert store.messages(s.id) == summary
    store.replace(s.id, [])
    assert store.get(s.id).message_count == 0


def test_append_duplicate_id_is_refused(store: SessionStore) -> None:
    s = store.create()
    m = Message.user("once")
    store.append(s.id, m)
    with pytest.raises(UsageError, match="already has a message"):
        store.append(s.id, m)
    assert store.messages(s.id) == [m]


def test_rename_metadata_delete(store: SessionStore, tmp_path: Path) -> None:
    parent = store.create("p", metadata={"model": "m1", "usage": {"input": 1}})
    store.append(parent.id, Message.user("hi"))
    store.rename(parent.id, "renamed")
    store.update_metadata(parent.id, usage={"input": 5}, provider="openai")
    got = store.get(parent.id)
    assert got.name == "renamed"
    assert got.metadata == {"model": "m1", "usage": {"input": 5}, "provider": "openai"}
    with pytest.raises(UsageError, match="JSON-serializable"):
        store.update_metadata(parent.id, bad=object())
    assert store.get(parent.id).metadata == got.metadata

    child = store.fork(parent.id)
    store.delete(parent.id)
    with pytest.raises(UsageError):
        store.get(parent.id)
    orphan = store.get(child.id)
    assert orphan.parent_id is None
    assert orphan.message_count == 1
    with closing(sqlite3.connect(tmp_path / "sessions.db")) as raw:  # the cascade removed the parent's rows
        assert raw.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (parent.id,)).fetchone() == (0,)


def test_missing_session_is_a_clear_usage_error(store: SessionStore) -> None:
    calls: list[Callable[[], object]] = [
        lambda: store.get("20000101_1"),
        lambda: store.messages("20000101_1"),
        lambda: store.append("20000101_1", Message.user("x")),
        lambda: store.replace("20000101_1", []),
        lambda: store.fork("20000101_1"),
        lambda: store.truncate("20000101_1", "m"),
        lambda: store.rename("20000101_1", "n"),
        lambda: store.update_metadata("20000101_1", a=1),
        lambda: store.delete("20000101_1"),
    ]
    for call in calls:
        with pytest.raises(UsageError, match=r"no session '20000101_1' in .*sessions\.db; SessionStore\.list\(\)"):
            call()
    assert store.list() == []


def test_closed_store_says_so(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "s.db") as s:
        s.create()
    s.close()  # idempotent
    with pytest.raises(UsageError, match="closed"):
        s.list()


def test_pragmas_and_schema_version(store: SessionStore, tmp_path: Path) -> None:
    with closing(sqlite3.connect(tmp_path / "sessions.db")) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert raw.execute("SELECT MAX(version) FROM schema_version").fetchone() == (SCHEMA_VERSION,)
    # reopening an up-to-date file migrates nothing and keeps the data
    s = store.create()
    store.close()
    with SessionStore(tmp_path / "sessions.db") as again:
        assert [i.id for i in again.list()] == [s.id]


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    SessionStore(path).close()
    with closing(sqlite3.connect(path)) as raw, raw:
        raw.execute("INSERT INTO schema_version (version, applied) VALUES (?, 0)", (SCHEMA_VERSION + 1,))
    with pytest.raises(UsageError, match="newer than this nb-agent"):
        SessionStore(path)


def test_memory_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with SessionStore(":memory:") as s:
        assert s.path == ":memory:"
        info = s.create()
        s.append(info.id, Message.user("hi"))
        assert s.messages(info.id)[0].text == "hi"
    assert not list(tmp_path.iterdir())  # no file named ":memory:" appeared


def test_default_path_honours_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NB_AGENT_DATA_DIR", str(tmp_path / "data"))
    assert default_path() == tmp_path / "data" / "sessions.db"
    with SessionStore() as s:
        assert s.path == tmp_path / "data" / "sessions.db"
        s.create()
    assert (tmp_path / "data" / "sessions.db").exists()


CHILD = textwrap.dedent(
    """
    import sys, time
    from nb_agent.agent.messages import Message
    from nb_agent.agent.sessions import SessionStore

    store = SessionStore(sys.argv[1])
    sid = store.create(name="crash").id
    print(sid, flush=True)
    i = 0
    while True:
        m = Message.user(f"msg {i}")
        store.append(sid, m)  # committed before it returns
        print(m.id, flush=True)
        i += 1
        if i == 40:
            print("ok", flush=True)
            time.sleep(60)  # the test kills the process here, with the connection open
    """
)


def test_survives_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO
    )
    assert proc.stdout is not None
    try:
        sid = proc.stdout.readline().strip()
        acked: list[str] = []
        for line in proc.stdout:
            if line.strip() == "ok":
                break
            acked.append(line.strip())
        proc.kill()  # SIGKILL on POSIX: no atexit, no close(), no checkpoint
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
    if sys.platform != "win32":
        assert proc.returncode == -signal.SIGKILL
    assert len(acked) == 40
    wal = path.with_name(path.name + "-wal")
    assert wal.stat().st_size > 0  # the commits sit in the WAL, never checkpointed: reopening recovers them
    with SessionStore(path) as store:
        got = store.messages(sid)
        assert [m.id for m in got] == acked
        assert [m.text for m in got] == [f"msg {i}" for i in range(40)]
        assert store.get(sid).name == "crash"


def test_two_threads_append_concurrently(store: SessionStore) -> None:
    s = store.create()
    n = 150
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def writer(tag: str) -> None:
        try:
            barrier.wait()
            for i in range(n):
                store.append(s.id, Message.user(f"{tag}{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(tag,)) for tag in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    texts = [m.text for m in store.messages(s.id)]
    assert len(texts) == 2 * n
    for tag in "ab":  # nothing lost, and each writer's messages stay in its order
        assert [t for t in texts if t.startswith(tag)] == [f"{tag}{i}" for i in range(n)]


def test_two_connections_share_a_file(tmp_path: Path) -> None:
    """Two stores on one file (two kernels) queue on the write lock instead of failing."""
    path = tmp_path / "sessions.db"
    first, second = SessionStore(path), SessionStore(path)
    try:
        s = first.create()
        barrier = threading.Barrier(2)

        def writer(st: SessionStore, tag: str) -> None:
            barrier.wait()
            for i in range(100):
                st.append(s.id, Message.user(f"{tag}{i}"))

        threads = [threading.Thread(target=writer, args=(st, tag)) for st, tag in ((first, "a"), (second, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert second.get(s.id).message_count == 200
        ids = {i.id for i in (first.create(), second.create(), first.create())}
        assert len(ids) == 3
    finally:
        first.close()
        second.close()


# -- data at rest: private files, unreadable rows -------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_database_and_wal_files_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask: files would be world-readable
    try:
        with SessionStore(tmp_path / "data" / "sessions.db") as s:
            s.append(s.create().id, Message.user("my secret plan"))
            files = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "data").iterdir()}
    finally:
        os.umask(old)
    assert files == {"sessions.db": 0o600, "sessions.db-wal": 0o600, "sessions.db-shm": 0o600}
    assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_an_existing_readable_database_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    SessionStore(path).close()
    path.chmod(0o644)
    SessionStore(path).close()
    assert path.stat().st_mode & 0o777 == 0o600


def corrupt(path: Path, session_id: str) -> None:
    """Two rows as a hand edit or a bad disk leave them: not JSON, and JSON that is not a Message."""
    with closing(sqlite3.connect(path)) as raw, raw:
        raw.execute('INSERT INTO messages VALUES (?, 90, \'bad-json\', \'{"role": "user", "cont\')', (session_id,))
        raw.execute("INSERT INTO messages VALUES (?, 91, 'bad-shape', '{\"role\": 42}')", (session_id,))


def test_unreadable_rows_are_set_aside_with_a_notice(store: SessionStore, tmp_path: Path) -> None:
    sid = store.create().id
    store.append(sid, Message.user("first"))
    corrupt(tmp_path / "sessions.db", sid)
    resumed = store.resume(sid)
    assert [m.text for m in resumed.messages] == ["first"]
    assert resumed.quarantined == 2
    assert resumed.notice is not None
    assert "2 stored message(s)" in resumed.notice
    assert "quarantined_messages" in resumed.notice
    # kept for whoever wants to repair them, and out of the way: the next resume is clean
    with closing(sqlite3.connect(tmp_path / "sessions.db")) as raw:
        kept = raw.execute("SELECT message_id FROM quarantined_messages ORDER BY seq").fetchall()
    assert kept == [("bad-json",), ("bad-shape",)]
    assert store.resume(sid).notice is None
    store.append(sid, Message.user("second"))  # the session goes on
    assert [m.text for m in store.messages(sid)] == ["first", "second"]


def test_unreadable_metadata_reads_as_none(store: SessionStore, tmp_path: Path) -> None:
    sid = store.create().id
    with closing(sqlite3.connect(tmp_path / "sessions.db")) as raw, raw:
        raw.execute("UPDATE sessions SET metadata = '{oops' WHERE id = ?", (sid,))
    assert store.get(sid).metadata == {}
    store.update_metadata(sid, model="m")
    assert store.get(sid).metadata == {"model": "m"}


def test_a_version_1_file_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with SessionStore(path) as s:
        sid = s.create().id
        s.append(sid, Message.user("kept"))
    with closing(sqlite3.connect(path)) as raw, raw:
        raw.execute("DROP TABLE quarantined_messages")
        raw.execute("DELETE FROM schema_version WHERE version = 2")
    with SessionStore(path) as s:
        assert [m.text for m in s.messages(sid)] == ["kept"]
        corrupt(path, sid)
        assert s.resume(sid).quarantined == 2
