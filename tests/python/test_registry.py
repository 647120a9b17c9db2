"""The C++ engine is the only registry: declared tables, views, and the live
connectors / sql_tasks / join_tasks sequences on a running engine."""

import gc

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conftest import wait_until
from rills import (
    BaseConnector,
    MemoryConnector,
    RetentionPolicy,
    RillTable,
    ScheduledSQLTask,
    TableJoinTask,
    schema,
)

TTL_MESSAGE = (
    "Retention policy (TTL) with max_rows or max_age_seconds is mandatory for "
    "append-only tables: table 'events' is in append mode without one"
)

ORDERS = {
    "order_id": [1, 2, 3, 2],
    "user_tier": ["Gold", "Silver", "Gold", "Gold"],
    "amount": [100.5, 45.0, 250.0, 60.0],
}


# Tables declared without a schema ------------------------------------------------


def test_table_registered_without_schema_takes_the_first_batch_schema(engine):
    orders = engine.register_table("orders", primary_key="order_id")  # as the seed does
    assert orders.schema is None and orders.num_rows == 0 and orders.to_arrow() is None
    assert orders.primary_key == "order_id" and orders.mode == "snapshot"
    assert engine.table_names() == ["orders"]
    assert engine.get_table("orders") == orders
    with pytest.raises(ValueError, match="'orders' is registered without a schema"):
        engine.query_sql("SELECT count(*) FROM orders")

    connector = MemoryConnector(target_table="orders")
    engine.add_connector(connector)
    connector.push(ORDERS)
    engine.step()

    # The view registered before the data sees the table the engine created.
    assert [f.name for f in orders.schema] == ["order_id", "user_tier", "amount", "z_insert_ts", "z_update_ts"]
    assert orders.schema.field("amount").type == pa.float64()
    # Upserted by the declared key (order 2 replaced by its last row); pyarrow as oracle.
    pushed = pa.table(ORDERS)
    last = {r["order_id"]: r for r in pushed.to_pylist()}
    got = engine.query_sql("SELECT order_id, user_tier, amount FROM orders ORDER BY order_id")
    assert got.to_pylist() == [last[k] for k in sorted(last)]
    assert orders.num_rows == len(pc.unique(pushed["order_id"]))


def test_declared_table_keeps_mode_and_retention_and_subscribers(engine):
    seen = []
    events = engine.register_table("events", mode="append", retention_policy=RetentionPolicy(max_rows=3))
    events.subscribe(lambda name, table: seen.append((name, table.num_rows)))
    assert events.retention_policy == RetentionPolicy(max_rows=3)
    events.upsert({"id": [1, 2]})  # a write also gives it its schema
    events.upsert({"id": [3, 4]})
    assert events.mode == "append"
    assert events.to_arrow().column("id").to_pylist() == [2, 3, 4]  # max_rows=3 kept the newest
    assert seen == [("events", 2), ("events", 3)]


def test_append_table_without_retention_is_refused_with_one_message(engine):
    with pytest.raises(ValueError) as declared:
        engine.register_table("events", mode="append")
    with pytest.raises(ValueError) as registered:
        engine.register_table("events", schema=schema([("id", pa.int64())], mode="append"))
    with pytest.raises(ValueError) as standalone:
        RillTable("events", mode="append")
    assert str(declared.value) == str(registered.value) == str(standalone.value) == TTL_MESSAGE
    assert engine.table_names() == []


def test_tables_are_views_over_the_engine(engine):
    engine.register_table("t", schema=schema([("k", pa.int64()), ("v", pa.string())], primary_key="k"))
    a, b = engine.get_table("t"), engine.tables["t"]
    assert a == b and a is not b
    a.upsert({"k": [1], "v": ["x"]})
    assert b.num_rows == 1 and b.to_arrow().column("v").to_pylist() == ["x"]
    engine.drop_table("t")
    assert engine.get_table("t") is None and engine.table_names() == []


def test_task_output_declared_without_schema_uses_its_key(engine):
    engine.register_table("totals", primary_key="user_tier")
    engine.register_table("orders", schema=schema(
        [("order_id", pa.int64()), ("user_tier", pa.string()), ("amount", pa.float64())],
        primary_key="order_id"))
    engine.get_table("orders").upsert(ORDERS)
    engine.add_sql_task(ScheduledSQLTask(
        "totals", "SELECT user_tier, SUM(amount) AS total FROM orders GROUP BY user_tier", "totals", 0.0))
    engine.step()
    totals = engine.get_table("totals")
    assert totals.primary_key == "user_tier"
    # DuckDB over the rows the engine holds is the oracle.
    orders_arrow = engine.get_table("orders").to_arrow()  # noqa: F841 - read by duckdb.sql
    expected = duckdb.sql(
        "SELECT user_tier, SUM(amount) AS total FROM orders_arrow GROUP BY user_tier ORDER BY 1").fetchall()
    got = engine.query_sql("SELECT user_tier, total FROM totals ORDER BY 1")
    assert [tuple(r.values()) for r in got.to_pylist()] == expected


# Live sequences on a running engine ------------------------------------------------


def _orders_table(engine):
    engine.register_table("orders", schema=schema(
        [("order_id", pa.int64()), ("user_tier", pa.string()), ("amount", pa.float64())],
        primary_key="order_id"))


def test_sql_tasks_append_and_delete_on_a_running_engine(running_engine):
    engine = running_engine
    _orders_table(engine)
    feed = MemoryConnector("orders")
    engine.connectors.append(feed)
    task = ScheduledSQLTask("tier_revenue", "SELECT user_tier, SUM(amount) AS revenue FROM orders GROUP BY 1",
                            "revenue_by_tier", interval_seconds=0.0)
    assert len(engine.sql_tasks) == 0
    engine.sql_tasks.append(task)  # code written for the seed does this
    assert len(engine.sql_tasks) == 1 and engine.sql_tasks[0] == task and task in engine.sql_tasks
    assert list(engine.sql_tasks) == [task] and engine.sql_tasks == [task]

    feed.push({"order_id": [1, 2], "user_tier": ["Gold", "Silver"], "amount": [10.0, 5.0]})

    def revenue():
        table = engine.get_table("revenue_by_tier")
        rows = table.to_arrow().to_pylist() if table is not None and table.num_rows else []
        return {r["user_tier"]: r["revenue"] for r in rows}

    wait_until(lambda: revenue() == {"Gold": 10.0, "Silver": 5.0}, what="the appended task's output")
    del engine.sql_tasks[0]
    assert len(engine.sql_tasks) == 0 and engine.get_metrics()["tasks"] == {}
    feed.push({"order_id": [3], "user_tier": ["Gold"], "amount": [100.0]})
    wait_until(lambda: engine.get_table("orders").num_rows == 3, what="the third order")
    engine.step()  # one more full tick after the row arrived: a task would have run
    assert revenue() == {"Gold": 10.0, "Silver": 5.0}

    engine.sql_tasks.extend([task])
    wait_until(lambda: revenue() == {"Gold": 110.0, "Silver": 5.0}, what="the re-added task")
    engine.sql_tasks.remove(task)
    assert engine.sql_tasks == []
    with pytest.raises(ValueError, match="not one of this engine's SQL tasks"):
        engine.sql_tasks.remove(task)
    with pytest.raises(TypeError, match="ordered by name"):
        engine.sql_tasks.insert(0, task)


def test_join_tasks_append_and_remove_on_a_running_engine(running_engine):
    engine = running_engine
    engine.register_table("users", primary_key="user_id")
    engine.register_table("orders", primary_key="order_id")
    users, orders = MemoryConnector("users"), MemoryConnector("orders")
    engine.connectors.extend([users, orders])
    join = TableJoinTask("by_region", "orders", "users", keys="user_id", output_table="by_region",
                         join_type="left", group_by="region", aggregations=[("amount", "mean")])
    engine.join_tasks.append(join)
    assert engine.join_tasks == [join]
    held = engine.join_tasks[0]
    assert held is not join and held.join_type == "left outer" and held.aggregations == [("amount", "avg")]

    users.push({"user_id": [1, 2], "region": ["EU", "US"]})
    orders.push({"order_id": [10, 11, 12], "user_id": [1, 1, 2], "amount": [2.0, 4.0, 9.0]})

    def regions():
        table = engine.get_table("by_region")
        rows = table.to_arrow().to_pylist() if table is not None and table.num_rows else []
        return {r["region"]: r["amount_avg"] for r in rows}

    wait_until(lambda: regions() == {"EU": 3.0, "US": 9.0}, what="the appended join's output")
    engine.join_tasks.pop()
    assert len(engine.join_tasks) == 0
    assert "by_region" not in engine.get_metrics()["tasks"]


def test_connectors_append_and_remove_on_a_running_engine(running_engine):
    engine = running_engine
    engine.register_table("orders", primary_key="order_id")
    first, second = MemoryConnector("orders", name="b_feed"), MemoryConnector("orders", name="a_feed")
    engine.connectors.append(first)
    engine.connectors.append(second)
    engine.connectors.append(first)  # the same connector again: no-op
    assert len(engine.connectors) == 2
    assert engine.connectors[0] is second and engine.connectors[1] is first  # ordered by name
    assert first in engine.connectors

    first.push({"order_id": [1, 2], "amount": [1.0, 2.0]})
    wait_until(lambda: engine.get_table("orders").num_rows == 2, what="rows from the appended connector")
    engine.connectors.remove(first)
    assert engine.connectors == [second] and first not in engine.connectors
    first.push({"order_id": [3], "amount": [3.0]})  # detached: never reaches the table
    second.push({"order_id": [4], "amount": [4.0]})
    wait_until(lambda: engine.get_table("orders").num_rows == 3, what="the second connector's row")
    engine.step()
    assert sorted(engine.get_table("orders").to_arrow().column("order_id").to_pylist()) == [1, 2, 4]
    assert first.buffered_records == 1
    del engine.connectors[0]
    assert len(engine.connectors) == 0


class _Counter(BaseConnector):
    def __init__(self):
        super().__init__("counted", name="counter")
        self.calls = 0

    def read_batch(self):
        self.calls += 1
        return {"n": [self.calls]} if self.calls <= 3 else None


def test_python_connector_appended_to_a_running_engine(running_engine):
    engine = running_engine
    connector = _Counter()
    engine.connectors.append(connector)
    assert engine.connectors[0] is connector
    wait_until(lambda: engine.get_table("counted") is not None
               and engine.get_table("counted").num_rows == 3, what="three polled batches")
    assert sorted(engine.get_table("counted").to_arrow().column("n").to_pylist()) == [1, 2, 3]
    engine.connectors.clear()
    assert engine.connectors == []


def test_connectors_read_back_from_the_engine_when_the_wrapper_is_gone(engine):
    engine.add_connector(MemoryConnector("orders", name="feed", max_buffer_records=7,
                                         max_buffer_bytes=4096, on_overflow="drop_newest"))
    gc.collect()
    (view,) = engine.connectors
    assert isinstance(view, MemoryConnector)
    assert (view.name, view.target_table, view.max_buffer_records, view.max_buffer_bytes, view.on_overflow) == (
        "feed", "orders", 7, 4096, "drop_newest")
    view.push({"order_id": list(range(10))})  # the engine's buffer: 7 rows fit
    engine.step()
    assert engine.get_table("orders").num_rows == 7
    assert engine.connectors[0] is view


def test_unsubscribe_before_a_declared_table_has_a_schema(engine):
    kept, dropped = [], []
    engine.subscribe("orders", lambda name, table: kept.append(table.num_rows))  # declares "orders"
    dropped_cb = lambda name, table: dropped.append(table.num_rows)  # noqa: E731
    engine.subscribe("orders", dropped_cb)
    engine.subscribe("orders", dropped_cb)  # the same callback twice: one subscription
    engine.get_table("orders").unsubscribe(dropped_cb)
    assert engine.get_table("orders").schema is None
    engine.get_table("orders").upsert({"order_id": [1, 2]})
    engine.get_table("orders").upsert({"order_id": [3]})
    assert kept == [2, 3] and dropped == []


def test_removing_a_connector_writes_its_buffer_into_a_declared_table(engine):
    engine.register_table("orders", primary_key="order_id")
    feed = MemoryConnector("orders")
    engine.connectors.append(feed)
    feed.push({"order_id": [1, 1, 2], "amount": [1.0, 2.0, 3.0]})
    engine.connectors.remove(feed)  # no tick ran: removal writes what was buffered
    orders = engine.get_table("orders")
    assert orders.primary_key == "order_id"
    rows = orders.to_arrow().select(["order_id", "amount"]).to_pylist()
    assert sorted((r["order_id"], r["amount"]) for r in rows) == [(1, 2.0), (2, 3.0)]


def test_views_of_a_closed_engine_raise(make_engine):
    engine = make_engine(trigger_interval_ms=10)
    table = engine.register_table("t", primary_key="k")
    engine.close()
    with pytest.raises(RuntimeError, match="closed"):
        table.num_rows
