"""AggregationPipeline: group rows by a key and aggregate them, in stages.

    pipeline = AggregationPipeline("sales")
    pipeline.group_by("product")
    pipeline.aggregate("count", "*")
    pipeline.aggregate("sum", "amount")
    pipeline.aggregate("avg", "amount")
    pipeline.process([{"product": "Laptop", "amount": 999.99},
                      {"product": "Laptop", "amount": 1299.99},
                      {"product": "Mouse", "amount": 29.99}])
    # {'Laptop': {'count': 2, 'sum': 2299.98, 'avg': 1149.99},
    #  'Mouse': {'count': 1, 'sum': 29.99, 'avg': 29.99}}

Output names: the function's name ('count', 'sum', ...) when it is used once,
"<fn>_<column>" when the same function aggregates several columns, or
`name=` given to aggregate(). Without group_by the result is
{'all': {...}}. group_by may name several
columns (the key is then a tuple). Stages: `filter(fn)` drops rows before
grouping, `having(fn)` drops groups after, `then(fn)` maps the result dict;
stages run in order. `process_incremental(rows)` merges into running state
(aggregators' merge), and `store(PipelineStore)` writes each result.

Vectorized: `process_batch(data)` takes a pyarrow RecordBatch / Table (or
anything with the Arrow C stream interface) and, when every aggregation is a
built-in (count, sum, avg, min, max) and there is no `filter` stage, groups and
aggregates it in C++ (rill::toolkit::GroupAggregator) without a Python call
per row; it returns the same {key: {output: value}} dict as process().
Otherwise it falls back to process(data.to_pylist()).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from .. import _arrow, _core
from .aggregators import (AvgAggregator, CountAggregator, MaxAggregator, MinAggregator,
                          SumAggregator, make_aggregator)

__all__ = ["AggregationPipeline"]


class AggregationPipeline:
    """A group-by / aggregate pipeline (see the module docstring)."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise ValueError(f"pipeline name must be a non-empty str, got {name!r}")
        self.name = name
        self._keys: List[str] = []
        self._aggs: List[Tuple[Optional[str], str, Any]] = []  # (name, column, aggregator)
        self._pre: List[Callable[[Dict[str, Any]], bool]] = []
        self._post: List[Tuple[str, Callable]] = []
        self._state: Dict[Any, List[Any]] = {}
        self._lock = threading.Lock()
        self._store = None
        self.rows_processed = 0

    def group_by(self, *keys: str) -> "AggregationPipeline":
        flat: List[str] = []
        for k in keys:
            flat.extend([k] if isinstance(k, str) else list(k))
        self._keys = flat
        return self

    def aggregate(self, fn: Any, column: str = "*", name: Optional[str] = None) -> "AggregationPipeline":
        self._aggs.append((name, column, make_aggregator(fn, column)))
        return self

    def filter(self, fn: Callable[[Dict[str, Any]], bool]) -> "AggregationPipeline":
        self._pre.append(fn)
        return self

    def having(self, fn: Callable[[Dict[str, Any]], bool]) -> "AggregationPipeline":
        self._post.append(("having", fn))
        return self

    def then(self, fn: Callable[[Dict[Any, Dict[str, Any]]], Dict[Any, Dict[str, Any]]]) -> "AggregationPipeline":
        self._post.append(("then", fn))
        return self

    def store(self, store: Any) -> "AggregationPipeline":
        self._store = store
        return self

    def _names(self) -> List[str]:
        fn_names = [getattr(a, "name", type(a).__name__) for _, _, a in self._aggs]
        unnamed = [fn for (name, _, _), fn in zip(self._aggs, fn_names) if not name]
        out = []
        for (name, column, _), fn in zip(self._aggs, fn_names):
            if name:
                out.append(name)
            elif unnamed.count(fn) > 1:
                out.append(f"{fn}_{column}")
            else:
                out.append(fn)
        return out

    def _key(self, row: Dict[str, Any]) -> Any:
        if not self._keys:
            return "all"
        if len(self._keys) == 1:
            return row.get(self._keys[0])
        return tuple(row.get(k) for k in self._keys)

    def _accumulate(self, rows: Iterable[Dict[str, Any]], state: Dict[Any, List[Any]]) -> None:
        aggs = self._aggs
        for row in rows:
            if any(not f(row) for f in self._pre):
                continue
            self.rows_processed += 1
            key = self._key(row)
            slot = state.get(key)
            if slot is None:
                slot = state[key] = [a.init() for _, _, a in aggs]
            for i, (_, column, agg) in enumerate(aggs):
                slot[i] = agg.add(slot[i], None if column == "*" else row.get(column))

    def _finish(self, state: Dict[Any, List[Any]]) -> Dict[Any, Dict[str, Any]]:
        if not self._aggs:
            raise ValueError(f"pipeline '{self.name}' has no aggregation")
        names = self._names()
        result = {key: {n: agg.result(v) for n, (_, _, agg), v in zip(names, self._aggs, slot)}
                  for key, slot in state.items()}
        for kind, fn in self._post:
            if kind == "having":
                result = {k: v for k, v in result.items() if fn(v)}
            else:
                result = fn(result)
        if self._store is not None:
            self._store.save(self.name, result)
        return result

    def process(self, rows: Iterable[Dict[str, Any]]) -> Dict[Any, Dict[str, Any]]:
        """Aggregate `rows` from scratch and return {key: {output: value}}."""
        state: Dict[Any, List[Any]] = {}
        with self._lock:
            self._accumulate(rows, state)
            return self._finish(state)

    def _core_specs(self) -> Optional[List[Tuple[str, str, str]]]:
        """(output, function, column) for the C++ aggregator; None when a stage needs Python."""
        if self._pre or not self._aggs:
            return None
        builtin = {CountAggregator: "count", SumAggregator: "sum", AvgAggregator: "avg",
                   MinAggregator: "min", MaxAggregator: "max"}
        specs = []
        for output, (_, column, agg) in zip(self._names(), self._aggs):
            fn = builtin.get(type(agg))
            if fn is None:
                return None
            specs.append((output, fn, "*" if fn == "count" and getattr(agg, "star", False) else column))
        return specs

    def process_batch(self, data: Any) -> Dict[Any, Dict[str, Any]]:
        """Aggregate a pyarrow RecordBatch / Table from scratch (in C++ when every
        aggregation is built-in) and return {key: {output: value}}."""
        import pyarrow as pa

        table = data if isinstance(data, pa.Table) else pa.table(data)
        specs = self._core_specs()
        if specs is None:
            return self.process(table.to_pylist())
        with self._lock:
            core = _core.GroupAggregator(list(self._keys), specs)
            core.consume(table)
            out = _arrow.table_from_stream(core.finish())
            self.rows_processed += table.num_rows
            keys = [out.column(k).to_pylist() for k in self._keys]
            values = [(name, out.column(name).to_pylist()) for name, _, _ in specs]
            state_keys = (["all"] * out.num_rows if not keys else keys[0] if len(keys) == 1
                          else list(zip(*keys)))
            result = {key: {name: col[i] for name, col in values} for i, key in enumerate(state_keys)}
            for kind, fn in self._post:
                if kind == "having":
                    result = {k: v for k, v in result.items() if fn(v)}
                else:
                    result = fn(result)
            if self._store is not None:
                self._store.save(self.name, result)
            return result

    def process_incremental(self, rows: Iterable[Dict[str, Any]]) -> Dict[Any, Dict[str, Any]]:
        """Merge `rows` into the running state; return the results over everything so far."""
        with self._lock:
            partial: Dict[Any, List[Any]] = {}
            self._accumulate(rows, partial)
            for key, slot in partial.items():
                old = self._state.get(key)
                self._state[key] = slot if old is None else [
                    agg.merge(a, b) for (_, _, agg), a, b in zip(self._aggs, old, slot)]
            return self._finish(self._state)

    def reset(self) -> None:
        with self._lock:
            self._state.clear()
            self.rows_processed = 0

    def __repr__(self) -> str:
        return f"<AggregationPipeline(name={self.name!r}, group_by={self._keys!r}, aggregations={self._names()!r})>"
