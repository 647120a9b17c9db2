"""PipelineStore: pipeline results in SQLite (one row per pipeline run and key)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from typing import Any, Dict, List

__all__ = ["PipelineStore"]


class PipelineStore:
    def __init__(self, path: str = "pipelines.db"):
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS pipeline_results (pipeline TEXT NOT NULL, "
                           "run_at REAL NOT NULL, group_key TEXT, results TEXT NOT NULL)")

    def save(self, pipeline: str, results: Dict[Any, Dict[str, Any]]) -> None:
        now = time.time()
        rows = [(pipeline, now, json.dumps(k, default=str), json.dumps(v, default=str))
                for k, v in results.items()]
        with self._lock, self._conn:
            self._conn.executemany("INSERT INTO pipeline_results VALUES (?, ?, ?, ?)", rows)

    def latest(self, pipeline: str) -> Dict[Any, Dict[str, Any]]:
        """The results of the pipeline's last run (keys as JSON decoded; tuples become lists)."""
        with self._lock:
            row = self._conn.execute("SELECT max(run_at) FROM pipeline_results WHERE pipeline = ?",
                                     (pipeline,)).fetchone()
            if row[0] is None:
                return {}
            rows = self._conn.execute("SELECT group_key, results FROM pipeline_results WHERE pipeline = ? "
                                      "AND run_at = ?", (pipeline, row[0])).fetchall()
        out = {}
        for k, v in rows:
            key = json.loads(k)
            out[tuple(key) if isinstance(key, list) else key] = json.loads(v)
        return out

    def history(self, pipeline: str) -> List[Dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute("SELECT run_at, group_key, results FROM pipeline_results WHERE "
                                      "pipeline = ? ORDER BY run_at", (pipeline,)).fetchall()
        return [{"run_at": r, "key": json.loads(k), "results": json.loads(v)} for r, k, v in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
