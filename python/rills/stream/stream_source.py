"""Stream sources: sensor readings, synthetic events, and queues.

Every source has `read(n)` (up to n events now), `stream(max_events)` (a
generator honouring `rate` events per second when rate > 0) and
`to_connector(target_table)` which returns a MemoryConnector fed by a
background thread, so a source can feed an engine table.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Dict, Iterator, List, Optional

__all__ = ["StreamSource", "SensorSource", "EventSource", "QueueSource"]


class StreamSource:
    """Base class: subclasses implement `_next()` (one event or None)."""

    def __init__(self, name: str, rate: float = 0.0):
        self.name = name
        self.rate = float(rate)
        self.emitted = 0

    def _next(self) -> Optional[Dict[str, Any]]:
        raise NotImplementedError

    def read(self, n: int = 1) -> List[Dict[str, Any]]:
        out = []
        for _ in range(int(n)):
            event = self._next()
            if event is None:
                break
            out.append(event)
        self.emitted += len(out)
        return out

    def stream(self, max_events: Optional[int] = None) -> Iterator[Dict[str, Any]]:
        count = 0
        interval = 1.0 / self.rate if self.rate > 0 else 0.0
        next_at = time.monotonic()
        while max_events is None or count < max_events:
            event = self._next()
            if event is None:
                return
            self.emitted += 1
            count += 1
            yield event
            if interval:
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)

    def to_connector(self, target_table: str, batch_size: int = 100, max_events: Optional[int] = None):
        """Return a MemoryConnector that a daemon thread fills from this source."""
        from ..connectors import MemoryConnector

        conn = MemoryConnector(name=f"source_{self.name}", target_table=target_table)

        def pump() -> None:
            batch = []
            for event in self.stream(max_events):
                batch.append(event)
                if len(batch) >= batch_size:
                    conn.push(batch)
                    batch = []
            if batch:
                conn.push(batch)

        threading.Thread(target=pump, name=f"rills-source-{self.name}", daemon=True).start()
        return conn


class SensorSource(StreamSource):
    """Random readings: {'sensor_id', 'temperature', 'humidity', 'timestamp'}."""

    def __init__(self, name: str = "sensors", sensors: int = 5, rate: float = 0.0, seed: Optional[int] = None):
        super().__init__(name, rate)
        self.sensors = int(sensors)
        self._rng = random.Random(seed)

    def _next(self) -> Dict[str, Any]:
        r = self._rng
        return {"sensor_id": f"sensor_{r.randrange(self.sensors)}",
                "temperature": round(r.uniform(15, 35), 2),
                "humidity": round(r.uniform(30, 80), 2), "timestamp": time.time()}


class EventSource(StreamSource):
    """Random user events: {'event', 'user_id', 'value', 'timestamp'}."""

    EVENTS = ("page_view", "click", "purchase", "user_login", "user_logout")

    def __init__(self, name: str = "events", users: int = 100, rate: float = 0.0, seed: Optional[int] = None):
        super().__init__(name, rate)
        self.users = int(users)
        self._rng = random.Random(seed)

    def _next(self) -> Dict[str, Any]:
        r = self._rng
        return {"event": r.choice(self.EVENTS), "user_id": r.randrange(self.users),
                "value": round(r.uniform(1, 100), 2), "timestamp": time.time()}


class QueueSource(StreamSource):
    """Dequeues from a rills.queue MessageQueue; read() stops when it is empty."""

    def __init__(self, queue: Any, rate: float = 0.0):
        super().__init__(f"queue_{queue.name}", rate)
        self.queue = queue

    def _next(self) -> Optional[Dict[str, Any]]:
        return self.queue.dequeue()
