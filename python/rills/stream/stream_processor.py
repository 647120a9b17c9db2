"""StreamProcessor: a chain of map / filter / reduce steps over events.

    processor = StreamProcessor("my-processor")
    processor.map(lambda x: {**x, "value": x["value"] * 2})
    processor.filter(lambda x: x["value"] > 10)
    processor.process_batch([{"value": 5}, {"value": 10}, {"value": 15}])
    # [{'value': 20}, {'value': 30}]

Steps run in the order they were added. `reduce(fn, initial)` folds every
event that reaches it into an accumulator (read it with `result()`), and
passes the event on. Vectorized steps (`map_arrow`, `filter_arrow`) take and
return pyarrow RecordBatches / boolean masks and run over whole batches in
Arrow's C++ kernels (`process_arrow(batch)`), with no per-row Python call.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional

import pyarrow as pa

__all__ = ["StreamProcessor"]

_DROP = object()


class StreamProcessor:
    """An ordered chain of transformations (see the module docstring)."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise ValueError(f"processor name must be a non-empty str, got {name!r}")
        self.name = name
        self._steps: List[tuple] = []
        self._arrow_steps: List[tuple] = []
        self._lock = threading.Lock()
        self._reducers: List[Dict[str, Any]] = []
        self._processed = 0
        self._emitted = 0
        self._filtered = 0
        self._errors = 0
        self._started = time.time()

    # Building -----------------------------------------------------------------------

    def map(self, fn: Callable[[Any], Any]) -> "StreamProcessor":
        self._check(fn)
        self._steps.append(("map", fn))
        return self

    def filter(self, fn: Callable[[Any], bool]) -> "StreamProcessor":
        self._check(fn)
        self._steps.append(("filter", fn))
        return self

    def reduce(self, fn: Callable[[Any, Any], Any], initial: Any = None) -> "StreamProcessor":
        self._check(fn)
        state = {"fn": fn, "initial": initial, "value": initial}
        self._reducers.append(state)
        self._steps.append(("reduce", state))
        return self

    def map_arrow(self, fn: Callable[[pa.RecordBatch], pa.RecordBatch]) -> "StreamProcessor":
        """Add a vectorized map: fn(RecordBatch) -> RecordBatch."""
        self._check(fn)
        self._arrow_steps.append(("map", fn))
        return self

    def filter_arrow(self, fn: Callable[[pa.RecordBatch], Any]) -> "StreamProcessor":
        """Add a vectorized filter: fn(RecordBatch) -> boolean mask (pyarrow array)."""
        self._check(fn)
        self._arrow_steps.append(("filter", fn))
        return self

    @staticmethod
    def _check(fn: Any) -> None:
        if not callable(fn):
            raise TypeError(f"expected a callable, got {type(fn).__name__}")

    # Running ------------------------------------------------------------------------

    def process(self, event: Any) -> Optional[Any]:
        """Run one event through the chain; return the result, or None if filtered out."""
        out = self._run(event)
        return None if out is _DROP else out

    def process_batch(self, events: List[Any]) -> List[Any]:
        """Run events through the chain; return the results that passed every filter."""
        results = []
        for event in events:
            out = self._run(event)
            if out is not _DROP:
                results.append(out)
        return results

    def process_arrow(self, batch: Any) -> pa.RecordBatch:
        """Run a pyarrow RecordBatch / Table through the vectorized steps."""
        if isinstance(batch, pa.Table):
            batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else pa.RecordBatch.from_pylist([], schema=batch.schema)
        rows_in = batch.num_rows
        for kind, fn in self._arrow_steps:
            if kind == "map":
                batch = fn(batch)
            else:
                batch = batch.filter(fn(batch))
        with self._lock:
            self._processed += rows_in
            self._emitted += batch.num_rows
            self._filtered += rows_in - batch.num_rows
        return batch

    def _run(self, event: Any) -> Any:
        try:
            for kind, fn in self._steps:
                if kind == "map":
                    event = fn(event)
                elif kind == "filter":
                    if not fn(event):
                        with self._lock:
                            self._processed += 1
                            self._filtered += 1
                        return _DROP
                else:
                    fn["value"] = fn["fn"](fn["value"], event)
        except Exception:
            with self._lock:
                self._processed += 1
                self._errors += 1
            raise
        with self._lock:
            self._processed += 1
            self._emitted += 1
        return event

    def result(self, index: int = -1) -> Any:
        """The accumulator of a reduce step (the last one by default)."""
        if not self._reducers:
            raise ValueError(f"processor '{self.name}' has no reduce step")
        return self._reducers[index]["value"]

    def reset(self) -> None:
        """Reset reduce accumulators and counters."""
        with self._lock:
            for r in self._reducers:
                r["value"] = r["initial"]
            self._processed = self._emitted = self._filtered = self._errors = 0
            self._started = time.time()

    def get_stats(self) -> Dict[str, Any]:
        with self._lock:
            elapsed = max(time.time() - self._started, 1e-9)
            return {"name": self.name, "steps": len(self._steps) + len(self._arrow_steps),
                    "processed": self._processed, "emitted": self._emitted,
                    "filtered": self._filtered, "errors": self._errors,
                    "events_per_second": self._processed / elapsed}

    def __repr__(self) -> str:
        return f"<StreamProcessor(name={self.name!r}, steps={len(self._steps) + len(self._arrow_steps)})>"
