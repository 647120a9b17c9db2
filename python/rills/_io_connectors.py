"""Connectors over real inputs, decoded in C++: JSONStreamConnector (and the
file connector). Re-exported by ``rills.connectors.json_stream`` / ``.file``.

They take the engine's C++ connector path (``RillEngine.add_connector`` hands
their ``_core`` to the engine): decoding, buffering and rejects never run
Python code on the tick thread.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Union

import pyarrow as pa

from . import _arrow, _core
from .connectors.base import BaseConnector, _check_limit, _register_core
from .connectors.memory import MemoryConnector

__all__ = ["JSONStreamConnector", "FileStreamConnector", "KafkaConnector", "KafkaMockCluster",
           "WebSocketConnector"]


def _option(options: Any, name: str, default: Any) -> Any:
    """Read `name` from a dict or an options object (pyarrow.json.ParseOptions, …)."""
    if options is None:
        return default
    if isinstance(options, dict):
        return options.get(name, default)
    return getattr(options, name, default)


def _parse_options(parse_options: Any) -> tuple:
    """(explicit schema or None, "ignore" | "error") from parse_options."""
    schema = _option(parse_options, "explicit_schema", None)
    if schema is not None and not isinstance(schema, pa.Schema):
        raise TypeError(f"parse_options explicit_schema must be a pyarrow.Schema, got {type(schema).__name__}")
    unexpected = _option(parse_options, "unexpected_field_behavior", "ignore")
    if unexpected == "infer":
        # A live table's columns are fixed: new fields are ignored (and counted).
        unexpected = "ignore"
    if unexpected not in ("ignore", "error"):
        raise ValueError(
            f"unexpected_field_behavior must be 'ignore', 'error' or 'infer', got {unexpected!r}"
        )
    return schema, unexpected




def _row_ops(format: str, op_column: Optional[str], ts_ms_column: Optional[str]) -> dict:
    """The row-operation keywords of the C++ connectors' make()."""
    if not isinstance(format, str):
        raise TypeError(f"format must be a str, got {type(format).__name__}")
    for what, value in (("op_column", op_column), ("ts_ms_column", ts_ms_column)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{what} must be a non-empty column name or None, got {value!r}")
    return {"format": format, "op_column": op_column or "", "ts_ms_column": ts_ms_column or ""}


class _DecodingConnector(MemoryConnector):
    """What the C++ decoding connectors share: per-record rejects."""

    def take_rejects(self) -> List[Dict[str, Any]]:
        """Take the rejected records not yet handed to an engine (connector,
        position, error, raw, raw_size). An attached engine takes them every tick."""
        return self._core.take_rejects()


class _ReaderConnector(_DecodingConnector):
    """A decoding connector that reads on its own C++ thread: no push()."""

    def start(self) -> None:
        """Start reading (RillEngine.add_connector does this through the C++ core)."""
        self._core.start()

    def stop(self) -> None:
        """Stop reading and join the reader thread."""
        self._core.stop()

    def push(self, data: Any) -> None:
        raise TypeError(f"{type(self).__name__} reads on its own thread; it takes no push()")


class JSONStreamConnector(_DecodingConnector):
    """A connector fed with raw NDJSON (or a JSON array of objects) by push_bytes().

    Each push is decoded in C++ (simdjson) on the pushing thread into the
    target table's columns (or ``parse_options.explicit_schema``; a table
    without a schema takes the schema inferred from the first push), then
    buffered like MemoryConnector (max_buffer_records / max_buffer_bytes /
    on_overflow). A bad line never spoils the push: it goes to ``rill_rejects``
    with its position, the error and its raw bytes, and the good lines are kept.

    Args:
        target_table: the table this connector feeds.
        parse_options: ``pyarrow.json.ParseOptions`` or a dict with
            ``explicit_schema`` (a pyarrow.Schema) and
            ``unexpected_field_behavior`` ("ignore" (default: ignored and
            counted), "error" (the record is rejected) or "infer" (as "ignore":
            a live table's columns are fixed)).
        read_options: ``pyarrow.json.ReadOptions`` or a dict; ``block_size`` is
            the largest record accepted in bytes (default 64 MiB); a dict may
            also give ``max_reject_bytes`` (raw bytes kept per reject, default 4096).
        max_buffer_records / max_buffer_bytes: buffered rows / bytes before
            on_overflow applies (None: unlimited).
        on_overflow: "drop_oldest" (earlier pushes are dropped first),
            "drop_newest" or "error" (push_bytes raises BufferError).
        name: unique name within an engine (default: derived from target_table).
        format: "json" (default; or "ndjson"): each record is a row;
            "debezium": each record is a Debezium change event (before, after,
            op, source; with or without the schema/payload wrapper) applied
            in order as an upsert, a delete or a truncate (docs/debezium.md).
        op_column: a field of the records that says what each row does
            (insert/upsert/update/delete/truncate or c/u/d/r/t); rows are
            applied in order; the field is not a column of the table.
        ts_ms_column: with format="debezium", the column that receives each
            event's source.ts_ms (a timestamp column, or an integer column in
            milliseconds; added as timestamp[ms, UTC] when the schema lacks it).
    """

    def __init__(
        self,
        target_table: str,
        parse_options: Any = None,
        read_options: Any = None,
        max_buffer_records: Optional[int] = None,
        max_buffer_bytes: Optional[int] = None,
        on_overflow: str = "drop_oldest",
        name: Optional[str] = None,
        format: str = "json",
        op_column: Optional[str] = None,
        ts_ms_column: Optional[str] = None,
    ):
        BaseConnector.__init__(self, target_table, max_buffer_records, on_overflow, name)
        schema, unexpected = _parse_options(parse_options)
        row_ops = _row_ops(format, op_column, ts_ms_column)
        self.format, self.op_column, self.ts_ms_column = format, op_column, ts_ms_column
        block_size = _option(read_options, "block_size", None)
        max_reject_bytes = _option(read_options, "max_reject_bytes", None)
        self.parse_options = parse_options
        self.read_options = read_options
        self.schema = schema
        self.max_buffer_bytes = max_buffer_bytes
        self._core = _core.JsonStreamConnector.make(
            target_table,
            schema,
            unexpected,
            _check_limit("block_size", block_size),
            -1 if max_reject_bytes is None else _check_limit("max_reject_bytes", max_reject_bytes),
            _check_limit("max_buffer_records", max_buffer_records),
            _check_limit("max_buffer_bytes", max_buffer_bytes),
            on_overflow,
            self.name,
            **row_ops,
        )
        _register_core(self._core, self)

    def push_bytes(self, data: Union[bytes, bytearray, memoryview, str]) -> None:
        """Decode and buffer NDJSON / a JSON array for the next tick. Any thread.

        Raises BufferError only when on_overflow="error" and the decoded rows
        do not fit (nothing of this push is buffered; its bad lines still go to
        rill_rejects), ValueError when the connector is closed, TypeError for
        data that is not bytes-like or str. Bad lines never raise.
        """
        # A table registered without a schema takes the decoded batch's
        # schema in C++ on the next tick.
        self._core.push_bytes(data)

    def push(self, data: Any) -> None:
        """push_bytes() for str / bytes; other data as MemoryConnector.push (rows are
        serialized to NDJSON so that they take the same decoding path)."""
        if isinstance(data, (bytes, bytearray, memoryview, str)):
            self.push_bytes(data)
            return
        table = _arrow.to_table(data, self.schema, what="JSONStreamConnector.push()")
        if table is None or table.num_rows == 0:
            return
        import json

        self.push_bytes("\n".join(json.dumps(row, default=str) for row in table.to_pylist()))

    def stats(self) -> Dict[str, int]:
        """Return the counters: received (bytes, records), parsed, rejected,
        unknown_fields, buffered, pushed, dropped, refused, drained."""
        return self._core.stats()


class FileStreamConnector(_ReaderConnector):
    """Rows from files that appear in a folder, read by a C++ thread.

    New files whose names match ``file_pattern`` are read once they are
    complete (renamed into place, closed after writing, or unchanged for
    ``stable_seconds``): ``.json``/``.ndjson``/``.jsonl`` (NDJSON or a JSON
    array; bad lines go to ``rill_rejects``), ``.csv``, ``.parquet``,
    ``.arrow``/``.ipc``/``.feather`` (Arrow IPC file or stream format). Files
    already read are remembered in a small state file in the folder
    (``.rill-<name>.state``), so a restart reads nothing twice. A file that
    cannot be read goes to ``rill_rejects`` as one record.

    Args:
        target_table: the table this connector feeds.
        watch_path: the folder to watch (ValueError if it is not a folder).
        file_pattern: shell pattern of the file names to read (default "*").
        delete_after_process: delete a file once its rows are applied (with
            ``checkpoint_dir``: once a complete checkpoint holds them), so a
            crash before that reads it again; a file that failed to read is
            not deleted but moved to ``<watch_path>/failed/`` (its reject in
            ``rill_rejects`` says so).
        tail: follow NDJSON files as they grow (complete lines after the last
            byte read); other formats are read once.
        schema: decode JSON / CSV with these columns (default: the table's).
        poll_interval_seconds: rescan period (inotify events wake it earlier).
        stable_seconds: how long a file's size must stay unchanged when no
            "closed" / "moved in" event says it is complete.
        max_buffer_records / max_buffer_bytes / on_overflow: backpressure; with
            on_overflow="error" the reader waits for room instead of dropping.
        name: unique name within an engine (default: derived from target_table).
        format: "json" (default; or "ndjson"): each record is a row;
            "debezium": each record is a Debezium change event (before, after,
            op, source; with or without the schema/payload wrapper) applied
            in order as an upsert, a delete or a truncate (docs/debezium.md).
        op_column: a field of the records that says what each row does
            (insert/upsert/update/delete/truncate or c/u/d/r/t); rows are
            applied in order; the field is not a column of the table.
        ts_ms_column: with format="debezium", the column that receives each
            event's source.ts_ms (a timestamp column, or an integer column in
            milliseconds; added as timestamp[ms, UTC] when the schema lacks it).
    """

    def __init__(
        self,
        target_table: str,
        watch_path: Union[str, "os.PathLike[str]"],
        file_pattern: str = "*",
        delete_after_process: bool = False,
        tail: bool = False,
        schema: Optional[pa.Schema] = None,
        poll_interval_seconds: float = 0.2,
        stable_seconds: float = 1.0,
        use_inotify: bool = True,
        max_buffer_records: Optional[int] = None,
        max_buffer_bytes: Optional[int] = None,
        on_overflow: str = "drop_oldest",
        name: Optional[str] = None,
        format: str = "json",
        op_column: Optional[str] = None,
        ts_ms_column: Optional[str] = None,
    ):
        BaseConnector.__init__(self, target_table, max_buffer_records, on_overflow, name)
        row_ops = _row_ops(format, op_column, ts_ms_column)
        self.format, self.op_column, self.ts_ms_column = format, op_column, ts_ms_column
        if schema is not None and not isinstance(schema, pa.Schema):
            raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
        self.watch_path = os.fspath(watch_path)
        self.file_pattern = file_pattern
        self.delete_after_process = bool(delete_after_process)
        self.tail = bool(tail)
        self.schema = schema
        self.max_buffer_bytes = max_buffer_bytes
        self._started = False
        self._core = _core.FileStreamConnector.make(
            target_table,
            self.watch_path,
            file_pattern,
            self.delete_after_process,
            self.tail,
            schema,
            max(1, int(poll_interval_seconds * 1000)),
            max(0, int(stable_seconds * 1000)),
            bool(use_inotify),
            "",
            _check_limit("max_buffer_records", max_buffer_records),
            _check_limit("max_buffer_bytes", max_buffer_bytes),
            on_overflow,
            self.name,
            **row_ops,
        )
        _register_core(self._core, self)

    def scan_once(self) -> None:
        """Read what is ready now, without the thread (for use without an engine)."""
        self._core.scan_once()

    def read_batch(self) -> Optional[pa.Table]:
        """Read every matching file not read yet and return its rows as one
        pyarrow Table, or None when there is none (as in the seed).

        For a connector that is not attached to an engine (an attached one is
        read by its thread and drained by the engine on every tick). Files
        present now count as complete: call it once their writers are done.
        """
        self._core.scan_once(True)
        out = super().read_batch()
        # The caller holds the rows now: commit them (the state file, and the
        # deletion of read files with delete_after_process).
        self._core.commit_applied()
        return out

    def processed_files(self) -> List[str]:
        """Names of the files read so far (kept across restarts)."""
        return self._core.processed_files()

    @property
    def using_inotify(self) -> bool:
        """Whether inotify is in use (False: polling)."""
        return self._core.using_inotify


class KafkaConnector(_ReaderConnector):
    """Rows from Kafka topics (NDJSON or Avro message values), read by a C++ librdkafka consumer.

    Each message value holds one or more NDJSON rows (or a JSON array); bad
    lines go to ``rill_rejects`` with their topic, partition and offset. The
    next offset of every partition is kept by the connector (``positions()``)
    and committed to the consumer group only once the engine applied the rows
    (with a checkpoint directory: once a checkpoint holds them), so
    ``start="committed"`` after a crash is at-least-once (docs/connectors.md). Partition
    EOF is not an error; a broker outage is recorded once as an engine alert
    and retried by librdkafka. ``stats()["lag"]`` is the total lag (high
    watermark - position); ``lags()`` gives it per partition.

    Args:
        target_table: the table this connector feeds.
        topics: a topic name or a list of them.
        kafka_config: librdkafka properties, passed through (e.g.
            ``{"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"}``;
            group.id defaults to "rill-<name>"; auto commit is always off).
        start: "committed" (the group's offsets, else earliest), "earliest",
            "latest", or "timestamp" (with ``start_timestamp_ms``).
        metadata_columns: add _topic, _partition, _offset, _key, _timestamp.
        parse_options: as for JSONStreamConnector (explicit_schema,
            unexpected_field_behavior).
        max_buffer_records / max_buffer_bytes / on_overflow: backpressure; with
            "error" the consumer waits for room (the topic keeps the data).
        name: unique name within an engine (default: derived from target_table).
        format: "json" (default; or "ndjson"): each record is a row;
            "debezium": each record is a Debezium change event (before, after,
            op, source; with or without the schema/payload wrapper) applied
            in order as an upsert, a delete or a truncate (docs/debezium.md);
            "avro": each message value is one Avro record (see
            schema_registry_url and avro_schema; docs/avro.md).
        op_column: a field of the records that says what each row does
            (insert/upsert/update/delete/truncate or c/u/d/r/t); rows are
            applied in order; the field is not a column of the table.
        ts_ms_column: with format="debezium", the column that receives each
            event's source.ts_ms (a timestamp column, or an integer column in
            milliseconds; added as timestamp[ms, UTC] when the schema lacks it).
        key_columns: the columns the message key holds (JSON: an object of
            them, or a scalar for one column; Debezium's schema/payload key
            wrapper is unwrapped). A message with a key and a null value (a
            tombstone) then deletes that key, and the key fills these columns
            of upserts whose value lacks them. Without key columns a tombstone
            is a reject naming these options (format="debezium": skipped, as
            Debezium writes one after each delete event); every tombstone is
            counted in ``stats()["tombstones"]``.
        key_format: "json" (default) or "string": the key bytes are the value
            of the one key column (key_columns[0], else the table's one-column
            primary key).
        schema_registry_url: with format="avro" (one Avro record per message,
            decoded into the target table's schema by Avro's resolution rules,
            docs/avro.md), values are in the Confluent wire format (magic byte
            0, 4-byte schema id, Avro binary) and schemas are fetched from this
            Confluent-compatible registry (``GET /schemas/ids/{id}``, cached by
            id). Credentials may be in the URL
            (``http://user:password@host:8081``) or given below.
        schema_registry_user / schema_registry_password: HTTP basic auth of the
            registry (win over the URL's userinfo).
        avro_schema: with format="avro" and no registry, the writer schema of
            plain Avro binary values (JSON text, or a dict).
    """

    def __init__(
        self,
        target_table: str,
        topics: Union[str, List[str]],
        kafka_config: Dict[str, Any],
        start: str = "committed",
        start_timestamp_ms: Optional[int] = None,
        metadata_columns: bool = False,
        parse_options: Any = None,
        max_buffer_records: Optional[int] = None,
        max_buffer_bytes: Optional[int] = None,
        on_overflow: str = "drop_oldest",
        name: Optional[str] = None,
        format: str = "json",
        op_column: Optional[str] = None,
        ts_ms_column: Optional[str] = None,
        key_columns: Optional[List[str]] = None,
        key_format: str = "json",
        schema_registry_url: Optional[str] = None,
        schema_registry_user: Optional[str] = None,
        schema_registry_password: Optional[str] = None,
        avro_schema: Union[str, Dict[str, Any], None] = None,
    ):
        BaseConnector.__init__(self, target_table, max_buffer_records, on_overflow, name)
        avro = format == "avro"
        # Avro values are records (rows); an op_column among their fields still
        # applies (the row-operation part of the decoding is the JSON one's).
        row_ops = _row_ops("json" if avro else format, op_column, ts_ms_column)
        self.format, self.op_column, self.ts_ms_column = format, op_column, ts_ms_column
        if isinstance(avro_schema, (dict, list)):
            avro_schema = json.dumps(avro_schema)
        if avro and bool(schema_registry_url) == bool(avro_schema):
            raise ValueError(
                'format="avro" needs exactly one of schema_registry_url (the Confluent '
                "wire format) and avro_schema (plain Avro binary)"
            )
        if not avro and (schema_registry_url or avro_schema):
            raise ValueError('schema_registry_url and avro_schema need format="avro"')
        self.schema_registry_url = schema_registry_url
        if isinstance(key_columns, str):
            key_columns = [key_columns]
        if key_columns is not None and not all(isinstance(c, str) and c for c in key_columns):
            raise ValueError(f"key_columns must be a list of column names, got {key_columns!r}")
        self.key_columns = list(key_columns or [])
        self.key_format = key_format
        if isinstance(topics, str):
            topics = [topics]
        if not topics or not all(isinstance(t, str) and t for t in topics):
            raise ValueError(f"topics must be a non-empty list of topic names, got {topics!r}")
        if not isinstance(kafka_config, dict):
            raise TypeError(f"kafka_config must be a dict, got {type(kafka_config).__name__}")
        if start == "timestamp" and start_timestamp_ms is None:
            raise ValueError("start='timestamp' needs start_timestamp_ms")
        schema, unexpected = _parse_options(parse_options)
        self.topics = list(topics)
        self.kafka_config = dict(kafka_config)
        self.start_position = start
        self.schema = schema
        self.max_buffer_bytes = max_buffer_bytes
        self._core = _core.KafkaConnector.make(
            target_table,
            self.topics,
            {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in kafka_config.items()},
            start,
            int(start_timestamp_ms or 0),
            bool(metadata_columns),
            schema,
            unexpected,
            _check_limit("max_buffer_records", max_buffer_records),
            _check_limit("max_buffer_bytes", max_buffer_bytes),
            on_overflow,
            self.name,
            key_columns=self.key_columns,
            key_format=key_format,
            value_format="avro" if avro else "json",
            schema_registry_url=schema_registry_url or "",
            schema_registry_user=schema_registry_user or "",
            schema_registry_password=schema_registry_password or "",
            avro_schema=avro_schema or "",
            **row_ops,
        )
        _register_core(self._core, self)

    def positions(self) -> Dict[tuple, int]:
        """{(topic, partition): next offset to read} of what was buffered."""
        return self._core.positions()

    def lags(self) -> Dict[tuple, int]:
        """{(topic, partition): high watermark - position} (last known)."""
        return self._core.lags()


class WebSocketConnector(_ReaderConnector):
    """Rows from a WebSocket server, read by a C++ Boost.Beast client (ws:// and wss://).

    Text frames hold NDJSON rows (or a JSON array), binary frames an Arrow IPC
    stream. After a failed connect or a drop the client reconnects with a
    backoff starting at ``reconnect_initial_seconds`` (1 s), doubling up to
    ``reconnect_max_seconds``; ``stats()["reconnects"]`` counts the
    re-established connections, ``stats()["errors"]`` the failures
    (``last_error`` says the latest). Bad lines go to ``rill_rejects`` with
    their message number, line and byte offset; a binary frame that is not a
    valid Arrow IPC stream and a message over ``max_message_bytes`` go there
    as one record each (its bytes, "message N, byte B").

    Args:
        target_table: the table this connector feeds.
        uri: ``ws://HOST:PORT/PATH`` or ``wss://...``.
        headers: extra handshake headers (e.g. ``{"Authorization": "Bearer ..."}``).
        parse_options: as for JSONStreamConnector (explicit_schema,
            unexpected_field_behavior).
        tls_verify / ca_file: wss:// certificate checking (system CAs plus ca_file).
        max_message_bytes: a bigger message becomes one reject (its first
            bytes kept); the connection stays open.
        max_buffer_records / max_buffer_bytes / on_overflow: backpressure as
            MemoryConnector; with "error" nothing is refused: the client holds
            the message that does not fit and stops reading the socket until a
            tick makes room.
        name: unique name within an engine (default: derived from target_table).
        format: "json" (default; or "ndjson"): each record is a row;
            "debezium": each record is a Debezium change event (before, after,
            op, source; with or without the schema/payload wrapper) applied
            in order as an upsert, a delete or a truncate (docs/debezium.md).
        op_column: a field of the records that says what each row does
            (insert/upsert/update/delete/truncate or c/u/d/r/t); rows are
            applied in order; the field is not a column of the table.
        ts_ms_column: with format="debezium", the column that receives each
            event's source.ts_ms (a timestamp column, or an integer column in
            milliseconds; added as timestamp[ms, UTC] when the schema lacks it).
    """

    def __init__(
        self,
        target_table: str,
        uri: str,
        headers: Optional[Dict[str, str]] = None,
        parse_options: Any = None,
        reconnect_initial_seconds: float = 1.0,
        reconnect_max_seconds: float = 30.0,
        connect_timeout_seconds: float = 10.0,
        max_message_bytes: int = 64 * 1024 * 1024,
        tls_verify: bool = True,
        ca_file: Optional[str] = None,
        max_buffer_records: Optional[int] = None,
        max_buffer_bytes: Optional[int] = None,
        on_overflow: str = "drop_oldest",
        name: Optional[str] = None,
        format: str = "json",
        op_column: Optional[str] = None,
        ts_ms_column: Optional[str] = None,
    ):
        BaseConnector.__init__(self, target_table, max_buffer_records, on_overflow, name)
        schema, unexpected = _parse_options(parse_options)
        row_ops = _row_ops(format, op_column, ts_ms_column)
        self.format, self.op_column, self.ts_ms_column = format, op_column, ts_ms_column
        self.uri = uri
        self.headers = dict(headers or {})
        self.schema = schema
        self.max_buffer_bytes = max_buffer_bytes
        self._core = _core.WebSocketConnector.make(
            target_table, uri, {str(k): str(v) for k, v in self.headers.items()}, schema,
            unexpected, float(reconnect_initial_seconds), float(reconnect_max_seconds),
            float(connect_timeout_seconds), int(max_message_bytes), bool(tls_verify),
            ca_file or "", _check_limit("max_buffer_records", max_buffer_records),
            _check_limit("max_buffer_bytes", max_buffer_bytes), on_overflow, self.name,
            **row_ops)
        _register_core(self._core, self)

    @property
    def connected(self) -> bool:
        """True while the connection is open."""
        return self._core.connected

    @property
    def last_error(self) -> str:
        """The latest connection error ("" if none)."""
        return self._core.last_error


def KafkaMockCluster(brokers: int = 1) -> Any:
    """An in-process Kafka cluster (librdkafka's mock) on 127.0.0.1 for tests and
    demos: .bootstrap_servers, .create_topic(topic, partitions),
    .produce(topic, value, partition=-1, key=None, timestamp_ms=0),
    .produce_many(topic, values), .set_broker_down(broker_id, down)."""
    return _core.KafkaMockCluster.make(brokers)
