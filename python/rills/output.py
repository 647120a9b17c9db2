"""OutputAPI: read results out of a running engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

import pyarrow as pa

if TYPE_CHECKING:
    from .engine import RillEngine

__all__ = ["OutputAPI"]


class OutputAPI:
    """Accessors for dashboards and downstream code: tables, scalars, subscriptions."""

    def __init__(self, engine: "RillEngine"):
        self.engine = engine

    def get_table(self, table_name: str) -> Optional[pa.Table]:
        """Return the table's current rows (zero copy), or None if there is no such table."""
        table = self.engine.get_table(table_name)
        return None if table is None else table.to_arrow()

    def get_pandas(self, table_name: str) -> Any:
        """Return the table as a pandas DataFrame (empty if unknown). Needs pandas."""
        import pandas as pd  # optional dependency

        table = self.get_table(table_name)
        return pd.DataFrame() if table is None else table.to_pandas()

    def subscribe_table(self, table_name: str, callback: Callable[[str, pa.Table], None]) -> None:
        """Call `callback(table_name, table)` whenever the table changes."""
        self.engine.subscribe(table_name, callback)

    def get_scalar(self, metric_name: str, default: Any = None) -> Any:
        """Return an engine counter or a business metric by name, or `default`."""
        metrics = self.engine.get_metrics()
        if metric_name in metrics:
            return metrics[metric_name]
        return metrics.get("business_metrics", {}).get(metric_name, default)

    def get_all_scalars(self) -> Dict[str, Any]:
        """Return every engine counter and business metric."""
        return self.engine.get_metrics()
