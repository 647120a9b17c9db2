"""rills.sinks: construction errors naming the option, engine.add_sink / remove_sink,
engine.sinks as a live sequence, stats(), and sinks that write (PythonSink,
seed 001's StreamSink.for_table, FileSink read back by DuckDB and pyarrow)."""

import os
import pathlib
import subprocess
import threading

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as papq
import pytest

import rills
from rills import MemoryConnector, schema
from rills.sinks import FileSink, KafkaSink, PostgresSink, PythonSink, Sink
from rills.stream import DatabaseSink

KAFKA = {"bootstrap.servers": "127.0.0.1:9"}


@pytest.fixture
def orders(make_engine):
    """An engine with a keyed table `orders` and an append table `log`, and a connector to orders."""
    engine = make_engine(trigger_interval_ms=50, metrics_path=None)
    engine.register_table("orders", schema=schema(
        [("id", pa.int64()), ("region", pa.string()), ("amount", pa.float64())], primary_key="id"))
    engine.register_table("log", schema=schema([("v", pa.float64())], mode="append"),
                          retention_policy=rills.RetentionPolicy(max_rows=1000))
    feed = MemoryConnector(target_table="orders")
    engine.add_connector(feed)
    engine.feed = feed
    return engine


# Construction: every bad option is named ---------------------------------------------------


@pytest.mark.parametrize("make, error, option", [
    (lambda: FileSink("", "t", "out"), ValueError, "name"),
    (lambda: FileSink(3, "t", "out"), TypeError, "name"),
    (lambda: FileSink("s", "", "out"), ValueError, "table"),
    (lambda: FileSink("s", "t", "out", mode="merge"), ValueError, "mode"),
    (lambda: FileSink("s", "t", "out", mode="upsert"), ValueError, "upsert"),
    (lambda: FileSink("s", "t", "out", interval_seconds=0), ValueError, "interval_seconds"),
    (lambda: FileSink("s", "t", "out", interval_seconds="1"), TypeError, "interval_seconds"),
    (lambda: FileSink("s", "t", "out", max_batch_rows=-1), ValueError, "max_batch_rows"),
    (lambda: FileSink("s", "t", "out", max_batch_rows=1.5), TypeError, "max_batch_rows"),
    (lambda: FileSink("s", "t", "out", on_error="ignore"), ValueError, "on_error"),
    (lambda: FileSink("s", "t", "out", retry_initial_seconds=-1), ValueError,
     "retry_initial_seconds"),
    (lambda: FileSink("s", "t", "out", retry_initial_seconds=5, retry_max_seconds=1), ValueError,
     "retry_max_seconds"),
    (lambda: FileSink("s", "t", "out", max_backlog_rows=-5), ValueError, "max_backlog_rows"),
    (lambda: FileSink("s", "t", "out", emit_retention_deletes=1), TypeError,
     "emit_retention_deletes"),
    (lambda: FileSink("s", "t", "out", flush_every=3), TypeError, "flush_every"),
    (lambda: FileSink("s", "t", ""), ValueError, "path"),
    (lambda: FileSink("s", "t", 5), TypeError, "path"),
    (lambda: FileSink("s", "t", "out", format="xlsx"), ValueError, "format"),
    (lambda: FileSink("s", "t", "out", partition_by=[1]), TypeError, "partition_by"),
    (lambda: FileSink("s", "t", "out", partition_by=["a", "a"]), ValueError, "partition_by"),
    (lambda: FileSink("s", "t", "out", roll_rows=0), ValueError, "roll_rows"),
    (lambda: FileSink("s", "t", "out", roll_seconds=0), ValueError, "roll_seconds"),
    (lambda: KafkaSink("s", "t", "", KAFKA), ValueError, "topic"),
    (lambda: KafkaSink("s", "t", "out", "127.0.0.1:9"), TypeError, "kafka_config"),
    (lambda: KafkaSink("s", "t", "out", {"acks": "all"}), ValueError, "bootstrap.servers"),
    (lambda: KafkaSink("s", "t", "out", KAFKA, format="protobuf"), ValueError, "format"),
    (lambda: KafkaSink("s", "t", "out", KAFKA, key_columns=5), TypeError, "key_columns"),
    (lambda: KafkaSink("s", "t", "out", KAFKA, key_format="xml"), ValueError, "key_format"),
    (lambda: KafkaSink("s", "t", "out", KAFKA, key_columns=["a", "b"], key_format="string"),
     ValueError, "key_format"),
    (lambda: KafkaSink("s", "t", "out", KAFKA, exactly_once="yes"), TypeError, "exactly_once"),
    (lambda: PostgresSink("s", "t", "", "public.t"), ValueError, "dsn"),
    (lambda: PostgresSink("s", "t", "host=x", ""), ValueError, "target_table"),
    (lambda: PostgresSink("s", "t", "host=x", "t", mode="upsrt"), ValueError, "mode"),
    (lambda: PostgresSink("s", "t", "host=x", "t", create_table="no"), TypeError,
     "create_table"),
    (lambda: PostgresSink("s", "t", "host=x", "t", connect_timeout_seconds=0), ValueError,
     "connect_timeout_seconds"),
    (lambda: PythonSink("s", "t", None), TypeError, "write"),
    (lambda: PythonSink("s", "t", print, format="pandas"), ValueError, "format"),
    (lambda: PythonSink("s", "t", print, commit=3), TypeError, "commit"),
])
def test_a_bad_option_is_refused_naming_it(make, error, option):
    with pytest.raises(error, match=option):
        make()


def test_sinks_keep_their_options_and_defaults():
    k = KafkaSink("k", "orders", "out", {"bootstrap.servers": "h:1", "enable.idempotence": True},
                  key_columns="id", exactly_once=True)
    assert (k.type, k.mode, k.format, k.key_columns, k.key_format, k.exactly_once) == (
        "kafka", "changelog", "json", ["id"], "json", True)
    assert k.kafka_config == {"bootstrap.servers": "h:1", "enable.idempotence": "true"}
    assert k.transactional_id == "rill-k"  # stable across restarts
    assert KafkaSink("k", "t", "o", {**KAFKA, "transactional.id": "app-1"}).transactional_id == \
        "app-1"
    assert KafkaSink("k", "t", "o", KAFKA, transactional_id="x").transactional_id == "x"
    p = PostgresSink("p", "orders", "host=x password=secret", "public.orders")
    assert (p.type, p.mode, p.create_table, p.on_error) == ("postgres", "upsert", False, "retry")
    assert "secret" not in repr(p)
    f = FileSink("f", "orders", "out", partition_by="region", interval_seconds=2)
    assert (f.type, f.format, f.partition_by, f.roll_rows, f.roll_seconds, f.interval_seconds) == (
        "file", "parquet", ["region"], 1000000, 60.0, 2.0)
    assert not f.added
    # Every public name is also in rills.
    for name in ["Sink", "KafkaSink", "PostgresSink", "FileSink", "PythonSink"]:
        assert getattr(rills, name) is getattr(rills.sinks, name)
        assert name in rills.__all__


def test_stats_and_flush_before_add_sink_raise(tmp_path):
    f = FileSink("f", "orders", str(tmp_path))
    with pytest.raises(RuntimeError, match="add_sink"):
        f.stats()
    with pytest.raises(RuntimeError, match="add_sink"):
        f.flush()


# engine.add_sink / remove_sink / sinks --------------------------------------------------------


def _collector():
    got = []
    lock = threading.Lock()

    def write(table):
        with lock:
            got.append(table)
    return got, write


def test_engine_sinks_is_a_live_sequence_in_the_order_added(orders, tmp_path):
    assert list(orders.sinks) == [] and len(orders.sinks) == 0
    a = PythonSink("zeta", "orders", _collector()[1])
    b = PythonSink("alpha", "orders", _collector()[1])
    orders.add_sink(a)
    view = orders.sinks  # read again on every use
    orders.sinks.append(b)
    assert len(view) == 2 and view[0] is a and view[1] is b
    assert a in orders.sinks and a.added
    assert [s.name for s in orders.sinks] == ["zeta", "alpha"]
    orders.add_sink(a)  # the same sink again: nothing happens
    assert len(orders.sinks) == 2
    orders.sinks.remove(a)
    assert list(orders.sinks) == [b] and not a.added
    orders.remove_sink("alpha")
    assert list(orders.sinks) == []
    with pytest.raises(KeyError, match="alpha"):
        orders.remove_sink("alpha")


def test_add_sink_refuses_what_the_engine_cannot_run(orders):
    with pytest.raises(TypeError, match="add_sink"):
        orders.add_sink("orders")
    orders.add_sink(PythonSink("s", "orders", print))
    with pytest.raises(ValueError, match="name"):
        orders.add_sink(PythonSink("s", "orders", print))  # a duplicate name
    with pytest.raises(ValueError, match="nope"):
        orders.add_sink(PythonSink("t", "nope", print))  # an unknown table
    with pytest.raises(ValueError, match="upsert"):
        orders.add_sink(PythonSink("u", "log", print, mode="upsert"))  # log has no key
    assert [s.name for s in orders.sinks] == ["s"]


def test_a_sink_runs_in_one_engine_only(orders, make_engine):
    other = make_engine(trigger_interval_ms=50, metrics_path=None)
    other.register_table("orders", schema=schema([("id", pa.int64())], primary_key="id"))
    s = PythonSink("s", "orders", print)
    orders.add_sink(s)
    with pytest.raises(ValueError, match="another engine"):
        other.add_sink(s)


def test_a_sink_whose_object_is_gone_is_still_listed_with_its_options(orders):
    orders.add_sink(PythonSink("gone", "orders", print, interval_seconds=3, on_error="drop"))
    [view] = orders.sinks
    assert isinstance(view, Sink)
    assert (view.name, view.table, view.type, view.interval_seconds, view.on_error) == (
        "gone", "orders", "python", 3.0, "drop")
    assert view.stats()["rows_written"] == 0
    assert orders.sinks[0] == view


# Sinks that write ---------------------------------------------------------------------------


def test_python_sink_gets_the_changes_and_counts_them(orders):
    got, write = _collector()
    commits = []
    sink = PythonSink("py", "orders", write, commit=commits.append)
    orders.add_sink(sink)
    orders.feed.push({"id": [1, 2], "region": ["eu", "us"], "amount": [1.0, 2.0]})
    orders.step()
    orders.feed.push({"id": [2], "region": ["us"], "amount": [5.0]})
    orders.step()
    sink.flush(timeout=30)
    rows = [r for t in got for r in t.to_pylist()]
    assert sorted((r["id"], r["_op"], r["amount"]) for r in rows) == [
        (1, "insert", 1.0), (2, "insert", 2.0), (2, "update", 5.0)]
    stats = sink.stats()
    assert stats["rows_written"] == 3
    assert stats["batches"] >= 1 and commits
    assert stats["committed_version"] == max(r["_version"] for r in rows)
    assert stats["errors"] == 0 and stats["lag_versions"] == 0
    assert orders.get_metrics()["sinks"]["py"]["rows_written"] == 3


def test_a_failing_python_sink_is_retried_and_counted(orders):
    calls = []

    def write(table):
        calls.append(table.num_rows)
        if len(calls) == 1:
            raise RuntimeError("target down")

    sink = PythonSink("flaky", "orders", write, retry_initial_seconds=0.01,
                      retry_max_seconds=0.02)
    orders.add_sink(sink)
    orders.feed.push({"id": [1], "region": ["eu"], "amount": [1.0]})
    orders.step()
    sink.flush(timeout=30)
    stats = sink.stats()
    assert stats["errors"] >= 1 and stats["retries"] >= 1
    assert "target down" in stats["last_error"]
    assert stats["rows_written"] == 1 and len(calls) >= 2


def test_stream_sink_follows_a_table(orders, tmp_path):
    db = DatabaseSink(str(tmp_path / "stream.db"), "orders", name="db")
    sink = db.for_table("orders")
    assert isinstance(sink, PythonSink) and sink.name == "db_orders"
    orders.add_sink(sink)
    orders.feed.push({"id": [1, 2], "region": ["eu", "us"], "amount": [1.0, 2.0]})
    orders.step()
    sink.flush(timeout=30)
    events = db.read_all()
    assert sorted((e["id"], e["_op"]) for e in events) == [(1, "insert"), (2, "insert")]
    assert db.written == 2
    db.close()


def test_file_sink_files_hold_exactly_the_tables_changes(orders, tmp_path):
    out = tmp_path / "orders"
    sink = FileSink("files", "orders", str(out), format="parquet", partition_by="region")
    orders.add_sink(sink)
    orders.feed.push({"id": [1, 2, 3], "region": ["eu", "us", "eu"], "amount": [1.0, 2.0, 3.0]})
    orders.step()
    orders.feed.push({"id": [3], "region": ["eu"], "amount": [4.0]})
    orders.step()
    sink.flush(timeout=30)
    assert sink.stats()["rows_written"] == 4
    data = pads.dataset(str(out), format="parquet", partitioning="hive").to_table()
    got = sorted((r["id"], r["_op"], r["amount"], r["region"]) for r in data.to_pylist())
    assert got == [(1, "insert", 1.0, "eu"), (2, "insert", 2.0, "us"),
                   (3, "insert", 3.0, "eu"), (3, "update", 4.0, "eu")]
    # DuckDB, an independent reader: the last change per key is the table.
    last = duckdb.sql(
        f"SELECT id, arg_max(amount, _version) AS amount FROM read_parquet('{out}/**/*.parquet',"
        " hive_partitioning=true) GROUP BY id ORDER BY id").fetchall()
    table = orders.query_sql("SELECT id, amount FROM orders ORDER BY id").to_pylist()
    assert last == [(r["id"], r["amount"]) for r in table]


def test_output_api_sink_to_file_is_unchanged(orders, tmp_path):
    orders.feed.push({"id": [1], "region": ["eu"], "amount": [1.0]})
    orders.step()
    path = tmp_path / "o.parquet"
    assert rills.OutputAPI(orders).sink_to_file("orders", path) is True
    assert papq.read_table(path).column("id").to_pylist() == [1]


ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))


@pytest.mark.skipif(not RILL.exists(), reason="the rill binary is not built")
def test_rill_serve_runs_the_sinks_of_the_example_pipeline(tmp_path):
    # The shipped example writes out/orders (parquet, by region) and
    # out/revenue (ndjson, a task's output), relative to the working directory.
    example = ROOT / "examples" / "pipelines" / "orders_sinks.yaml"
    out = subprocess.run([str(RILL), "serve", str(example), "--metrics", ":memory:",
                          "--listen", "127.0.0.1:0", "--duration", "3"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "2 sinks" in out.stdout
    orders = duckdb.sql(
        f"SELECT _op, count(*) FROM read_parquet('{tmp_path}/out/orders/**/*.parquet', "
        "hive_partitioning=true) GROUP BY _op").fetchall()
    assert dict(orders).get("insert", 0) > 0 and set(dict(orders)) <= {"insert", "update"}
    regions = duckdb.sql(
        f"SELECT DISTINCT region FROM read_json_auto('{tmp_path}/out/revenue/**/*.ndjson')"
    ).fetchall()
    assert {r[0] for r in regions} <= {"us-east", "us-west", "eu-west", "apac"} and regions


def test_flush_raises_timeout_error_while_the_target_keeps_failing(orders):
    def write(table):
        raise RuntimeError("target down for good")

    sink = PythonSink("down", "orders", write, retry_initial_seconds=0.01, retry_max_seconds=0.02)
    orders.add_sink(sink)
    orders.feed.push({"id": [1], "region": ["eu"], "amount": [1.0]})
    orders.step()
    with pytest.raises(TimeoutError, match="deadline exceeded"):
        sink.flush(timeout=0.5)
    assert sink.stats()["rows_written"] == 0 and sink.stats()["errors"] >= 1
    orders.remove_sink(sink)
    with pytest.raises(RuntimeError):
        sink.flush()


def test_postgres_sink_table_equals_the_rill_table_after_random_upserts(postgres_server, orders):
    import random

    rng = random.Random(24)
    sink = PostgresSink("pg", "orders", postgres_server.dsn(), "public.orders_api_test",
                        create_table=True, interval_seconds=0.05, max_batch_rows=50)
    assert sink.mode == "upsert"
    orders.add_sink(sink)
    for _ in range(20):
        ids = [rng.randrange(100) for _ in range(rng.randint(1, 30))]
        orders.feed.push({"id": ids, "region": [rng.choice(["eu", "us", None]) for _ in ids],
                          "amount": [round(rng.uniform(0, 100), 2) for _ in ids]})
        orders.step()
    sink.flush(timeout=60)
    stats = sink.stats()
    assert stats["errors"] == 0, stats
    assert stats["committed_version"] > 0 and stats["lag_versions"] == 0
    with postgres_server.connect() as con:
        got = con.execute("SELECT id, region, amount FROM public.orders_api_test ORDER BY id"
                          ).fetchall()
        progress = con.execute("SELECT version FROM rill_sink_progress WHERE sink = 'pg'"
                               ).fetchall()
    want = [(r["id"], r["region"], r["amount"]) for r in
            orders.query_sql("SELECT id, region, amount FROM orders ORDER BY id").to_pylist()]
    assert got == want
    assert progress == [(stats["committed_version"],)]


def test_kafka_avro_needs_a_schema_registry(orders):
    with pytest.raises(ValueError, match="schema_registry_url"):
        KafkaSink("k", "orders", "out", KAFKA, format="avro")
    with pytest.raises(ValueError, match="expected http"):
        orders.add_sink(KafkaSink("k", "orders", "out", KAFKA, format="avro",
                                  schema_registry_url="ftp://x"))
    assert list(orders.sinks) == []
