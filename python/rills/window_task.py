"""Event-time windows as an engine task (tumbling, hopping/sliding, session).

    from rills import RillEngine, WindowTask

    engine.add_window_task(WindowTask(
        "per_minute", source_table="orders", output_table="orders_per_minute",
        time_column="ts", window="tumbling", size_seconds=60,
        group_by="product",
        aggregations={"orders": "count(*)", "revenue": "sum(amount)",
                      "p90": "quantile_cont(amount, 0.9)"},
        allowed_lateness_seconds=5))

Each tick the task reads the rows written to `source_table` since its last
run (cost proportional to the new rows), assigns them to windows of the event
time `time_column` (unix seconds as a number, a timestamp or a date; None =
processing time, the rows' write time), grouped by `group_by`, and keeps the
aggregates incrementally in C++.

Aggregations: a dict {output_column: expression} or a list of
(column, function) pairs (output "<column>_<function>", as TableJoinTask).
Incremental functions: count(*), count(x), sum, avg/mean, min, max, first,
last (by event time), count_distinct(x) / count(DISTINCT x), and
approx_count_distinct(x) (HyperLogLog, ~1.6% error). Any other DuckDB
aggregate expression works too (median(x), quantile_cont(x, 0.9), sum(a*b),
...): the window then keeps its rows and DuckDB computes the value on
emission.

Watermark = max event time seen - allowed_lateness_seconds. With
emit="on_close" a window is appended to `output_table` (columns window_start,
window_end, the group_by columns, the aggregations) once the watermark passes
its end; with emit="on_update" every changed window is upserted into
`output_table`, keyed by (window_start, window_end, group_by...), with
`is_final` true on its last write. Rows behind the watermark, and rows without
an event time, are kept in `late_table` (default "<output_table>_late") with
late_reason, event_time, watermark and task columns and counted in stats().
With idle_timeout_seconds the watermark follows processing time while the
source is idle, so the last windows close.

A snapshot (keyed) source is read as its stream of writes: each upsert of a
key is one more event (earlier versions are not retracted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _arrow, _core
from .retention import RetentionPolicy

if TYPE_CHECKING:
    from .engine import RillEngine

__all__ = ["WindowTask", "normalize_aggregations"]

Aggregations = Union[Dict[str, str], Sequence[Tuple[str, str]]]

_WINDOWS = ("tumbling", "hopping", "sliding", "session")
_EMITS = ("on_close", "on_update")


def normalize_aggregations(aggregations: Aggregations) -> List[Tuple[str, str]]:
    """Return [(output, expression)] from a dict {output: expression} or a list
    of (column, function) pairs ("count" of "*" is named "count").

    ValueError for an empty or malformed specification.
    """
    out: List[Tuple[str, str]] = []
    if isinstance(aggregations, dict):
        for name, expr in aggregations.items():
            if not isinstance(name, str) or not isinstance(expr, str) or not name or not expr:
                raise ValueError(f"aggregations must map output names to expressions, got {name!r}: {expr!r}")
            out.append((name, expr))
    else:
        for item in aggregations or []:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise ValueError(f"aggregations must be (column, function) pairs, got {item!r}")
            column, fn = str(item[0]), str(item[1])
            if column == "*":
                out.append((fn, f"{fn}(*)"))
            else:
                quoted = '"' + column.replace('"', '""') + '"'
                out.append((f"{column}_{fn}", f"{fn}({quoted})"))
    if not out:
        raise ValueError("a window needs at least one aggregation")
    return out


class WindowTask:
    """An event-time window task; add it with engine.add_window_task(task)."""

    def __init__(
        self,
        name: str,
        source_table: str,
        output_table: str,
        time_column: Optional[str] = None,
        window: str = "tumbling",
        size_seconds: float = 60.0,
        slide_seconds: Optional[float] = None,
        gap_seconds: Optional[float] = None,
        group_by: Optional[Union[str, List[str]]] = None,
        aggregations: Optional[Aggregations] = None,
        allowed_lateness_seconds: float = 0.0,
        emit: str = "on_close",
        idle_timeout_seconds: float = 0.0,
        retention_policy: Optional[RetentionPolicy] = None,
        late_table: Optional[str] = None,
        late_max_rows: int = 100000,
        interval_seconds: float = 0.0,
    ):
        """ValueError for empty names, an unknown window or emit mode, bad sizes,
        or malformed aggregations (checked again in C++ when added)."""
        for arg, value in (("name", name), ("source_table", source_table), ("output_table", output_table)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"WindowTask {arg} must be a non-empty str, got {value!r}")
        if str(window).lower() not in _WINDOWS:
            raise ValueError(f"unknown window {window!r}: expected tumbling, hopping (sliding) or session")
        if str(emit).lower() not in _EMITS:
            raise ValueError(f"unknown emit {emit!r}: expected on_close or on_update")
        if retention_policy is not None and not isinstance(retention_policy, RetentionPolicy):
            raise TypeError("retention_policy must be a RetentionPolicy")
        self.name = name
        self.source_table = source_table
        self.output_table = output_table
        self.time_column = time_column
        self.window = str(window).lower()
        self.size_seconds = float(size_seconds)
        self.slide_seconds = None if slide_seconds is None else float(slide_seconds)
        self.gap_seconds = None if gap_seconds is None else float(gap_seconds)
        self.group_by = _arrow.key_list(group_by)
        self.aggregations = normalize_aggregations(aggregations if aggregations is not None else {"count": "count(*)"})
        self.allowed_lateness_seconds = float(allowed_lateness_seconds)
        self.emit = str(emit).lower()
        self.idle_timeout_seconds = float(idle_timeout_seconds)
        self.retention_policy = retention_policy
        self.late_table = late_table or f"{output_table}_late"
        self.late_max_rows = int(late_max_rows)
        self.interval_seconds = float(interval_seconds)
        self._core: Any = self._make_core()  # validates in C++ now

    def _make_core(self) -> Any:
        retention = self.retention_policy
        return _core.make_window_task(
            name=self.name,
            source_table=self.source_table,
            output_table=self.output_table,
            time_column=self.time_column,
            window=self.window,
            size_seconds=self.size_seconds,
            slide_seconds=self.slide_seconds or 0.0,
            gap_seconds=self.gap_seconds or 0.0,
            group_by=self.group_by,
            aggregations=self.aggregations,
            allowed_lateness_seconds=self.allowed_lateness_seconds,
            emit=self.emit,
            idle_timeout_seconds=self.idle_timeout_seconds,
            max_rows=None if retention is None else retention.max_rows,
            max_age_seconds=None if retention is None else retention.max_age_seconds,
            late_table=self.late_table,
            late_max_rows=self.late_max_rows,
            interval_seconds=self.interval_seconds,
        )

    def stats(self) -> Dict[str, Any]:
        """Counters and state size: rows_in, late_rows, null_time_rows, late_rows_kept,
        windows_open, groups_open, groups_emitted, updates_emitted, state_bytes,
        watermark, max_event_time."""
        return self._core.stats()

    def __repr__(self) -> str:
        return (
            f"<WindowTask(name={self.name!r}, window={self.window!r}, source={self.source_table!r}, "
            f"output={self.output_table!r})>"
        )


def attach_window_task(engine: "RillEngine", task: WindowTask) -> None:
    """Add `task` to `engine` (used by RillEngine.add_window_task)."""
    if not isinstance(task, WindowTask):
        raise TypeError(f"add_window_task() takes a WindowTask, got {type(task).__name__}")
    _core.add_window_task(engine._core, task._core)
    engine.__dict__.setdefault("_window_tasks", {})[task.name] = task


def detach_window_task(engine: "RillEngine", task: Union[WindowTask, str]) -> None:
    """Remove a window task (or the task of that name); unknown names are ignored."""
    name = task if isinstance(task, str) else task.name
    tasks = engine.__dict__.setdefault("_window_tasks", {})
    if tasks.pop(name, None) is not None:
        _core.remove_window_task(engine._core, name)
        # A removed task can be added again: give the Python object a fresh core.
        if not isinstance(task, str):
            task._core = task._make_core()
