"""StreamAnalytics: track named metrics; read count, sum, avg, min, max and rates.

    analytics = StreamAnalytics()
    analytics.track_metric("page_views", 1)
    analytics.get_metric("page_views")["count"]
    analytics.get_metric("page_views")["rate_per_second"]

rate_per_second is the number of values tracked in the last `rate_window`
seconds (default 60) divided by that window (or by the time since the first
value when that is shorter). With `db_path` every value is also written to a
SQLite history table (`metric_history`: name, value, ts), readable with
get_history(name).
"""

from __future__ import annotations

import collections
import math
import sqlite3
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

__all__ = ["StreamAnalytics"]


class _Metric:
    __slots__ = ("count", "sum", "min", "max", "first_ts", "last_ts", "last", "recent")

    def __init__(self):
        self.count = 0
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf
        self.first_ts: Optional[float] = None
        self.last_ts: Optional[float] = None
        self.last: Optional[float] = None
        self.recent: Deque[float] = collections.deque()


class StreamAnalytics:
    """Named metrics with running statistics (see the module docstring)."""

    def __init__(self, db_path: Optional[str] = None, rate_window: float = 60.0,
                 clock: Callable[[], float] = time.time):
        self.rate_window = float(rate_window)
        self._clock = clock
        self._lock = threading.Lock()
        self._metrics: Dict[str, _Metric] = {}
        self._db = None
        if db_path is not None:
            self._db = sqlite3.connect(db_path, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS metric_history (name TEXT NOT NULL, "
                             "value REAL NOT NULL, ts REAL NOT NULL)")

    def track_metric(self, name: str, value: float = 1.0, timestamp: Optional[float] = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"metric name must be a non-empty str, got {name!r}")
        value = float(value)
        ts = self._clock() if timestamp is None else float(timestamp)
        with self._lock:
            m = self._metrics.get(name)
            if m is None:
                m = self._metrics[name] = _Metric()
            m.count += 1
            m.sum += value
            m.min = min(m.min, value)
            m.max = max(m.max, value)
            m.first_ts = ts if m.first_ts is None else min(m.first_ts, ts)
            m.last_ts = ts if m.last_ts is None else max(m.last_ts, ts)
            m.last = value
            m.recent.append(ts)
            self._trim(m, self._clock())
            if self._db is not None:
                with self._db:
                    self._db.execute("INSERT INTO metric_history VALUES (?, ?, ?)", (name, value, ts))

    def _trim(self, m: _Metric, now: float) -> None:
        while m.recent and m.recent[0] < now - self.rate_window:
            m.recent.popleft()

    def _snapshot(self, name: str, m: _Metric, now: float) -> Dict[str, Any]:
        self._trim(m, now)
        span = min(self.rate_window, max(now - (m.first_ts or now), 1e-9))
        span = max(span, 1.0) if m.count else span
        return {"name": name, "count": m.count, "sum": m.sum,
                "avg": m.sum / m.count if m.count else 0.0,
                "min": m.min if m.count else None, "max": m.max if m.count else None,
                "last": m.last, "first_timestamp": m.first_ts, "last_timestamp": m.last_ts,
                "rate_per_second": len(m.recent) / span}

    def get_metric(self, name: str) -> Optional[Dict[str, Any]]:
        """count, sum, avg, min, max, last, rate_per_second, first/last_timestamp; None if unknown."""
        with self._lock:
            m = self._metrics.get(name)
            return None if m is None else self._snapshot(name, m, self._clock())

    def get_all_metrics(self) -> Dict[str, Dict[str, Any]]:
        with self._lock:
            now = self._clock()
            return {n: self._snapshot(n, m, now) for n, m in sorted(self._metrics.items())}

    def get_history(self, name: str, limit: int = 1000) -> List[Tuple[float, float]]:
        """[(ts, value)] of `name`, oldest first (needs db_path)."""
        if self._db is None:
            raise ValueError("metric history needs StreamAnalytics(db_path=...)")
        with self._lock:
            rows = self._db.execute("SELECT ts, value FROM metric_history WHERE name = ? ORDER BY ts DESC LIMIT ?",
                                    (name, int(limit))).fetchall()
        return rows[::-1]

    def reset(self, name: Optional[str] = None) -> None:
        with self._lock:
            if name is None:
                self._metrics.clear()
            else:
                self._metrics.pop(name, None)

    def close(self) -> None:
        if self._db is not None:
            with self._lock:
                self._db.close()
                self._db = None
