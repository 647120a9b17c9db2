"""Schema enrichment, primary-key and mode extraction, row size estimates."""

import pyarrow as pa
import pytest

from rills import RillTable, estimate_schema_row_size, extract_mode, extract_primary_key, schema


def test_schema_adds_system_columns_and_metadata():
    s = schema([("user_id", pa.int64()), ("email", pa.string())], primary_key="user_id")
    assert s.names == ["user_id", "email", "z_insert_ts", "z_update_ts"]
    assert s.field("z_insert_ts").type == pa.float64()
    assert s.metadata[b"primary_key"] == b"user_id"
    assert extract_primary_key(s) == "user_id"
    assert extract_mode(s) == "snapshot"


def test_composite_key_and_mode_round_trip():
    s = schema([("tenant_id", pa.string()), ("event_id", pa.int64())],
               primary_key=["tenant_id", "event_id"], mode="append")
    assert s.metadata[b"primary_key"] == b"tenant_id,event_id"
    assert extract_primary_key(s) == ["tenant_id", "event_id"]
    assert extract_mode(s) == "append"
    assert extract_mode(schema([("a", pa.int8())], mode="upsert")) == "snapshot"


def test_schema_accepts_fields_schema_and_extra_metadata():
    base = pa.schema([pa.field("a", pa.int32())], metadata={"owner": "x"})
    s = schema(base, primary_key="a", metadata={"team": "y"})
    assert s.metadata[b"owner"] == b"x" and s.metadata[b"team"] == b"y"
    assert schema([pa.field("b", pa.string())]).names[0] == "b"


def test_schema_rejects_bad_arguments():
    with pytest.raises(ValueError, match="'missing' is not a field"):
        schema([("a", pa.int64())], primary_key="missing")
    with pytest.raises(ValueError, match="mode must be"):
        schema([("a", pa.int64())], mode="sideways")
    with pytest.raises(TypeError):
        schema(["not-a-field"])


def test_extract_from_plain_schema():
    assert extract_primary_key(pa.schema([("a", pa.int64())])) is None
    assert extract_primary_key(None) is None
    assert extract_mode(None) == "snapshot"


def test_table_takes_key_from_schema_metadata():
    s = schema([("sku", pa.string()), ("qty", pa.int64())], primary_key="sku")
    tbl = RillTable("inventory", schema=s)
    assert tbl.primary_key == "sku"
    tbl.upsert(pa.table({"sku": ["A", "B"], "qty": [10, 20]}))
    tbl.upsert(pa.table({"sku": ["A"], "qty": [15]}))
    assert tbl.num_rows == 2
    rows = {r["sku"]: r for r in tbl.to_arrow().to_pylist()}
    assert rows["A"]["qty"] == 15
    assert rows["A"]["z_insert_ts"] <= rows["A"]["z_update_ts"]


def test_row_size_estimates():
    ints = pa.schema([("a", pa.int64()), ("b", pa.float64())])
    strings = pa.schema([("s", pa.string())])
    assert estimate_schema_row_size(ints) >= 16
    assert estimate_schema_row_size(strings, avg_string_length=100) > estimate_schema_row_size(
        strings, avg_string_length=10)
    tbl = RillTable("t", schema=schema([("a", pa.int64())]))
    size = tbl.estimate_row_size()
    assert size > 0
    assert tbl.estimate_records_capacity(1_000_000) == int(1_000_000 * 0.75 / size)
    assert RillTable("empty").estimate_row_size() is None
