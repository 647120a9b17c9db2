"""upsert_table(): the pure upsert of one pyarrow table into another (seed path)."""

from ..table import upsert_table

__all__ = ["upsert_table"]
