"""OutputAPI: read results out of a running engine."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Union

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as papq

if TYPE_CHECKING:
    from .engine import RillEngine

__all__ = ["OutputAPI"]


class OutputAPI:
    """Accessors for dashboards and downstream code: tables, scalars, subscriptions, file sinks."""

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

    def sink_to_file(self, table_name: str, file_path: Union[str, Path], format: str = "parquet") -> bool:
        """Write the table's current rows to `file_path`; return True when written.

        `format` is "parquet", "csv", "json" or "ndjson" (json is written as
        newline-delimited JSON, one object per row, like ndjson). Parent
        folders are created; the file is written beside the target and renamed
        over it, so readers never see a partial file. Returns False (writing
        nothing) when the table is unknown or has no rows. ValueError for an
        unknown format; OSError when the file cannot be written.
        """
        return sink_table(self.get_table(table_name), file_path, format)


_SINK_FORMATS = ("parquet", "csv", "json", "ndjson")


def _json_default(value: Any) -> Any:
    # Values json cannot encode (dates, decimals, bytes) are written as text.
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _write_ndjson(table: pa.Table, path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for batch in table.to_batches(max_chunksize=8192):
            for row in batch.to_pylist():
                out.write(json.dumps(row, default=_json_default))
                out.write("\n")


def sink_table(table: Optional[pa.Table], file_path: Union[str, Path], format: str) -> bool:
    """Write `table` to `file_path` as parquet, csv, json or ndjson; see OutputAPI.sink_to_file."""
    if not isinstance(format, str) or format.lower() not in _SINK_FORMATS:
        raise ValueError(f"Unsupported sink format: {format!r} (use one of {', '.join(_SINK_FORMATS)})")
    if table is None or table.num_rows == 0:
        return False
    fmt = format.lower()
    path = Path(file_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the target and renamed over it: readers never see half a file.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    os.close(fd)
    try:
        if fmt == "parquet":
            papq.write_table(table, tmp)
        elif fmt == "csv":
            pacsv.write_csv(table, tmp)
        else:  # json and ndjson: one JSON object per line
            _write_ndjson(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True
