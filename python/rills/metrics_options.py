"""MetricsStoreOptions: how the metrics database keeps telemetry and alerts."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Mapping, Optional, Union

__all__ = ["MetricsStoreOptions"]


@dataclasses.dataclass(frozen=True)
class MetricsStoreOptions:
    """Options of the engine's metrics store (RillEngine(metrics_options=...)).

    Every field left None keeps the store's default (in parentheses).

    Attributes:
        flush_interval_seconds: how often telemetry and alerts are written (1 s;
            RillEngine's metrics_flush_interval_seconds sets it too).
        telemetry_retention_seconds: telemetry, table/connector/task stats,
            business metrics and KPI history older than this are deleted (24 h).
        alert_retention_seconds: alerts in rill_alerts older than this are
            deleted (1 h, as the seed).
        rate_limit_window_seconds: identical engine alerts within this window
            are folded into one alert with a count (60 s; 0 disables).
        event_queue_capacity: engine events waiting to become alerts; beyond
            this they are dropped and counted (10,000).
        write_queue_capacity: flush batches waiting for the database writer;
            beyond this they are dropped and counted (64).
        latency_window_seconds: trailing window of the tick latency figures (60 s).
        max_kpi_history_rows: rows of each KPI result kept in rill_kpi_history (1,000).
        restore_alert_rules: reload the alert rules an earlier run stored in
            the same database file (True).
    """

    flush_interval_seconds: Optional[float] = None
    telemetry_retention_seconds: Optional[float] = None
    alert_retention_seconds: Optional[float] = None
    rate_limit_window_seconds: Optional[float] = None
    event_queue_capacity: Optional[int] = None
    write_queue_capacity: Optional[int] = None
    latency_window_seconds: Optional[float] = None
    max_kpi_history_rows: Optional[int] = None
    restore_alert_rules: Optional[bool] = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None or field.name == "restore_alert_rules":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{field.name} must be a number, got {type(value).__name__}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{field.name} must be a finite number >= 0, got {value!r}")
            if field.name.endswith(("_capacity", "_rows")) and (int(value) != value or value < 1):
                raise ValueError(f"{field.name} must be an integer >= 1, got {value!r}")
        for name in ("flush_interval_seconds", "telemetry_retention_seconds",
                     "alert_retention_seconds", "latency_window_seconds"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")

    @classmethod
    def of(cls, value: Union[None, "MetricsStoreOptions", Mapping[str, Any]]) -> "MetricsStoreOptions":
        """Return `value` as options: None (defaults), an instance, or a dict of field names.

        ValueError for an unknown name in a dict.
        """
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            names = {f.name for f in dataclasses.fields(cls)}
            unknown = sorted(set(value) - names)
            if unknown:
                raise ValueError(
                    f"unknown metrics option(s) {', '.join(map(repr, unknown))}; "
                    f"known: {', '.join(sorted(names))}"
                )
            return cls(**dict(value))
        raise TypeError(
            f"metrics_options must be a MetricsStoreOptions or a dict, got {type(value).__name__}"
        )

    def _core_options(self) -> Dict[str, Any]:
        """The fields set, except the flush interval (passed on its own)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not None and f.name != "flush_interval_seconds"
        }
