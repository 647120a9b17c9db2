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

The queue itself (order, overflow, statistics, SQLite persistence) is the C++
rill::toolkit::MessageQueue, the one the network server serves under
/api/v1/queues. A persisted queue holds its messages as JSON text; an
in-memory one holds a handle to each Python object, so any object can be
queued.

Threads: every method may be called from any thread.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Dict, Iterable, List, Optional

from .. import _core

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
        self._store = store
        self._core = _core.MessageQueue(name, self.max_size, on_overflow,
                                        None if store is None else store._core)
        # In memory: body = a token naming the object in _objects.
        self._objects: Optional[Dict[str, Any]] = None if store is not None else {}
        self._tokens = itertools.count()

    @classmethod
    def _over(cls, core: Any) -> "MessageQueue":
        """Wrap a queue of a shared C++ QueueManager (engine.queue_manager): bodies
        are JSON text, so the server's /api/v1/queues reads the same messages."""
        stats = core.stats()
        queue = cls.__new__(cls)
        queue.name = stats["name"]
        queue.max_size = int(stats["max_size"])
        queue.on_overflow = stats["on_overflow"]
        queue._store = None
        queue._core = core
        queue._objects = None
        queue._tokens = itertools.count()
        return queue

    # Bodies ------------------------------------------------------------------------

    def _encode(self, messages: List[Any]) -> List[str]:
        if self._objects is None:
            return [json.dumps(m) for m in messages]
        tokens = [str(next(self._tokens)) for _ in messages]
        self._objects.update(zip(tokens, messages))
        return tokens

    def _decode(self, body: Optional[str], keep: bool = False) -> Any:
        if body is None:
            return None
        if self._objects is None:
            return json.loads(body)
        return self._objects[body] if keep else self._objects.pop(body)

    def _release(self, bodies: Iterable[str]) -> None:
        if self._objects is not None:
            for body in bodies:
                self._objects.pop(body, None)

    # Writing -----------------------------------------------------------------------

    def enqueue(self, message: Any, priority: Optional[int] = None) -> bool:
        """Add `message`; return True if it was queued (False: dropped as the newest)."""
        if self._objects is None:
            body = json.dumps(message)
        else:
            body = str(next(self._tokens))
            self._objects[body] = message
        try:
            queued, dropped = self._core.enqueue(body, None if priority is None else int(priority))
        except BufferError as e:
            self._release((body,))
            raise QueueFullError(str(e)) from None
        except BaseException:
            self._release((body,))
            raise
        if dropped:
            self._release(dropped)
        return queued

    def enqueue_batch(self, messages: Iterable[Any], priority: Optional[int] = None) -> int:
        """Add several messages (one SQLite transaction when persisted); return how many were queued."""
        bodies = self._encode(list(messages))
        if not bodies:
            return 0
        try:
            queued, dropped = self._core.enqueue_batch(bodies, None if priority is None else int(priority))
        except BufferError as e:
            self._release(bodies)
            raise QueueFullError(str(e)) from None
        except BaseException:
            self._release(bodies)
            raise
        self._release(dropped)
        if self.on_overflow == "error":
            self._release(bodies[queued:])  # did not fit
        return queued

    # Reading -----------------------------------------------------------------------

    def dequeue(self) -> Optional[Any]:
        """Remove and return the next message, or None when empty."""
        return self._decode(self._core.dequeue())

    def dequeue_batch(self, max_messages: int) -> List[Any]:
        """Remove and return up to `max_messages` messages in order."""
        return [self._decode(b) for b in self._core.dequeue_batch(int(max_messages))]

    def peek(self) -> Optional[Any]:
        """Return the next message without removing it (None when empty)."""
        return self._decode(self._core.peek(), keep=True)

    def size(self) -> int:
        return self._core.size()

    def is_empty(self) -> bool:
        return self.size() == 0

    def is_full(self) -> bool:
        return self.size() >= self.max_size

    def clear(self) -> int:
        """Remove every message; return how many there were."""
        n = self._core.clear()
        if self._objects is not None:
            self._objects.clear()
        return n

    def get_stats(self) -> Dict[str, Any]:
        """current_size, max_size, total_enqueued, total_dequeued, dropped, utilization,
        persistent, on_overflow, created_at, last_enqueue_at, last_dequeue_at."""
        return self._core.stats()

    def __len__(self) -> int:
        return self.size()

    def __repr__(self) -> str:
        return f"<MessageQueue(name={self.name!r}, size={self.size()}, max_size={self.max_size})>"
