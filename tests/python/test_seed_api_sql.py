"""Scheduled SQL tasks, DuckDBBridge and SQL error classes of the seed's API (issue 14)."""

import time

import duckdb
import pyarrow as pa
import pytest

import rills
from rills import DuckDBBridge, RillEngine, ScheduledSQLTask

QUERY = "SELECT category, SUM(amount) AS total, COUNT(*) AS n FROM orders GROUP BY category"


def _orders(engine, n=50, offset=0):
    table = engine.get_or_create_table("orders", primary_key="order_id")
    data = pa.table({
        "order_id": list(range(offset, offset + n)),
        "category": [["books", "games", "tools"][i % 3] for i in range(offset, offset + n)],
        "amount": [float(i % 17) for i in range(offset, offset + n)],
    })
    table.upsert(data)
    return data


def _oracle(data):
    return sorted(duckdb.sql(QUERY.replace("orders", "data")).fetchall())


def _rows(engine, name):
    return sorted((r["category"], r["total"], r["n"]) for r in engine.get_table(name).to_arrow().to_pylist())


@pytest.mark.parametrize("prepared", [True, False])
def test_sql_task_results_match_duckdb_with_and_without_prepared_statements(engine, prepared):
    data = _orders(engine)
    task = ScheduledSQLTask("summary", QUERY, "summary_out", interval_seconds=0.0,
                            use_prepared_statements=prepared)
    assert task.use_prepared_statements is prepared
    engine.add_sql_task(task)
    engine.step()
    assert _rows(engine, "summary_out") == _oracle(data)
    # Re-executed on new data (the prepared plan reads the current version).
    more = _orders(engine, n=30, offset=50)
    engine.step()
    assert _rows(engine, "summary_out") == _oracle(pa.concat_tables([data, more]))
    # Re-registering the table it reads: the statement is prepared again.
    engine.drop_table("orders")
    fresh = _orders(engine, n=9, offset=1000)
    engine.step()
    assert _rows(engine, "summary_out") == _oracle(fresh)
    assert engine.sql_tasks[0].use_prepared_statements is prepared
    assert engine.get_metrics()["tasks"]["summary"]["errors"] == 0


def test_prepared_task_reports_errors_and_recovers(engine):
    task = ScheduledSQLTask("t", "SELECT SUM(amount) AS s FROM orders", "out", interval_seconds=0.0)
    engine.add_sql_task(task)
    engine.step()  # no table yet: the task fails, the tick goes on
    stats = engine.get_metrics()["tasks"]["t"]
    assert stats["errors"] == 1 and "orders" in stats["last_error"]
    _orders(engine, n=4)
    engine.step()
    assert engine.get_table("out").to_arrow().column("s").to_pylist() == [0.0 + 1 + 2 + 3]


def test_is_due_and_last_run_time(engine):
    task = ScheduledSQLTask("t", "SELECT 1 AS one", "out", interval_seconds=5.0)
    assert task.last_run_time == 0.0
    assert task.is_due(time.time()) and task.is_due(10.0)
    task.last_run_time = 100.0
    assert not task.is_due(104.9) and task.is_due(105.0)
    task.last_run_time = 0.0
    engine.add_sql_task(task)
    before = time.time()
    engine.step()
    after = time.time()
    assert before - 1 <= task.last_run_time <= after + 1
    assert not task.is_due(task.last_run_time + 4.0)
    assert task.is_due(task.last_run_time + 5.0)
    assert engine.sql_tasks[0].last_run_time == task.last_run_time


def test_duckdb_bridge_query_register_and_run_due_tasks(engine):
    bridge = engine.duckdb
    assert isinstance(bridge, DuckDBBridge)
    extra = pa.table({"k": [1, 2, 3], "v": [10.0, 20.0, 30.0]})
    bridge.register("extra", extra)
    assert bridge.query("SELECT SUM(v) AS s FROM extra").to_pylist() == [{"s": 60.0}]
    # register() on a taken name replaces the table, as DuckDB's register does.
    bridge.register("extra", pa.table({"k": [7], "w": ["x"]}))
    assert bridge.query("SELECT * FROM extra").select(["k", "w"]).to_pylist() == [{"k": 7, "w": "x"}]

    data = _orders(engine)
    engine.add_sql_task(ScheduledSQLTask("s", QUERY, "by_cat", interval_seconds=3600.0))
    assert engine.get_table("by_cat") is None
    bridge.run_due_tasks()
    assert _rows(engine, "by_cat") == _oracle(data)
    first = engine.sql_tasks[0].last_run_time
    _orders(engine, n=10, offset=50)
    bridge.run_due_tasks()  # not due again for an hour: unchanged
    assert _rows(engine, "by_cat") == _oracle(data)
    assert engine.sql_tasks[0].last_run_time == first
    bridge.run_due_tasks(current_time=first + 3600.0)
    assert engine.get_table("by_cat").to_arrow().column("n").to_pylist() != []
    assert engine.get_metrics()["tasks"]["s"]["runs"] == 2


def test_external_duckdb_connection_is_refused_clearly():
    con = duckdb.connect()
    with pytest.raises(ValueError, match="duckdb_connection"):
        RillEngine(duckdb_connection=con)
    with pytest.raises(ValueError, match="connection"):
        DuckDBBridge(object(), connection=con)
    RillEngine(duckdb_connection=None).close()


@pytest.mark.parametrize("sql, cls, error_type", [
    ("SELECT * FROM no_such_table", rills.CatalogError, "Catalog"),
    ("SELEC 1", rills.ParserError, "Parser"),
    ("SELECT no_such_column FROM t", rills.BinderError, "Binder"),
    ("SELECT CAST('abc' AS INTEGER) FROM t", rills.ConversionError, "Conversion"),
])
def test_query_sql_errors_name_duckdbs_error_class(engine, sql, cls, error_type):
    engine.register_table("t", schema=pa.schema([("a", pa.int64())])).upsert(pa.table({"a": [1]}))
    with pytest.raises(cls) as info:
        engine.query_sql(sql)
    assert isinstance(info.value, rills.SQLError) and isinstance(info.value, ValueError)
    assert info.value.error_type == error_type
    # DuckDB's own message is kept.
    assert f"{error_type} Error" in str(info.value)


def test_errors_of_other_kinds_are_not_sql_errors(engine):
    with pytest.raises(ValueError) as info:
        engine.query_sql("CREATE TABLE x (a INT)")
    assert not isinstance(info.value, rills.SQLError)
