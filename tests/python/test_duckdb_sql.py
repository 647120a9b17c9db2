"""SQL over live tables and scheduled SQL tasks; results checked against DuckDB."""

import time

import duckdb
import pyarrow as pa
import pytest

from rills import MemoryConnector, RillEngine, ScheduledSQLTask


def _users(engine):
    tbl = engine.register_table("users", primary_key="user_id")
    tbl.upsert(pa.table({"user_id": [1, 2, 3], "tier": ["free", "pro", "pro"], "spend": [0.0, 99.0, 150.0]}))
    return tbl


def test_query_matches_duckdb(engine):
    tbl = _users(engine)
    sql = "SELECT tier, SUM(spend) AS total_spend, COUNT(*) AS cnt FROM users GROUP BY tier ORDER BY tier"
    result = engine.query_sql(sql)
    users = tbl.to_arrow()  # noqa: F841  (scanned by the DuckDB oracle below)
    oracle = duckdb.sql(sql).fetch_arrow_table()
    assert result.to_pylist() == oracle.to_pylist()
    assert engine.duckdb.query("SELECT COUNT(*) AS n FROM users").to_pylist() == [{"n": 3}]


def test_query_errors_are_value_errors(engine):
    _users(engine)
    with pytest.raises(ValueError, match="no_such_table"):
        engine.query_sql("SELECT * FROM no_such_table")
    with pytest.raises(ValueError):
        engine.query_sql("SELEKT 1")


def test_scheduled_task_runs_on_first_tick_and_when_due(engine):
    tbl = engine.register_table("orders", primary_key="order_id")
    tbl.upsert(pa.table({"order_id": [101, 102], "category": ["electronics", "books"], "amount": [500.0, 30.0]}))
    task = ScheduledSQLTask(
        name="summary_job",
        query="SELECT category, SUM(amount) AS total FROM orders GROUP BY category",
        output_table="category_summary",
        interval_seconds=0.1,
        primary_key="category",
    )
    engine.add_sql_task(task)
    engine.step()
    summary = engine.get_table("category_summary")
    assert summary is not None
    assert {r["category"]: r["total"] for r in summary.to_arrow().to_pylist()} == {
        "electronics": 500.0, "books": 30.0}
    tbl.upsert(pa.table({"order_id": [103], "category": ["books"], "amount": [12.5]}))
    engine.step()  # not due yet
    assert {r["category"]: r["total"] for r in summary.to_arrow().to_pylist()}["books"] == 30.0
    time.sleep(0.12)
    engine.step()
    assert {r["category"]: r["total"] for r in summary.to_arrow().to_pylist()}["books"] == 42.5
    engine.remove_sql_task(task)
    assert engine.sql_tasks == []


def test_failing_task_is_recorded_and_loop_goes_on(engine):
    engine.register_table("t", primary_key="id").upsert({"id": [1]})
    engine.add_sql_task(ScheduledSQLTask("broken", "SELECT nope FROM t", "out", 0.0))
    engine.step()
    engine.step()
    assert any(e["component"] == "broken" for e in engine.recent_events())
    assert engine.get_metrics()["tasks"]["broken"]["errors"] >= 1


def test_sql_sees_connector_data_live(make_engine):
    engine = make_engine(trigger_interval_ms=20)
    c = MemoryConnector("raw_metrics")
    engine.add_connector(c)
    engine.add_sql_task(ScheduledSQLTask(
        "agg", "SELECT metric_name, SUM(value) AS total FROM raw_metrics GROUP BY metric_name",
        "metric_totals", interval_seconds=0.0))
    c.push({"metric_name": ["cpu", "mem", "cpu"], "value": [10.0, 50.0, 15.0]})
    engine.step()
    engine.step()
    totals = {r["metric_name"]: r["total"] for r in engine.get_table("metric_totals").to_arrow().to_pylist()}
    assert totals == {"cpu": 25.0, "mem": 50.0}
    engine.close()


def test_dictionary_columns_upsert_and_sql(engine):
    from rills import schema
    s = schema([("user_id", pa.int64()), ("tier", pa.dictionary(pa.int8(), pa.string())),
                ("score", pa.float64())], primary_key="user_id")
    engine.register_table("users", schema=s)
    c = MemoryConnector("users", schema=s)
    engine.add_connector(c)
    tier1 = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int8()), pa.array(["bronze", "silver"]))
    c.push(pa.RecordBatch.from_arrays([pa.array([1, 2, 3]), tier1, pa.array([10.0, 20.0, 30.0])],
                                      names=["user_id", "tier", "score"]))
    engine.step()
    tier2 = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int8()), pa.array(["silver", "gold"]))
    c.push(pa.RecordBatch.from_arrays([pa.array([2, 4]), tier2, pa.array([25.0, 40.0])],
                                      names=["user_id", "tier", "score"]))
    engine.step()
    assert engine.get_table("users").num_rows == 4
    counts = {r["tier"]: r["cnt"] for r in engine.query_sql(
        "SELECT tier::VARCHAR AS tier, COUNT(*) AS cnt FROM users GROUP BY 1").to_pylist()}
    assert counts == {"bronze": 2, "silver": 1, "gold": 1}
