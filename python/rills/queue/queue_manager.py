"""QueueManager: create, list, get and delete named queues; total their stats.

With `store` (a QueueStore or a SQLite path) queues are persistent and the
manager re-opens the queues the store knows at start.

`engine.queue_manager` (a RillEngine's) is a QueueManager over the engine's
C++ toolkit: the queues its server serves at /api/v1/queues, so a queue
created here is visible there and vice versa (messages are JSON values).
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Union

from .message_queue import MessageQueue
from .queue_store import QueueStore

__all__ = ["QueueManager"]


class QueueManager:
    """A registry of MessageQueues."""

    def __init__(self, store: Optional[Union[QueueStore, str]] = None, *, _toolkit: Any = None):
        self.store = QueueStore(store) if isinstance(store, str) else store
        self._lock = threading.Lock()
        self._queues: Dict[str, MessageQueue] = {}
        # Over a C++ toolkit (engine.queue_manager): its QueueManager is the one
        # registry, shared with the engine's server; messages are JSON text.
        self._toolkit = _toolkit
        if _toolkit is not None:
            if store is not None:
                raise ValueError("a shared queue manager has the toolkit's store")
            return
        if self.store is not None:
            for name, max_size in self.store.queues():
                self._queues[name] = MessageQueue(name, max_size=max_size, store=self.store)

    def create_queue(self, name: str, max_size: int = 1000, on_overflow: str = "error") -> MessageQueue:
        """Create a queue. ValueError if the name is taken."""
        if self._toolkit is not None:
            return MessageQueue._over(self._toolkit.create_queue(name, int(max_size), on_overflow))
        with self._lock:
            if name in self._queues:
                raise ValueError(f"queue '{name}' already exists")
            queue = MessageQueue(name, max_size=max_size, on_overflow=on_overflow, store=self.store)
            if self.store is not None:
                self.store.register(name, max_size)
            self._queues[name] = queue
            return queue

    def get_queue(self, name: str) -> Optional[MessageQueue]:
        if self._toolkit is not None:
            core = self._toolkit.get_queue(name)
            return None if core is None else MessageQueue._over(core)
        with self._lock:
            return self._queues.get(name)

    def get_or_create_queue(self, name: str, max_size: int = 1000) -> MessageQueue:
        if self._toolkit is not None:
            found = self.get_queue(name)
            if found is not None:
                return found
            try:
                return self.create_queue(name, max_size)
            except ValueError:  # created meanwhile (e.g. over the REST API)
                return self.get_queue(name)
        with self._lock:
            if name in self._queues:
                return self._queues[name]
        try:
            return self.create_queue(name, max_size)
        except ValueError:
            return self._queues[name]

    def delete_queue(self, name: str) -> bool:
        """Delete a queue and its stored messages; False if unknown."""
        if self._toolkit is not None:
            return self._toolkit.delete_queue(name)
        with self._lock:
            queue = self._queues.pop(name, None)
        if queue is None:
            return False
        if self.store is not None:
            self.store.unregister(name)
        return True

    def list_queues(self) -> List[str]:
        if self._toolkit is not None:
            return self._toolkit.list_queues()
        with self._lock:
            return sorted(self._queues)

    def get_all_stats(self) -> Dict[str, Any]:
        """Per-queue stats plus totals: queues, total_messages, total_enqueued, total_dequeued."""
        if self._toolkit is not None:
            queues = [q for q in map(self.get_queue, self.list_queues()) if q is not None]
        else:
            with self._lock:
                queues = list(self._queues.values())
        per = {q.name: q.get_stats() for q in queues}
        return {
            "queues": per,
            "total_queues": len(per),
            "total_messages": sum(s["current_size"] for s in per.values()),
            "total_enqueued": sum(s["total_enqueued"] for s in per.values()),
            "total_dequeued": sum(s["total_dequeued"] for s in per.values()),
        }

    def __repr__(self) -> str:
        return f"<QueueManager(queues={self.list_queues()!r})>"
