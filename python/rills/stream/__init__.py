"""Seed 001's stream processing: processors (map/filter/reduce), sources and sinks."""

from .stream_processor import StreamProcessor
from .stream_sink import ConsoleSink, DatabaseSink, QueueSink, StreamSink, TableSink
from .stream_source import EventSource, QueueSource, SensorSource, StreamSource

__all__ = ["StreamProcessor", "StreamSource", "SensorSource", "EventSource", "QueueSource",
           "StreamSink", "ConsoleSink", "DatabaseSink", "QueueSink", "TableSink"]
