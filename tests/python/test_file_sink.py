"""FileSink end to end: a table's files read by DuckDB and pyarrow.dataset equal the
table (randomized appends into an append table; the changelog of a keyed table
replayed), every format readable, and SIGKILL trials (bench/faults/file_sink.py)
that never leave a partial or duplicated file visible."""
import importlib.util
import os
import pathlib
import random

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import rills
from rills import MemoryConnector, schema
from rills.sinks import FileSink

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _faults_module():
    spec = importlib.util.spec_from_file_location("faults_file_sink",
                                                  ROOT / "bench" / "faults" / "file_sink.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _push_random(engine, feed, rng, rounds, make_rows):
    for _ in range(rounds):
        feed.push(make_rows(rng))
        engine.step()


@pytest.fixture
def engine(make_engine):
    return make_engine(trigger_interval_ms=50, metrics_path=None)


def _sorted_rows(table: pa.Table, columns):
    return sorted(tuple(r[c] for c in columns) for r in table.select(columns).to_pylist())


@pytest.mark.parametrize("fmt", ["parquet", "ndjson", "csv", "arrow"])
def test_append_table_directory_read_by_duckdb_and_pyarrow_equals_the_table(engine, tmp_path, fmt):
    engine.register_table("ev", schema=schema(
        [("id", pa.int64()), ("region", pa.string()), ("amount", pa.float64())], mode="append"),
        retention_policy=rills.RetentionPolicy(max_rows=10**6))
    feed = MemoryConnector(target_table="ev")
    engine.add_connector(feed)
    out = tmp_path / "ev"
    sink = FileSink("ev_files", "ev", str(out), format=fmt, partition_by="region", mode="append",
                    roll_rows=37)
    engine.add_sink(sink)
    rng = random.Random(7)
    next_id = [0]

    def rows(rng):
        n = rng.randint(1, 60)
        ids = list(range(next_id[0], next_id[0] + n))
        next_id[0] += n
        return {"id": ids, "region": [rng.choice(["eu", "us/east", "a=b", None]) for _ in ids],
                "amount": [round(rng.uniform(0, 100), 2) for _ in ids]}

    _push_random(engine, feed, rng, 25, rows)
    sink.flush(timeout=30)
    expected = _sorted_rows(engine.get_table("ev").to_arrow(), ["id", "region", "amount"])
    assert len(expected) == next_id[0]
    assert not [f for _, _, names in os.walk(out) for f in names if f.startswith(".tmp-")]

    if fmt in ("parquet", "arrow"):
        data = pads.dataset(str(out), format="ipc" if fmt == "arrow" else "parquet",
                            partitioning="hive").to_table()
        assert _sorted_rows(data, ["id", "region", "amount"]) == expected
        assert "_op" not in data.schema.names and "_version" not in data.schema.names
    reader = {"parquet": "read_parquet", "ndjson": "read_json", "csv": "read_csv"}.get(fmt)
    if reader:
        got = duckdb.sql(
            f"SELECT id, nullif(region, '__HIVE_DEFAULT_PARTITION__'), amount "
            f"FROM {reader}('{out}/**/*.{fmt}', hive_partitioning = true)").fetchall()
        assert sorted(got) == expected


def test_keyed_table_changelog_replayed_by_duckdb_and_pyarrow_equals_the_table(engine, tmp_path):
    engine.register_table("orders", schema=schema(
        [("id", pa.int64()), ("region", pa.string()), ("amount", pa.float64())],
        primary_key="id"))
    feed = MemoryConnector(target_table="orders")
    engine.add_connector(feed)
    out = tmp_path / "orders"
    sink = FileSink("orders_files", "orders", str(out), partition_by=["region"])
    engine.add_sink(sink)

    def rows(rng):
        ids = rng.sample(range(200), rng.randint(1, 40))
        return {"id": ids, "region": [rng.choice(["eu", "us"]) for _ in ids],
                "amount": [float(rng.randint(0, 10**6)) for _ in ids]}

    _push_random(engine, feed, random.Random(11), 30, rows)
    sink.flush(timeout=30)
    table = engine.query_sql("SELECT id, region, amount FROM orders ORDER BY id").to_pylist()
    expected = [(r["id"], r["region"], r["amount"]) for r in table]
    # The last change per key (by _version) is the table; a key moved between
    # partitions has its latest row in the newer partition.
    got = duckdb.sql(
        f"SELECT id, arg_max(region, _version), arg_max(amount, _version) "
        f"FROM read_parquet('{out}/**/*.parquet', hive_partitioning = true) "
        f"WHERE _op <> 'delete' GROUP BY id ORDER BY id").fetchall()
    assert got == expected
    data = pads.dataset(str(out), format="parquet", partitioning="hive").to_table().to_pylist()
    last = {}
    for r in sorted(data, key=lambda r: r["_version"]):
        last[r["id"]] = (r["id"], r["region"], r["amount"])
    assert sorted(last.values()) == expected
    assert {r["_op"] for r in data} <= {"insert", "update"}
    # Progress: the file names' version ranges reach the committed version.
    versions = [int(f.split("-")[2]) for _, _, names in os.walk(out) for f in names
                if f.startswith(("part-", "snapshot-"))]
    assert max(versions) == sink.stats()["committed_version"]


def test_upsert_mode_is_refused_for_files_naming_the_mode(engine, tmp_path):
    engine.register_table("orders", schema=schema([("id", pa.int64())], primary_key="id"))
    feed = MemoryConnector(target_table="orders")
    engine.add_connector(feed)
    # Refused by FileSink itself, when the sink is added, or at its first write
    # (the writer's Invalid), whichever comes first; never written.
    with pytest.raises(Exception, match="upsert"):
        sink = FileSink("f", "orders", str(tmp_path / "o"), mode="upsert", on_error="drop")
        engine.add_sink(sink)
        feed.push({"id": [1]})
        engine.step()
        sink.flush(timeout=5)
        raise AssertionError(f"nothing refused mode upsert: {sink.stats()}")
    assert not any(f.endswith(".parquet") for _, _, names in os.walk(tmp_path) for f in names)


def test_sigkill_never_leaves_a_partial_or_duplicated_file_visible(tmp_path):
    """10 SIGKILLs at random moments (2 trials x 5) of a child writing with a checkpoint
    directory (bench/fault_trials --kinds file_sink_kill runs more)."""
    result = _faults_module().run(2, tmp_path, kills=5)
    assert result["kills"] >= 10, result
    assert result["lost"] == 0, result
    assert result["duplicates"] == 0, result
    assert result["partial_files_visible"] == 0, result
    assert result["files"] > 0, result
