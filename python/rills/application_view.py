"""Global views of a scaled-out application (issue 28, docs/scale-out.md).

    engine = RillEngine(app_id="orders-app", instance_id="node-1", bootstrap_servers=...)
    ... a Kafka source with metadata_columns=True into a keyed table "orders" ...
    view = ApplicationView("revenue", "SELECT region, sum(price) AS revenue, count(*) AS n "
                                      "FROM orders GROUP BY region")
    engine.add_application_view(view)
    view.to_arrow()      # the answer over every instance of the application

The same as `CREATE MATERIALIZED VIEW revenue WITH (scope = 'global') AS ...`:
each instance keeps the query's partial aggregates per input partition, publishes
them to the compacted topic "<app_id>-revenue-partials" in its transactions, and
reads every instance's partials back into the view. The query is one SELECT over
one table with GROUP BY columns and count, sum, min, max and avg.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

import pyarrow as pa

if TYPE_CHECKING:
    from .engine import RillEngine

_INCREMENTAL = {"auto": "auto", True: "true", False: "false"}


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class ApplicationView:
    """A materialized view over every instance of the engine's application."""

    def __init__(self, name: str, query: str, interval_seconds: float = 1.0,
                 incremental: Union[str, bool] = "auto"):
        if not isinstance(name, str) or not name:
            raise ValueError("ApplicationView needs a name")
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"ApplicationView {name!r} needs a query")
        if not interval_seconds or interval_seconds <= 0:
            raise ValueError(f"ApplicationView {name!r}: interval_seconds must be > 0, "
                             f"got {interval_seconds!r}")
        if incremental not in _INCREMENTAL:
            raise ValueError(f"ApplicationView {name!r}: incremental must be 'auto', True or "
                             f"False, got {incremental!r}")
        self.name = name
        self.query = query.strip().rstrip(";")
        self.interval_seconds = float(interval_seconds)
        self.incremental = incremental
        self._engine: Optional["RillEngine"] = None

    def ddl(self) -> str:
        """The CREATE statement that declares this view."""
        return (f"CREATE MATERIALIZED VIEW {_quote_ident(self.name)} WITH (scope = 'global', "
                f"interval_seconds = {self.interval_seconds!r}, "
                f"incremental = '{_INCREMENTAL[self.incremental]}') AS {self.query}")

    def to_arrow(self) -> pa.Table:
        """The view's rows now (the merged answer of every instance)."""
        if self._engine is None:
            raise RuntimeError(f"ApplicationView {self.name!r} is not added to an engine")
        return self._engine.query_sql(f"SELECT * FROM {_quote_ident(self.name)}")

    def __repr__(self) -> str:
        return f"ApplicationView({self.name!r}, {self.query!r})"
