"""Deletes (issue 25): RillTable.delete, MemoryConnector.delete and op_column,
through the engine's tick, seen by SQL, a sink's change feed and checkpoints;
append tables refusing them. A randomized sequence of mixed upserts and
deletes is checked against a plain dict applied in the same order (the
oracle), and DuckDB over the table's Arrow rows."""

import random

import duckdb
import pyarrow as pa
import pytest

import rills
from rills import Checkpointer, MemoryConnector, RillTable, schema
from rills.sinks import PythonSink

ORDERS = schema([("id", pa.int64()), ("status", pa.string()), ("amount", pa.float64())],
                primary_key="id")


@pytest.fixture
def engine(make_engine):
    eng = make_engine(trigger_interval_ms=50, metrics_path=None)
    eng.register_table("orders", schema=ORDERS)
    eng.register_table("log", schema=schema([("id", pa.int64())], mode="append"),
                       retention_policy=rills.RetentionPolicy(max_rows=100))
    return eng


def rows_of(table):
    arrow = table.to_arrow()
    return {r["id"]: (r["status"], r["amount"]) for r in arrow.to_pylist()} if arrow else {}


def test_rill_table_delete_takes_every_key_form():
    t = RillTable("t", schema=ORDERS, primary_key="id")
    t.upsert({"id": list(range(10)), "status": ["new"] * 10, "amount": [float(i) for i in range(10)]})
    v = t.version
    t.delete({"id": [1, 2]})                              # a dict of key columns
    t.delete({"id": 3})                                   # one key
    t.delete([4, 5])                                      # values of a single-column key
    t.delete([{"id": 6}])                                 # row dicts
    t.delete(pa.table({"id": pa.array([7], pa.int32())}))  # a table, cast to the key's type
    t.delete(pa.record_batch({"id": [8, 99], "status": ["x", "y"]}))  # extra columns ignored
    assert sorted(rows_of(t)) == [0, 9]
    assert t.version == v + 6
    t.delete([99])  # absent: nothing changes, no new version
    assert t.version == v + 6
    with pytest.raises(ValueError, match="no column 'id'"):
        t.delete({"status": ["new"]})


def test_append_and_unkeyed_tables_refuse_deletes():
    log = RillTable("log", schema=schema([("id", pa.int64())]), mode="append",
                    retention_policy=rills.RetentionPolicy(max_rows=10))
    log.upsert({"id": [1]})
    with pytest.raises(ValueError, match="append table"):
        log.delete({"id": [1]})
    plain = RillTable("plain", schema=schema([("id", pa.int64())]))
    plain.upsert({"id": [1]})
    with pytest.raises(ValueError, match="not keyed"):
        plain.delete({"id": [1]})
    assert log.num_rows == 1 and plain.num_rows == 1


def test_memory_connector_delete_keeps_its_place_among_pushes(engine):
    feed = MemoryConnector("orders", schema=ORDERS)
    engine.add_connector(feed)
    feed.push({"id": [1, 2, 3], "status": ["new"] * 3, "amount": [1.0, 2.0, 3.0]})
    feed.delete({"id": [2]})
    feed.push({"id": [2], "status": ["back"], "amount": [20.0]})  # after the delete: kept
    feed.delete([3])  # the schema's single-column key
    engine.step()
    assert rows_of(engine.get_table("orders")) == {1: ("new", 1.0), 2: ("back", 20.0)}
    # SQL sees it.
    assert engine.query_sql("SELECT count(*) AS n FROM orders").column("n").to_pylist() == [2]


def test_op_column_mixes_upserts_and_deletes_in_one_push_last_wins(engine):
    feed = MemoryConnector("orders", op_column="_op")
    engine.add_connector(feed)
    feed.push({"id": [1, 1, 2, 1, 3, 3], "status": ["a", None, "b", "c", "x", None],
               "amount": [1.0, None, 2.0, 3.0, 9.0, None],
               "_op": ["insert", "delete", "c", "u", "r", "d"]})
    engine.step()
    assert rows_of(engine.get_table("orders")) == {1: ("c", 3.0), 2: ("b", 2.0)}
    assert engine.get_table("orders").schema.names[:3] == ["id", "status", "amount"]
    assert "_op" not in engine.get_table("orders").schema.names
    # A bad operation rejects that batch only, with the value in the reason.
    feed.push({"id": [5], "status": ["s"], "amount": [5.0], "_op": ["merge"]})
    feed.push({"id": [6], "status": ["s"], "amount": [6.0], "_op": ["insert"]})
    engine.step()
    assert sorted(rows_of(engine.get_table("orders"))) == [1, 2, 6]
    reasons = engine.query_sql("SELECT reason FROM rill_rejects").column("reason").to_pylist()
    assert any("unknown operation 'merge'" in r for r in reasons)


def test_deletes_to_an_append_table_are_rejected_with_a_reason(engine):
    feed = MemoryConnector("log")
    engine.add_connector(feed)
    feed.push({"id": [1, 2]})
    feed.delete({"id": [1]})
    engine.step()
    assert sorted(engine.get_table("log").to_arrow().column("id").to_pylist()) == [1, 2]
    reasons = engine.query_sql(
        "SELECT reason, rows FROM rill_rejects WHERE table_name = 'log'").to_pylist()
    assert len(reasons) == 1 and "append table" in reasons[0]["reason"]
    assert reasons[0]["rows"] == 1


def test_a_sink_sees_deletes_with_the_last_values(engine):
    got = []
    engine.add_sink(PythonSink("changes", "orders", got.append))
    table = engine.get_table("orders")
    table.upsert({"id": [1, 2], "status": ["new", "new"], "amount": [1.0, 2.0]})
    table.upsert({"id": [2], "status": ["paid"], "amount": [2.5]})
    table.delete({"id": [2]})
    engine.sinks[0].flush(timeout=30)
    rows = [(r["id"], r["_op"], r["status"]) for t in got for r in t.to_pylist()]
    assert rows[-1] == (2, "delete", "paid")
    assert sorted(rows) == sorted([(1, "insert", "new"), (2, "insert", "new"),
                                   (2, "update", "paid"), (2, "delete", "paid")])


def test_checkpoints_hold_the_state_after_deletes(engine, tmp_path, make_engine):
    table = engine.get_table("orders")
    table.upsert({"id": [1, 2, 3], "status": ["a", "b", "c"], "amount": [1.0, 2.0, 3.0]})
    table.delete([2])
    Checkpointer(tmp_path).save_snapshots(engine)
    fresh = make_engine(metrics_path=None)
    Checkpointer(tmp_path).restore_snapshots(fresh)
    restored = fresh.get_table("orders")
    assert rows_of(restored) == {1: ("a", 1.0), 3: ("c", 3.0)}
    restored.delete([1])  # still keyed after the restore
    assert sorted(rows_of(restored)) == [3]


@pytest.mark.parametrize("seed", range(6))
def test_random_upserts_and_deletes_match_a_dict_and_duckdb(engine, seed):
    rng = random.Random(seed)
    feed = MemoryConnector("orders", schema=ORDERS, op_column="op")
    engine.add_connector(feed)
    oracle = {}
    for _ in range(25):
        for _ in range(rng.randint(1, 4)):  # several pushes per tick
            ids, status, amount, ops = [], [], [], []
            for _ in range(rng.randint(1, 30)):
                k = rng.randint(0, 40)
                if rng.random() < 0.35:
                    ids.append(k), status.append(None), amount.append(None)
                    ops.append(rng.choice(["delete", "d", "DELETE"]))
                    oracle.pop(k, None)
                else:
                    s, a = rng.choice(["new", "paid", "sent"]), float(rng.randint(0, 999))
                    ids.append(k), status.append(s), amount.append(a)
                    ops.append(rng.choice(["insert", "upsert", "update", "c", "u", None]))
                    oracle[k] = (s, a)
            if rng.random() < 0.2:
                keys = rng.sample(range(41), rng.randint(1, 5))
                feed.push(pa.table({"id": ids, "status": status, "amount": amount, "op": ops},
                                   schema=pa.schema([("id", pa.int64()), ("status", pa.string()),
                                                    ("amount", pa.float64()), ("op", pa.string())])))
                feed.delete({"id": keys})
                for k in keys:
                    oracle.pop(k, None)
            else:
                feed.push({"id": ids, "status": status, "amount": amount, "op": ops})
        engine.step()
        table = engine.get_table("orders")
        assert rows_of(table) == oracle
        arrow = table.to_arrow()
        got = duckdb.sql("SELECT id, status, amount FROM arrow ORDER BY id").fetchall()
        assert got == sorted((k, s, a) for k, (s, a) in oracle.items())
    assert engine.query_sql("SELECT count(*) AS n FROM rill_rejects").column("n").to_pylist() == [0]
