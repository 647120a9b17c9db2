"""rills: the Python face of Rill, a single-node micro-batching streaming engine.

Events pushed through connectors are applied every tick, in C++, to live
Arrow tables (upsert by primary key or append with mandatory retention);
DuckDB SQL and join tasks run over those tables without copying them, and
pyarrow data goes in and out through the Arrow C stream interface, zero copy.

    import pyarrow as pa
    from rills import RillEngine, MemoryConnector, schema

    engine = RillEngine(trigger_interval_ms=200)
    engine.register_table("orders", schema=schema(
        [("order_id", pa.int64()), ("amount", pa.float64())], primary_key="order_id"))
    orders = MemoryConnector(target_table="orders")
    engine.add_connector(orders)
    orders.push({"order_id": [1, 2], "amount": [10.0, 20.0]})
    engine.step()
    print(engine.query_sql("SELECT SUM(amount) FROM orders"))
"""

import pyarrow as _pyarrow  # noqa: F401  (loads libarrow before the extension)

from . import _core  # noqa: F401
from .connectors import BaseConnector, MemoryConnector
from .checkpoint import Checkpointer
from .engine import RillEngine
from .metrics import MetricsRegistry
from .output import OutputAPI
from .retention import RetentionPolicy
from .schema import estimate_schema_row_size, extract_mode, extract_primary_key, schema
from .table import RillTable, upsert_table
from .tasks import DuckDBBridge, ScheduledSQLTask, TableJoinTask

__version__ = "0.1.0"

__all__ = [
    "RillEngine",
    "Checkpointer",
    "RillTable",
    "schema",
    "extract_primary_key",
    "extract_mode",
    "estimate_schema_row_size",
    "RetentionPolicy",
    "BaseConnector",
    "MemoryConnector",
    "ScheduledSQLTask",
    "TableJoinTask",
    "DuckDBBridge",
    "MetricsRegistry",
    "OutputAPI",
    "upsert_table",
]

# Global views of a scaled-out application (issue 28).
from .application_view import ApplicationView  # noqa: E402

__all__ += ["ApplicationView"]

# Event-time windows (issue 13).
from .window_task import WindowTask  # noqa: E402

__all__ += ["WindowTask"]

# Seed 001's toolkit (issue 13).
from .aggregation import AggregationPipeline, PipelineStore  # noqa: E402
from .analytics import AnalyticsEngine, StreamAnalytics  # noqa: E402
from .queue import MessageQueue, QueueFullError, QueueManager, QueueStore  # noqa: E402
from .stream import StreamProcessor  # noqa: E402
from .windowing import SlidingWindow, TumblingWindow  # noqa: E402

__all__ += ["AggregationPipeline", "PipelineStore", "AnalyticsEngine", "StreamAnalytics",
            "MessageQueue", "QueueFullError", "QueueManager", "QueueStore", "StreamProcessor",
            "SlidingWindow", "TumblingWindow"]

# Decoding connectors in C++ (issue 12).
from .connectors.file import FileStreamConnector  # noqa: E402
from .connectors.json_stream import JSONStreamConnector  # noqa: E402
from .connectors.kafka import KafkaConnector, KafkaMockCluster  # noqa: E402
from .connectors.postgres_cdc import PostgresCDCConnector  # noqa: E402

from .connectors.websocket import WebSocketConnector  # noqa: E402

__all__ += ["JSONStreamConnector", "FileStreamConnector", "KafkaConnector", "KafkaMockCluster",
            "WebSocketConnector", "PostgresCDCConnector"]

# Seed-API completeness (issue 14): rills.compute, SQL error classes, metrics
# store options, C++ logs in Python's logging.
from . import compute  # noqa: E402
from ._logging import flush_logs, install as _install_logging  # noqa: E402
from .compute import aggregate_table, filter_table, join_tables  # noqa: E402
from .errors import (  # noqa: E402
    BinderError, CatalogError, ConversionError, DDLError, InterruptError, InvalidInputError,
    OutOfRangeError, ParserError, SQLError,
)
from .metrics_options import MetricsStoreOptions  # noqa: E402

_install_logging()

__all__ += ["join_tables", "filter_table", "aggregate_table", "flush_logs", "SQLError", "DDLError",
            "CatalogError", "ParserError", "BinderError", "ConversionError",
            "InvalidInputError", "OutOfRangeError", "InterruptError", "MetricsStoreOptions"]

# Sinks over the change feed (issue 24): Kafka, PostgreSQL, files, Python.
from . import sinks  # noqa: E402
from .sinks import FileSink, KafkaSink, PostgresSink, PythonSink, Sink  # noqa: E402

__all__ += ["Sink", "KafkaSink", "PostgresSink", "FileSink", "PythonSink"]
