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

The statistics are kept by the C++ rill::toolkit::StreamAnalytics (the one
the network server serves under /api/v1/analytics/metrics).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import _core

__all__ = ["StreamAnalytics"]


class StreamAnalytics:
    """Named metrics with running statistics (see the module docstring)."""

    def __init__(self, db_path: Optional[str] = None, rate_window: float = 60.0,
                 clock: Callable[[], float] = time.time):
        self.rate_window = float(rate_window)
        self._clock = clock
        self._core = _core.StreamAnalytics(self.rate_window, None if clock is time.time else clock)
        self._lock = threading.Lock()
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
        self._core.track(name, value, ts)
        if self._db is not None:
            with self._lock, self._db:
                self._db.execute("INSERT INTO metric_history VALUES (?, ?, ?)", (name, value, ts))

    def get_metric(self, name: str) -> Optional[Dict[str, Any]]:
        """count, sum, avg, min, max, last, rate_per_second, first/last_timestamp; None if unknown."""
        return self._core.get(name)

    def get_all_metrics(self) -> Dict[str, Dict[str, Any]]:
        return self._core.all()

    def get_history(self, name: str, limit: int = 1000) -> List[Tuple[float, float]]:
        """[(ts, value)] of `name`, oldest first (needs db_path)."""
        if self._db is None:
            raise ValueError("metric history needs StreamAnalytics(db_path=...)")
        with self._lock:
            rows = self._db.execute("SELECT ts, value FROM metric_history WHERE name = ? ORDER BY ts DESC LIMIT ?",
                                    (name, int(limit))).fetchall()
        return rows[::-1]

    def reset(self, name: Optional[str] = None) -> None:
        self._core.reset(name or "")

    def close(self) -> None:
        if self._db is not None:
            with self._lock:
                self._db.close()
                self._db = None
