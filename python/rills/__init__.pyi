"""rills: Python API of the Rill streaming engine (C++ core, zero-copy pyarrow)."""

from .connectors import BaseConnector as BaseConnector, MemoryConnector as MemoryConnector
from .engine import RillEngine as RillEngine
from .metrics import MetricsRegistry as MetricsRegistry
from .output import OutputAPI as OutputAPI
from .retention import RetentionPolicy as RetentionPolicy
from .schema import (
    estimate_schema_row_size as estimate_schema_row_size,
    extract_mode as extract_mode,
    extract_primary_key as extract_primary_key,
    schema as schema,
)
from .table import RillTable as RillTable, upsert_table as upsert_table
from .tasks import (
    DuckDBBridge as DuckDBBridge,
    ScheduledSQLTask as ScheduledSQLTask,
    TableJoinTask as TableJoinTask,
)

from .window_task import WindowTask as WindowTask
from .application_view import ApplicationView as ApplicationView
from .aggregation import AggregationPipeline as AggregationPipeline, PipelineStore as PipelineStore
from .analytics import AnalyticsEngine as AnalyticsEngine, StreamAnalytics as StreamAnalytics
from .queue import (
    MessageQueue as MessageQueue,
    QueueFullError as QueueFullError,
    QueueManager as QueueManager,
    QueueStore as QueueStore,
)
from .stream import StreamProcessor as StreamProcessor
from .windowing import SlidingWindow as SlidingWindow, TumblingWindow as TumblingWindow

__version__: str
__all__: list[str]
from . import compute as compute
from ._logging import flush_logs as flush_logs
from .compute import (
    aggregate_table as aggregate_table,
    filter_table as filter_table,
    join_tables as join_tables,
)
from .errors import (
    BinderError as BinderError,
    CatalogError as CatalogError,
    ConversionError as ConversionError,
    DDLError as DDLError,
    InterruptError as InterruptError,
    InvalidInputError as InvalidInputError,
    OutOfRangeError as OutOfRangeError,
    ParserError as ParserError,
    SQLError as SQLError,
)
from .metrics_options import MetricsStoreOptions as MetricsStoreOptions
from . import sinks as sinks
from .sinks import (
    FileSink as FileSink,
    KafkaSink as KafkaSink,
    PostgresSink as PostgresSink,
    PythonSink as PythonSink,
    Sink as Sink,
)
