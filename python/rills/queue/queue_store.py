"""QueueStore: SQLite persistence of message queues (WAL mode).

Each enqueue batch is one transaction, committed before enqueue returns
(synchronous=FULL), so an acknowledged message survives a kill -9; a dequeue
deletes its message in one transaction. Messages are stored as JSON.

The store is the C++ rill::toolkit::QueueStore (the file layout: tables
`queues(name, max_size)` and `queue_messages(queue, id, priority, seq, body)`);
MessageQueue(store=...) writes through it from C++.

Threads: any thread (one connection guarded by a mutex in C++).
"""

from __future__ import annotations

import json
from typing import Any, List, Tuple

from .. import _core

__all__ = ["QueueStore"]


class QueueStore:
    """Persist queues in the SQLite file `path` (":memory:" for tests)."""

    def __init__(self, path: str = "queues.db"):
        self.path = path
        self._core = _core.QueueStore(str(path))

    def load(self, queue: str) -> List[Tuple[int, int, int, Any]]:
        """Return the stored (id, priority, seq, message) entries of `queue`, in seq order."""
        return [(i, p, s, json.loads(b)) for i, p, s, b in self._core.load(queue)]

    def register(self, queue: str, max_size: int) -> None:
        self._core.register(queue, int(max_size))

    def unregister(self, queue: str) -> None:
        self._core.unregister(queue)

    def queues(self) -> List[Tuple[str, int]]:
        return [tuple(q) for q in self._core.queues()]

    def close(self) -> None:
        """Close the connection once no queue uses it any more."""
        self._core.close()
