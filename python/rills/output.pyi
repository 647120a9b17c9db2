"""OutputAPI: read results out of a running engine."""

from pathlib import Path
from typing import Any, Callable, Dict, Optional, Union

import pyarrow as pa

from .engine import RillEngine

class OutputAPI:
    """Accessors for dashboards and downstream code."""

    engine: RillEngine
    def __init__(self, engine: RillEngine) -> None: ...
    def get_table(self, table_name: str) -> Optional[pa.Table]:
        """The table's rows (zero copy), or None."""
    def get_pandas(self, table_name: str) -> Any:
        """The table as a pandas DataFrame (needs pandas)."""
    def subscribe_table(self, table_name: str, callback: Callable[[str, pa.Table], None]) -> None:
        """Call callback(table_name, table) on every change."""
    def get_scalar(self, metric_name: str, default: Any = None) -> Any:
        """An engine counter or business metric by name."""
    def get_all_scalars(self) -> Dict[str, Any]:
        """Every counter and business metric."""
    def sink_to_file(self, table_name: str, file_path: Union[str, Path], format: str = "parquet") -> bool:
        """Write the table to parquet/csv/json/ndjson; False if unknown or empty."""
