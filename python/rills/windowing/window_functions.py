"""Base windowing: a Window (start, end, events) and the shared event-time logic.

Events are dicts with a 'timestamp' (unix seconds; a missing timestamp means
"now"). Windows are aligned to multiples of their slide, [start, end). A window
closes when an event at or after its end arrives (event time), or by
`close_expired(now)`. Late events (for windows already closed) are counted in
`late_events` and kept in `late` - never silently dropped. The engine-level
equivalent, with watermarks, lateness and C++ aggregates, is
rills.WindowTask.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable, Dict, List, Optional

__all__ = ["Window", "WindowBase"]


class Window:
    """One window: [start, end) and its events."""

    __slots__ = ("start", "end", "events", "closed")

    def __init__(self, start: float, end: float):
        self.start = start
        self.end = end
        self.events: List[Dict[str, Any]] = []
        self.closed = False

    @property
    def count(self) -> int:
        return len(self.events)

    def aggregate(self, fn: Callable[[List[Dict[str, Any]]], Any]) -> Any:
        return fn(self.events)

    def to_dict(self) -> Dict[str, Any]:
        return {"start": self.start, "end": self.end, "count": len(self.events),
                "events": list(self.events), "closed": self.closed}

    def __repr__(self) -> str:
        return f"<Window([{self.start}, {self.end}), count={len(self.events)})>"


class WindowBase:
    """Windows of `size` seconds starting every `slide` seconds."""

    def __init__(self, size: float, slide: float, max_closed: int = 1000):
        if not (size > 0 and slide > 0):
            raise ValueError(f"window size and slide must be > 0, got {size!r}, {slide!r}")
        self.size = float(size)
        self.slide = float(slide)
        self.max_closed = int(max_closed)
        self._lock = threading.Lock()
        self._open: Dict[float, Window] = {}
        self._closed: List[Window] = []
        self.late: List[Dict[str, Any]] = []
        self.late_events = 0
        self.total_events = 0
        self._max_ts = -math.inf
        self._closed_until = -math.inf

    def _starts(self, ts: float) -> List[float]:
        last = math.floor(ts / self.slide) * self.slide
        starts = []
        s = last
        while s > ts - self.size:
            starts.append(s)
            s -= self.slide
        return starts

    def add_event(self, event: Dict[str, Any]) -> List[Window]:
        """Add an event; return the windows this closed."""
        if not isinstance(event, dict):
            raise TypeError(f"events are dicts, got {type(event).__name__}")
        ts = event.get("timestamp")
        ts = time.time() if ts is None else float(ts)
        with self._lock:
            self.total_events += 1
            starts = [s for s in self._starts(ts) if s + self.size > self._closed_until]
            if not starts and self._starts(ts):
                self.late_events += 1
                self.late.append(event)
                return []
            for s in starts:
                w = self._open.get(s)
                if w is None:
                    w = self._open[s] = Window(s, s + self.size)
                w.events.append(event)
            self._max_ts = max(self._max_ts, ts)
            return self._close_until(self._max_ts)

    def _close_until(self, ts: float) -> List[Window]:
        closed = [w for s, w in sorted(self._open.items()) if w.end <= ts]
        for w in closed:
            del self._open[w.start]
            w.closed = True
            self._closed.append(w)
            self._closed_until = max(self._closed_until, w.end)
        if len(self._closed) > self.max_closed:
            del self._closed[: len(self._closed) - self.max_closed]
        return closed

    def close_expired(self, now: Optional[float] = None) -> List[Window]:
        """Close the windows whose end is <= now (processing time; default time.time())."""
        with self._lock:
            return self._close_until(time.time() if now is None else now)

    def get_closed_windows(self, clear: bool = False) -> List[Dict[str, Any]]:
        """The closed windows (oldest first) as dicts; `clear` forgets them."""
        with self._lock:
            out = [w.to_dict() for w in self._closed]
            if clear:
                self._closed.clear()
            return out

    def get_open_windows(self) -> List[Dict[str, Any]]:
        with self._lock:
            return [w.to_dict() for _, w in sorted(self._open.items())]

    def _current(self) -> Optional[Window]:
        if not self._open:
            return None
        # The newest open window containing the latest event time.
        containing = [w for w in self._open.values() if w.start <= self._max_ts < w.end]
        pool = containing or list(self._open.values())
        return max(pool, key=lambda w: w.start)

    def get_current_window(self) -> Dict[str, Any]:
        """The window of the latest event: start, end, count, events (empty window if none)."""
        with self._lock:
            w = self._current()
            if w is None:
                return {"start": None, "end": None, "count": 0, "events": [], "closed": False}
            return w.to_dict()

    def aggregate(self, fn: Callable[[List[Dict[str, Any]]], Any]) -> Any:
        """fn(events of the current window)."""
        return fn(self.get_current_window()["events"])

    def aggregate_closed(self, fn: Callable[[List[Dict[str, Any]]], Any]) -> List[Dict[str, Any]]:
        """[{start, end, count, result}] for each closed window."""
        return [{"start": w["start"], "end": w["end"], "count": w["count"], "result": fn(w["events"])}
                for w in self.get_closed_windows()]

    def get_stats(self) -> Dict[str, Any]:
        with self._lock:
            return {"size": self.size, "slide": self.slide, "open_windows": len(self._open),
                    "closed_windows": len(self._closed), "total_events": self.total_events,
                    "late_events": self.late_events}
