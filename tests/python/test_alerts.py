"""Alerts and the metrics database (push_alert, alert, warn, error, query_metrics, KPIs)."""

import traceback

import pytest

from rills import MemoryConnector, RillEngine


@pytest.fixture
def engine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    eng = RillEngine(trigger_interval_ms=50)
    yield eng
    eng.close()


def test_user_alerts_are_persisted(engine, tmp_path):
    engine.alert("Engine started successfully")
    engine.warn("Order queue backlog exceeds threshold")
    try:
        raise RuntimeError("gateway timeout")
    except RuntimeError:
        engine.error("Payment processing failed", detail=traceback.format_exc())
    engine.push_alert("Revenue dropped", severity="warning", detail="Current: $847")
    rows = engine.query_metrics(
        "SELECT severity, source, message, detail FROM rill_alerts ORDER BY ts").to_pylist()
    by_message = {r["message"]: r for r in rows}
    assert by_message["Engine started successfully"]["severity"] == "info"
    assert by_message["Order queue backlog exceeds threshold"]["severity"] == "warning"
    assert "gateway timeout" in by_message["Payment processing failed"]["detail"]
    assert by_message["Revenue dropped"]["source"] == "user"
    assert (tmp_path / "rill_metrics.db").exists()
    with pytest.raises(ValueError):
        engine.push_alert("x", severity="catastrophic")


def test_engine_errors_become_alerts(engine):
    engine.push_alert("open the store first", severity="info")
    engine.subscribe("t", lambda n, t: 1 / 0)
    c = MemoryConnector("t")
    engine.add_connector(c)
    c.push({"v": [1]})
    engine.step()
    rows = engine.query_metrics(
        "SELECT severity, source, message, detail FROM rill_alerts WHERE source = 'engine'").to_pylist()
    assert any("ZeroDivisionError" in r["message"] and "Traceback" in r["detail"] for r in rows)


def test_dashboard_scheduled_query(engine):
    engine.register_table("orders", primary_key="order_id").upsert(
        {"order_id": [1, 2], "amount": [10.0, 99.5]})
    engine.add_dashboard_scheduled_query(name="Max Order Amount",
                                         sql="SELECT MAX(amount) AS max_amount FROM orders",
                                         interval_seconds=1.0, chart_type="bar", x_col="ts",
                                         y_col="max_amount")
    engine.step()
    tables = engine.query_metrics("SELECT table_name FROM duckdb_tables()").column(0).to_pylist()
    assert "rill_alerts" in tables
    with pytest.raises(ValueError):
        engine.add_dashboard_scheduled_query(name="bad", sql="SELECT 1", chart_type="pie")


def test_alert_rule_fires_on_a_kpi_once_within_its_cooldown(tmp_path, make_engine):
    import time

    import pyarrow as pa
    import pytest

    from rills import MemoryConnector, RillEngine, schema

    engine = make_engine(trigger_interval_ms=50, metrics_path=str(tmp_path / "rules.db"))
    try:
        engine.register_table(
            "orders",
            schema=schema([("id", pa.int64()), ("amount", pa.float64())], primary_key="id"),
        )
        conn = MemoryConnector(target_table="orders")
        engine.add_connector(conn)
        engine.add_dashboard_scheduled_query(
            "order_count", "SELECT count(*) AS n FROM orders", interval_seconds=0.01, y_col="n"
        )
        engine.add_alert_rule("many_orders", "order_count", ">", 2, cooldown_seconds=3600, severity="error")
        conn.push({"id": [1, 2, 3], "amount": [1.0, 2.0, 3.0]})
        engine.step()
        query = "SELECT source, severity, rule, value, threshold FROM rill_alerts WHERE source = 'rule'"
        assert engine.query_metrics(query).to_pylist() == [
            {"source": "rule", "severity": "error", "rule": "many_orders", "value": 3.0, "threshold": 2.0}
        ]
        assert engine.latest_kpis()["order_count"]["value"] == 3.0
        conn.push({"id": [4], "amount": [4.0]})
        engine.step()
        time.sleep(0.05)
        # Still above the threshold, but inside the cooldown: no second alert.
        assert engine.query_metrics(query).num_rows == 1
        rules = engine.query_metrics("SELECT name, metric, op, threshold FROM rill_alert_rules").to_pylist()
        assert rules == [{"name": "many_orders", "metric": "order_count", "op": ">", "threshold": 2.0}]
        engine.remove_alert_rule("many_orders")
        with pytest.raises(KeyError):
            engine.remove_alert_rule("many_orders")
        with pytest.raises(ValueError):
            engine.add_alert_rule("bad", "order_count", "=>", 1)
        with pytest.raises(ValueError):
            engine.add_alert_rule("bad", "order_count", ">", 1, severity="loud")
    finally:
        engine.close()
