"""MessageQueue: a bounded FIFO queue that becomes a priority queue when
messages carry priorities.

    queue = MessageQueue("events", max_size=1000)
    queue.enqueue({"event": "user_login", "user_id": 1})
    queue.enqueue({"event": "alert"}, priority=10)   # dequeued first
    message = queue.dequeue()
    queue.get_stats()["current_size"]

Order: higher priority first; messages without a priority count as priority 0;
equal priorities leave in enqueue order (stable). A full queue behaves as
`on_overflow` says, like the connectors' buffers: "error" (raise
QueueFullError, the default), "drop_oldest" (evict the oldest message of the
lowest priority present; in a FIFO queue, the head) or "drop_newest" (refuse
the new message; enqueue returns False). Every drop is counted.

With `store` (a rills.queue.queue_store.QueueStore) every enqueue is written
to SQLite before enqueue returns, and every dequeue is deleted there, so a
restarted process gets back exactly the messages not yet dequeued.

Threads: every method may be called from any thread (one lock per queue).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

__all__ = ["MessageQueue", "QueueFullError"]

_OVERFLOW = ("error", "drop_oldest", "drop_newest")


class QueueFullError(BufferError):
    """Raised by enqueue on a full queue with on_overflow="error"."""


class MessageQueue:
    """A bounded FIFO / priority message queue (see the module docstring)."""

    def __init__(self, name: str, max_size: int = 1000, on_overflow: str = "error",
                 store: Optional[Any] = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"queue name must be a non-empty str, got {name!r}")
        if int(max_size) < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size!r}")
        if on_overflow not in _OVERFLOW:
            raise ValueError(f"on_overflow must be one of {_OVERFLOW}, got {on_overflow!r}")
        self.name = name
        self.max_size = int(max_size)
        self.on_overflow = on_overflow
        self._lock = threading.Lock()
        # Heap of (-priority, seq, message_id, message); seq keeps FIFO order.
        self._heap: List[Tuple[int, int, int, Any]] = []
        self._seq = itertools.count()
        self._store = store
        self._created = time.time()
        self._total_enqueued = 0
        self._total_dequeued = 0
        self._dropped = 0
        self._last_enqueue: Optional[float] = None
        self._last_dequeue: Optional[float] = None
        if store is not None:
            for message_id, priority, seq, message in store.load(name):
                self._heap.append((-priority, seq, message_id, message))
            heapq.heapify(self._heap)
            start = max((entry[1] for entry in self._heap), default=-1) + 1
            self._seq = itertools.count(start)

    # Writing -----------------------------------------------------------------------

    def enqueue(self, message: Any, priority: Optional[int] = None) -> bool:
        """Add `message`; return True if it was queued (False: dropped as the newest)."""
        return self.enqueue_batch([message], priority) == 1

    def enqueue_batch(self, messages: Iterable[Any], priority: Optional[int] = None) -> int:
        """Add several messages (one SQLite transaction when persisted); return how many were queued."""
        prio = 0 if priority is None else int(priority)
        with self._lock:
            accepted: List[Tuple[int, int, int, Any]] = []
            evicted: List[int] = []
            for message in messages:
                if len(self._heap) + len(accepted) >= self.max_size:
                    if self.on_overflow == "error":
                        if accepted:
                            break
                        raise QueueFullError(f"queue '{self.name}' is full ({self.max_size} messages)")
                    if self.on_overflow == "drop_newest":
                        self._dropped += 1
                        continue
                    # drop_oldest: the oldest message of the lowest priority.
                    if self._heap:
                        victim = max(self._heap, key=lambda e: (e[0], -e[1]))
                        self._heap.remove(victim)
                        heapq.heapify(self._heap)
                        evicted.append(victim[2])
                    else:
                        accepted.pop(0)
                    self._dropped += 1
                seq = next(self._seq)
                accepted.append((-prio, seq, seq, message))
            if self._store is not None and (accepted or evicted):
                self._store.save(self.name, [(e[2], -e[0], e[1], e[3]) for e in accepted], evicted)
            for entry in accepted:
                heapq.heappush(self._heap, entry)
            self._total_enqueued += len(accepted)
            if accepted:
                self._last_enqueue = time.time()
            return len(accepted)

    # Reading -----------------------------------------------------------------------

    def dequeue(self) -> Optional[Any]:
        """Remove and return the next message, or None when empty."""
        with self._lock:
            if not self._heap:
                return None
            entry = heapq.heappop(self._heap)
            if self._store is not None:
                self._store.delete(self.name, [entry[2]])
            self._total_dequeued += 1
            self._last_dequeue = time.time()
            return entry[3]

    def dequeue_batch(self, max_messages: int) -> List[Any]:
        """Remove and return up to `max_messages` messages in order."""
        with self._lock:
            taken = [heapq.heappop(self._heap) for _ in range(min(int(max_messages), len(self._heap)))]
            if self._store is not None and taken:
                self._store.delete(self.name, [e[2] for e in taken])
            self._total_dequeued += len(taken)
            if taken:
                self._last_dequeue = time.time()
            return [e[3] for e in taken]

    def peek(self) -> Optional[Any]:
        """Return the next message without removing it (None when empty)."""
        with self._lock:
            return self._heap[0][3] if self._heap else None

    def size(self) -> int:
        with self._lock:
            return len(self._heap)

    def is_empty(self) -> bool:
        return self.size() == 0

    def is_full(self) -> bool:
        return self.size() >= self.max_size

    def clear(self) -> int:
        """Remove every message; return how many there were."""
        with self._lock:
            n = len(self._heap)
            if self._store is not None and n:
                self._store.delete(self.name, [e[2] for e in self._heap])
            self._heap.clear()
            return n

    def get_stats(self) -> Dict[str, Any]:
        """current_size, max_size, total_enqueued, total_dequeued, dropped, utilization,
        persistent, created_at, last_enqueue_at, last_dequeue_at."""
        with self._lock:
            return {
                "name": self.name,
                "current_size": len(self._heap),
                "max_size": self.max_size,
                "total_enqueued": self._total_enqueued,
                "total_dequeued": self._total_dequeued,
                "dropped": self._dropped,
                "utilization": len(self._heap) / self.max_size,
                "persistent": self._store is not None,
                "created_at": self._created,
                "last_enqueue_at": self._last_enqueue,
                "last_dequeue_at": self._last_dequeue,
            }

    def __len__(self) -> int:
        return self.size()

    def __repr__(self) -> str:
        return f"<MessageQueue(name={self.name!r}, size={self.size()}, max_size={self.max_size})>"
