"""MetricsRegistry: engine counters and user-defined business metrics."""

from __future__ import annotations

import json
import math
import numbers
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

import pyarrow as pa

if TYPE_CHECKING:
    from .engine import RillEngine

__all__ = ["MetricsRegistry"]

Evaluator = Callable[["RillEngine"], Any]


def _as_float(value: Any) -> Optional[float]:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if hasattr(value, "as_py"):  # a pyarrow scalar
        return _as_float(value.as_py())
    return None


class MetricsRegistry:
    """Business metrics evaluated on every tick, plus the engine's counters.

    An evaluator is called as `evaluator(engine)` on the engine's loop thread;
    its latest return value (any Python object) is kept in `business_metrics`,
    and numeric values also reach the engine's metrics in C++. An evaluator
    that raises is logged and recorded as an engine event; its entry then
    holds "Error evaluating metric: <message>".
    """

    def __init__(self, engine: Optional["RillEngine"] = None):
        self._engine_ref = weakref.ref(engine) if engine is not None else None
        self._lock = threading.Lock()
        self._evaluators: Dict[str, Evaluator] = {}
        self._values: Dict[str, Any] = {}
        self._steps = _StepCounters()

    def _engine(self) -> Optional["RillEngine"]:
        return self._engine_ref() if self._engine_ref is not None else None

    def register_metric(self, name: str, evaluator: Evaluator) -> None:
        """Evaluate `evaluator(engine)` on every tick under `name` (replacing an earlier one)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a business metric needs a non-empty name, got {name!r}")
        if not callable(evaluator):
            raise TypeError(f"evaluator must be callable, got {type(evaluator).__name__}")
        with self._lock:
            replaced = name in self._evaluators
            self._evaluators[name] = evaluator
        engine = self._engine()
        if engine is not None:
            if replaced:
                engine._core.unregister_business_metric(name)
            engine._core.register_business_metric(name, _thunk(weakref.ref(self), engine._self_ref, name, evaluator))

    def unregister_metric(self, name: str) -> None:
        """Stop evaluating `name`. Unknown names are ignored."""
        with self._lock:
            known = self._evaluators.pop(name, None) is not None
            self._values.pop(name, None)
        engine = self._engine()
        if known and engine is not None:
            engine._core.unregister_business_metric(name)

    @property
    def business_metrics(self) -> Dict[str, Any]:
        """Latest value of every business metric, by name."""
        with self._lock:
            return dict(self._values)

    def _store(self, name: str, value: Any) -> None:
        with self._lock:
            if name in self._evaluators:
                self._values[name] = value

    def evaluate_business_metrics(self, engine: Optional["RillEngine"] = None) -> Dict[str, Any]:
        """Evaluate every metric now (in the calling thread) and return the values."""
        engine = engine if engine is not None else self._engine()
        with self._lock:
            evaluators = dict(self._evaluators)
        for name, evaluator in evaluators.items():
            try:
                self._store(name, evaluator(engine))
            except Exception as exc:  # reported like the tick does, without raising
                self._store(name, f"Error evaluating metric: {exc}")
        return self.business_metrics

    def record_step(self, records_in_batch: int, latency_ms: float) -> None:
        """Count one completed micro-batch of `records_in_batch` records taking `latency_ms`.

        The engine counts its own ticks in C++; this is for code that runs
        its own batches (or a registry without an engine). Its figures are
        added to the engine's: total_records_processed grows by
        `records_in_batch`, last_batch_records / last_batch_latency_ms become
        these values, avg_batch_latency_ms and records_per_second are
        smoothed as the seed does (new = 0.9 old + 0.1 latency, 0.8 old + 0.2
        rate). ValueError for negative values.
        """
        if int(records_in_batch) < 0 or float(latency_ms) < 0:
            raise ValueError(
                f"record_step() needs records_in_batch >= 0 and latency_ms >= 0, "
                f"got {records_in_batch}, {latency_ms}"
            )
        with self._lock:
            self._steps.record(int(records_in_batch), float(latency_ms))

    def get_system_metrics(self, engine: Optional["RillEngine"] = None) -> Dict[str, Any]:
        """Return the engine's counters (see RillEngine.get_metrics), without business metrics.

        Batches counted with record_step() are included. Without an engine:
        the record_step() figures and an empty table_row_counts.
        """
        engine = engine if engine is not None else self._engine()
        with self._lock:
            steps = self._steps.copy()
        if engine is None:
            return steps.as_metrics()
        return steps.merge_into(engine._system_metrics())

    def get_metrics_arrow_table(self, engine: Optional["RillEngine"] = None) -> pa.Table:
        """Return one row of the current figures as a pyarrow Table (the seed's columns).

        Columns: timestamp (float64, unix seconds), cpu_usage (float64, host
        CPU %), total_memory and used_memory (int64, host bytes),
        pyarrow_allocated_bytes and pyarrow_max_memory (int64, the tables'
        Arrow pool now and at peak), last_batch_records,
        total_records_processed (int64), last_batch_latency_ms,
        avg_batch_latency_ms, records_per_second (float64), business_metrics
        (string: JSON object of the business metrics; values JSON cannot hold
        are written as text). The engine's live table rill_metrics holds the
        same figures and more.
        """
        engine = engine if engine is not None else self._engine()
        metrics = self.get_all_metrics(engine)
        host = _latest_host_figures(engine)
        row = {
            "timestamp": time.time(),
            "cpu_usage": float(host.get("cpu_usage", 0.0)),
            "total_memory": int(host.get("total_memory", 0)),
            "used_memory": int(host.get("used_memory", 0)),
            "pyarrow_allocated_bytes": int(metrics.get("arrow_allocated_bytes", pa.total_allocated_bytes())),
            "pyarrow_max_memory": int(host.get("arrow_peak_allocated_bytes", 0)
                                      or pa.default_memory_pool().max_memory() or 0),
            "last_batch_records": int(metrics.get("last_batch_records", 0)),
            "total_records_processed": int(metrics.get("total_records_processed", 0)),
            "last_batch_latency_ms": float(metrics.get("last_batch_latency_ms", 0.0)),
            "avg_batch_latency_ms": float(metrics.get("avg_batch_latency_ms", 0.0)),
            "records_per_second": float(metrics.get("records_per_second", 0.0)),
            "business_metrics": json.dumps(metrics.get("business_metrics", {}), default=str),
        }
        return pa.Table.from_pylist([row], schema=METRICS_TABLE_SCHEMA)

    def get_all_metrics(self, engine: Optional["RillEngine"] = None) -> Dict[str, Any]:
        """Return the engine's counters plus "business_metrics"."""
        metrics = self.get_system_metrics(engine)
        metrics["business_metrics"] = self.business_metrics
        return metrics

    def __repr__(self) -> str:
        return f"<MetricsRegistry(metrics={sorted(self._evaluators)!r})>"


def _thunk(registry_ref, engine_ref, name: str, evaluator: Evaluator) -> Callable[[], Optional[float]]:
    # Weak references only: the engine's C++ side holds this function.
    def run() -> Optional[float]:
        registry = registry_ref()
        try:
            value = evaluator(engine_ref())
        except Exception as exc:
            if registry is not None:
                registry._store(name, f"Error evaluating metric: {exc}")
            raise
        if registry is not None:
            registry._store(name, value)
        return _as_float(value)

    return run


#: The columns of MetricsRegistry.get_metrics_arrow_table(), as the seed has them.
METRICS_TABLE_SCHEMA = pa.schema([
    ("timestamp", pa.float64()),
    ("cpu_usage", pa.float64()),
    ("total_memory", pa.int64()),
    ("used_memory", pa.int64()),
    ("pyarrow_allocated_bytes", pa.int64()),
    ("pyarrow_max_memory", pa.int64()),
    ("last_batch_records", pa.int64()),
    ("total_records_processed", pa.int64()),
    ("last_batch_latency_ms", pa.float64()),
    ("avg_batch_latency_ms", pa.float64()),
    ("records_per_second", pa.float64()),
    ("business_metrics", pa.string()),
])


def _latest_host_figures(engine: Optional["RillEngine"]) -> Dict[str, Any]:
    # Host CPU/memory as the engine's last tick sampled them (rill_metrics).
    if engine is None:
        return {}
    try:
        rows = engine.query_sql(
            "SELECT cpu_usage, total_memory, used_memory, arrow_peak_allocated_bytes "
            "FROM rill_metrics"
        ).to_pylist()
    except (ValueError, KeyError, RuntimeError):
        return {}
    return {k: v for k, v in rows[0].items() if v is not None} if rows else {}


class _StepCounters:
    """Batches counted through MetricsRegistry.record_step (the seed's arithmetic)."""

    def __init__(self) -> None:
        self.batches = 0
        self.total_records = 0
        self.last_records = 0
        self.last_latency_ms = 0.0
        self.avg_latency_ms = 0.0
        self.records_per_second = 0.0
        self.last_at = time.perf_counter()

    def copy(self) -> "_StepCounters":
        other = _StepCounters.__new__(_StepCounters)
        other.__dict__.update(self.__dict__)
        return other

    def record(self, records: int, latency_ms: float) -> None:
        now = time.perf_counter()
        elapsed, self.last_at = now - self.last_at, now
        self.batches += 1
        self.total_records += records
        self.last_records = records
        self.last_latency_ms = latency_ms
        first = self.batches == 1
        self.avg_latency_ms = latency_ms if first else 0.9 * self.avg_latency_ms + 0.1 * latency_ms
        if elapsed > 0:
            rate = records / elapsed
            self.records_per_second = rate if first else 0.8 * self.records_per_second + 0.2 * rate

    def as_metrics(self) -> Dict[str, Any]:
        return {
            "total_records_processed": self.total_records,
            "last_batch_records": self.last_records,
            "last_batch_latency_ms": round(self.last_latency_ms, 3),
            "avg_batch_latency_ms": round(self.avg_latency_ms, 3),
            "records_per_second": round(self.records_per_second, 2),
            "table_row_counts": {},
        }

    def merge_into(self, metrics: Dict[str, Any]) -> Dict[str, Any]:
        # The engine's counters plus the batches recorded here.
        if self.batches == 0:
            return metrics
        metrics["total_records_processed"] += self.total_records
        metrics["last_batch_records"] = self.last_records
        metrics["last_batch_latency_ms"] = self.last_latency_ms
        metrics["records_per_second"] = metrics["records_per_second"] + self.records_per_second
        ticks = metrics.get("ticks", 0)
        if ticks == 0 or not math.isfinite(metrics["avg_batch_latency_ms"]):
            metrics["avg_batch_latency_ms"] = self.avg_latency_ms
        return metrics
