"""OutputAPI sinks and scalars, RetentionPolicy.apply, row-size estimates, MetricsRegistry (issue 14)."""

import json

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as papq
import pytest

from rills import (MemoryConnector, MetricsRegistry, OutputAPI, RetentionPolicy, RillTable,
                   estimate_schema_row_size, schema)


@pytest.fixture
def filled(engine):
    engine.register_table("sales", schema=schema(
        [("id", pa.int64()), ("tier", pa.string()), ("amount", pa.float64())], primary_key="id"))
    c = MemoryConnector(target_table="sales")
    engine.add_connector(c)
    c.push({"id": [1, 2, 3], "tier": ["gold", None, "silver"], "amount": [1.5, 2.5, 10.0]})
    engine.register_business_metric("total", lambda e: e.query_sql(
        "SELECT SUM(amount) AS s FROM sales").column("s")[0].as_py())
    engine.step()
    return engine


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json", "ndjson"])
def test_sink_to_file_writes_every_format(filled, tmp_path, fmt):
    out = OutputAPI(filled)
    path = tmp_path / "deep" / f"sales.{fmt}"
    assert out.sink_to_file("sales", path, format=fmt) is True
    want = filled.get_table("sales").to_arrow()
    if fmt == "parquet":
        got = papq.read_table(path)
        assert got.equals(want.replace_schema_metadata(None)) or got.to_pylist() == want.to_pylist()
    elif fmt == "csv":
        got = pacsv.read_csv(path)
        # DuckDB reads the same file: an independent reader of our CSV.
        assert duckdb.sql(f"SELECT COUNT(*) FROM read_csv_auto('{path}')").fetchone()[0] == 3
        assert got.column("id").to_pylist() == want.column("id").to_pylist()
        assert got.column("amount").to_pylist() == want.column("amount").to_pylist()
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        assert rows == want.to_pylist()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left


def test_sink_to_file_default_format_unknown_table_and_bad_format(filled, tmp_path):
    out = OutputAPI(filled)
    assert out.sink_to_file("sales", str(tmp_path / "s.parquet")) is True
    assert papq.read_table(tmp_path / "s.parquet").num_rows == 3
    assert out.sink_to_file("nope", tmp_path / "n.parquet") is False
    assert not (tmp_path / "n.parquet").exists()
    filled.register_table("empty", schema=pa.schema([("a", pa.int64())]))
    assert out.sink_to_file("empty", tmp_path / "e.csv", format="csv") is False
    with pytest.raises(ValueError, match="format"):
        out.sink_to_file("sales", tmp_path / "x.xml", format="xml")


def test_get_all_scalars_and_get_scalar(filled):
    out = OutputAPI(filled)
    scalars = out.get_all_scalars()
    assert scalars["total_records_processed"] == 3
    assert scalars["table_row_counts"]["sales"] == 3
    assert scalars["business_metrics"]["total"] == 14.0
    assert out.get_scalar("total") == 14.0
    assert out.get_scalar("missing", default=-1) == -1


def test_retention_policy_apply_matches_the_engine_rule():
    t = pa.table({"ts": [985.0, 989.0, 990.0, 995.0, 998.0], "v": [1, 2, 3, 4, 5]})
    assert RetentionPolicy(max_age_seconds=10.0, time_column="ts").apply(t, 1000.0) \
        .column("v").to_pylist() == [3, 4, 5]
    assert RetentionPolicy(max_rows=2).apply(t, 1000.0).column("v").to_pylist() == [4, 5]
    both = RetentionPolicy(max_rows=2, max_age_seconds=12.0, time_column="ts").apply(t, 1000.0)
    assert both.column("v").to_pylist() == [4, 5]
    ints = pa.table({"ts": pa.array([980, 995, 1000], pa.int64())})
    assert RetentionPolicy(max_age_seconds=5, time_column="ts").apply(ints, 1000.0).num_rows == 2
    stamps = pa.table({"ts": pa.array([990_000, 999_000], pa.timestamp("ms"))})
    assert RetentionPolicy(max_age_seconds=5, time_column="ts").apply(stamps, 1000.0).num_rows == 1
    # Null times never expire, as in the engine.
    nulls = pa.table({"ts": [None, 1.0, 999.0]})
    assert RetentionPolicy(max_age_seconds=5, time_column="ts").apply(nulls, 1000.0) \
        .column("ts").to_pylist() == [None, 999.0]
    # No time column: only max_rows applies; None and empty pass through.
    assert RetentionPolicy(max_age_seconds=1).apply(t, 1e9).num_rows == 5
    assert RetentionPolicy(max_rows=1).apply(None) is None
    # The same as a live table with that policy.
    table = RillTable("r", retention_policy=RetentionPolicy(max_age_seconds=10.0, time_column="ts"))
    table.upsert(t, current_time=1000.0)
    table.apply_retention(current_time=1000.0)
    assert table.to_arrow().column("v").to_pylist() == [3, 4, 5]


def test_estimate_schema_row_size_uses_the_seeds_fractional_bytes():
    s1 = schema([("user_id", pa.int64()), ("score", pa.int32())])
    assert estimate_schema_row_size(s1, include_validity_bitmap=True) == 28.5
    assert estimate_schema_row_size(s1, include_validity_bitmap=False) == 28.0
    s2 = schema([("user_id", pa.int64()), ("name", pa.string()), ("tags", pa.list_(pa.string()))])
    assert estimate_schema_row_size(s2, avg_string_length=10, avg_list_length=3) == 84.625
    flags = pa.schema([pa.field("f", pa.bool_(), nullable=False), ("g", pa.bool_())])
    assert estimate_schema_row_size(flags) == 0.125 + 0.25
    nested = pa.schema([("m", pa.map_(pa.int32(), pa.int64())), ("s", pa.struct([("a", pa.int8())])),
                        ("d", pa.dictionary(pa.int16(), pa.string())), ("L", pa.large_string())])
    assert estimate_schema_row_size(nested, avg_string_length=4, avg_list_length=2,
                                    include_validity_bitmap=False) == (4 + 2 * 12) + 1 + 2 + 12
    tbl = RillTable("metrics", schema=s1)
    assert tbl.estimate_row_size() == 28.5
    assert tbl.estimate_records_capacity(memory_budget_bytes=1000, safety_factor=0.75) == 26


def test_metrics_registry_record_step_standalone_and_with_engine(filled):
    reg = MetricsRegistry()
    reg.record_step(100, 10.0)
    reg.record_step(50, 20.0)
    m = reg.get_system_metrics()
    assert m["total_records_processed"] == 150
    assert m["last_batch_records"] == 50
    assert m["last_batch_latency_ms"] == 20.0
    assert m["avg_batch_latency_ms"] == pytest.approx(0.9 * 10.0 + 0.1 * 20.0)
    assert m["records_per_second"] > 0
    with pytest.raises(ValueError):
        reg.record_step(-1, 1.0)
    filled.metrics.record_step(7, 1.0)
    assert filled.get_metrics()["total_records_processed"] == 3 + 7


def test_get_metrics_arrow_table_has_the_seeds_columns(filled):
    table = filled.metrics.get_metrics_arrow_table(filled)
    assert table.num_rows == 1
    assert table.column_names == [
        "timestamp", "cpu_usage", "total_memory", "used_memory", "pyarrow_allocated_bytes",
        "pyarrow_max_memory", "last_batch_records", "total_records_processed",
        "last_batch_latency_ms", "avg_batch_latency_ms", "records_per_second", "business_metrics"]
    row = table.to_pylist()[0]
    assert row["total_records_processed"] == 3 and row["last_batch_records"] == 3
    assert row["total_memory"] > 0 and row["used_memory"] > 0
    assert json.loads(row["business_metrics"]) == {"total": 14.0}
    assert MetricsRegistry().get_metrics_arrow_table().num_rows == 1
