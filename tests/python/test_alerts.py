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
