"""Snapshot vs append mode, and the mandatory TTL of append tables."""

import pyarrow as pa
import pytest

from rills import RetentionPolicy, RillEngine, RillTable, extract_mode, schema

TTL_MESSAGE = r"Retention policy \(TTL\).*is mandatory for append-only tables"


def test_append_table_without_ttl_is_rejected():
    with pytest.raises(ValueError, match=TTL_MESSAGE):
        RillTable("logs", mode="append", retention_policy=None)
    s = schema([("msg", pa.string())], mode="append")
    assert extract_mode(s) == "append"
    with pytest.raises(ValueError, match=TTL_MESSAGE):
        RillTable("logs_schema", schema=s)
    with pytest.raises(ValueError, match=TTL_MESSAGE):
        RillTable("logs_empty_policy", mode="append", retention_policy=RetentionPolicy())


def test_engine_append_table_without_ttl_is_rejected(engine):
    with pytest.raises(ValueError, match=TTL_MESSAGE):
        engine.register_table("logs", mode="append")
    with pytest.raises(ValueError, match=TTL_MESSAGE):
        engine.register_table("logs2", schema=schema([("m", pa.string())], mode="append"))


def test_append_mode_keeps_duplicate_keys():
    s = schema([("id", pa.int64()), ("event", pa.string())], primary_key="id", mode="append")
    tbl = RillTable("events", schema=s, retention_policy=RetentionPolicy(max_rows=10))
    tbl.upsert(pa.table({"id": [1], "event": ["login"]}))
    tbl.upsert(pa.table({"id": [1], "event": ["logout"]}))
    assert tbl.mode == "append"
    assert tbl.num_rows == 2
    assert tbl.to_arrow().column("event").to_pylist() == ["login", "logout"]


def test_snapshot_mode_replaces_by_key():
    s = schema([("id", pa.int64()), ("state", pa.string())], primary_key="id", mode="snapshot")
    tbl = RillTable("user_state", schema=s)
    tbl.upsert(pa.table({"id": [1], "state": ["active"]}))
    first = tbl.to_arrow().to_pylist()[0]
    tbl.upsert(pa.table({"id": [1], "state": ["idle"]}), current_time=first["z_update_ts"] + 5)
    assert tbl.num_rows == 1
    row = tbl.to_arrow().to_pylist()[0]
    assert row["state"] == "idle"
    assert row["z_insert_ts"] == first["z_insert_ts"]  # kept from the replaced row
    assert row["z_update_ts"] == first["z_update_ts"] + 5


def test_snapshot_without_key_appends():
    tbl = RillTable("plain")
    tbl.upsert({"v": [1, 2]})
    tbl.upsert({"v": [2]})
    assert tbl.to_arrow().column("v").to_pylist() == [1, 2, 2]


def test_mode_validation():
    with pytest.raises(ValueError, match="mode must be"):
        RillTable("x", mode="merge")
    with pytest.raises(TypeError):
        RillTable("x", retention_policy={"max_rows": 3})


def test_incompatible_rows_name_the_column():
    s = schema([("id", pa.int64()), ("amount", pa.float64())], primary_key="id")
    tbl = RillTable("t", schema=s)
    with pytest.raises(ValueError, match="amount"):
        tbl.upsert(pa.table({"id": [1], "amount": ["not a number"]}))
