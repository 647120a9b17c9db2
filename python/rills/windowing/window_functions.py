"""Base windowing: a Window (start, end, events) and the shared event-time logic.

Events are dicts with a 'timestamp' (unix seconds; a missing timestamp means
"now"). Windows are aligned to multiples of their slide, [start, end). The
window logic is the engine's C++ window operator (the one behind
rills.WindowTask): the watermark is the latest event time (or the time given
to `close_expired(now)`), and a window closes once the watermark reaches its
end. An event joins those of its windows still open; one whose windows have
all closed is late: counted in `late_events` and kept in `late` - never
silently dropped. Python keeps only each open window's events.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from .. import _core

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
        # Event time, the watermark, lateness and closing are the C++ window
        # operator's (rill::WindowOperator, as in rills.WindowTask); Python
        # keeps each open window's events.
        self._core = _core.EventWindows(self.size, self.slide)
        self._open: Dict[float, Window] = {}
        self._closed: List[Window] = []
        self.late: List[Dict[str, Any]] = []
        self.late_events = 0
        self.total_events = 0
        self._max_ts = -math.inf

    def add_event(self, event: Dict[str, Any]) -> List[Window]:
        """Add an event; return the windows this closed."""
        if not isinstance(event, dict):
            raise TypeError(f"events are dicts, got {type(event).__name__}")
        ts = event.get("timestamp")
        ts = time.time() if ts is None else float(ts)
        with self._lock:
            self.total_events += 1
            joined = self._core.add(ts)
            if joined is None:  # every window of `ts` has closed
                self.late_events += 1
                self.late.append(event)
                return []
            for start, end in joined:
                w = self._open.get(start)
                if w is None:
                    w = self._open[start] = Window(start, end)
                w.events.append(event)
            self._max_ts = max(self._max_ts, ts)
            return self._close(self._core.close())

    def _close(self, ended) -> List[Window]:
        closed = []
        for start, _end, _count in ended:
            w = self._open.pop(start)
            w.closed = True
            closed.append(w)
            self._closed.append(w)
        if len(self._closed) > self.max_closed:
            del self._closed[: len(self._closed) - self.max_closed]
        return closed

    def close_expired(self, now: Optional[float] = None) -> List[Window]:
        """Close the windows whose end is <= now (processing time; default time.time())."""
        with self._lock:
            self._core.advance(time.time() if now is None else float(now))
            return self._close(self._core.close())

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
