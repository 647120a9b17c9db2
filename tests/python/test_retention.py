"""Retention: max rows and max age pruning."""

import pyarrow as pa
import pytest

from rills import RetentionPolicy, RillEngine, RillTable, schema


def test_max_rows_keeps_latest():
    table = RillTable("events", retention_policy=RetentionPolicy(max_rows=3))
    table.upsert(pa.table({"id": [1, 2, 3, 4, 5], "val": list("abcde")}))
    assert table.num_rows == 3
    assert table.to_arrow().column("id").to_pylist() == [3, 4, 5]
    table.upsert(pa.table({"id": [6], "val": ["f"]}))
    assert table.to_arrow().column("id").to_pylist() == [4, 5, 6]


def test_max_age_on_user_time_column():
    table = RillTable("metrics", retention_policy=RetentionPolicy(max_age_seconds=10.0, time_column="ts"))
    table.upsert(pa.table({"ts": [985.0, 989.0, 991.0, 995.0, 998.0], "metric": [10, 20, 30, 40, 50]}),
                 current_time=1000.0)
    table.apply_retention(current_time=1000.0)
    assert table.to_arrow().column("ts").to_pylist() == [991.0, 995.0, 998.0]
    table.apply_retention(current_time=1006.0)
    assert table.to_arrow().column("ts").to_pylist() == [998.0]


def test_max_age_on_insert_time_and_timestamps():
    s = schema([("id", pa.int64())], mode="append")
    table = RillTable("append_ttl", schema=s, retention_policy=RetentionPolicy(max_age_seconds=60))
    table.upsert({"id": [1]}, current_time=1000.0)
    table.upsert({"id": [2]}, current_time=1050.0)
    table.apply_retention(current_time=1070.0)
    assert table.to_arrow().column("id").to_pylist() == [2]

    ts = pa.array([0, 50_000, 100_000], pa.timestamp("ms"))
    t2 = RillTable("ts_ttl", retention_policy=RetentionPolicy(max_age_seconds=60, time_column="t"))
    t2.upsert(pa.table({"t": ts, "v": [1, 2, 3]}), current_time=120.0)
    assert t2.to_arrow().column("v").to_pylist() == [3]


def test_engine_applies_retention_each_tick(engine):
    engine.register_table("window", primary_key="id",
                          retention_policy=RetentionPolicy(max_rows=100))
    tbl = engine.get_table("window")
    from rills import MemoryConnector
    c = MemoryConnector("window")
    engine.add_connector(c)
    for i in range(5):
        c.push({"id": list(range(i * 50, i * 50 + 50)), "v": [i] * 50})
        engine.step()
    assert tbl.num_rows == 100
    assert sorted(tbl.to_arrow().column("id").to_pylist()) == list(range(150, 250))


def test_policy_validation():
    with pytest.raises(ValueError):
        RetentionPolicy(max_rows=-1)
    with pytest.raises(ValueError):
        RetentionPolicy(max_age_seconds=-5)
    assert not RetentionPolicy().enabled
    with pytest.raises(KeyError, match="nope"):
        RillTable("t", schema=schema([("a", pa.int64())]),
                  retention_policy=RetentionPolicy(max_age_seconds=1, time_column="nope"))
