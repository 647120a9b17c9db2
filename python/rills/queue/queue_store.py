"""QueueStore: SQLite persistence of message queues (WAL mode).

Each enqueue batch is one transaction, committed before enqueue returns
(synchronous=FULL), so an acknowledged message survives a kill -9; a dequeue
deletes its message in one transaction. Messages are stored as JSON.

Threads: one connection guarded by a lock; any thread may call.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any, List, Sequence, Tuple

__all__ = ["QueueStore"]


class QueueStore:
    """Persist queues in the SQLite file `path` (":memory:" for tests)."""

    def __init__(self, path: str = "queues.db"):
        self.path = path
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS queue_messages (queue TEXT NOT NULL, id INTEGER NOT NULL, "
            "priority INTEGER NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, "
            "PRIMARY KEY (queue, id))")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS queues (name TEXT PRIMARY KEY, max_size INTEGER NOT NULL)")

    def save(self, queue: str, entries: Sequence[Tuple[int, int, int, Any]], evicted: Sequence[int] = ()) -> None:
        """Insert (id, priority, seq, message) entries and delete `evicted` ids, in one transaction."""
        rows = [(queue, i, p, s, json.dumps(m)) for i, p, s, m in entries]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany("INSERT INTO queue_messages VALUES (?, ?, ?, ?, ?)", rows)
                self._conn.executemany("DELETE FROM queue_messages WHERE queue = ? AND id = ?",
                                       [(queue, i) for i in evicted])
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def delete(self, queue: str, ids: Sequence[int]) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany("DELETE FROM queue_messages WHERE queue = ? AND id = ?",
                                   [(queue, i) for i in ids])
            self._conn.execute("COMMIT")

    def load(self, queue: str) -> List[Tuple[int, int, int, Any]]:
        """Return the stored (id, priority, seq, message) entries of `queue`."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, priority, seq, body FROM queue_messages WHERE queue = ? ORDER BY seq",
                (queue,)).fetchall()
        return [(i, p, s, json.loads(b)) for i, p, s, b in rows]

    def register(self, queue: str, max_size: int) -> None:
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO queues VALUES (?, ?)", (queue, int(max_size)))

    def unregister(self, queue: str) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.execute("DELETE FROM queues WHERE name = ?", (queue,))
            self._conn.execute("DELETE FROM queue_messages WHERE queue = ?", (queue,))
            self._conn.execute("COMMIT")

    def queues(self) -> List[Tuple[str, int]]:
        with self._lock:
            return self._conn.execute("SELECT name, max_size FROM queues ORDER BY name").fetchall()

    def close(self) -> None:
        with self._lock:
            self._conn.close()
