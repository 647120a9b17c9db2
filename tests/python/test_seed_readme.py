"""The seed README's examples (sections 2 and 3), run unchanged.

test_section_2_without_metrics_api also runs section 2 without its metrics API
lines (add_dashboard_scheduled_query, query_metrics), so a failure there tells
the core from the metrics database.
"""

import pytest

from conftest import wait_until

SECTION_2 = '''
import time
import pyarrow as pa
import pyarrow.compute as pc
from rills import RillEngine, MemoryConnector, ScheduledSQLTask, RetentionPolicy, schema

# 1. Initialize Rill Engine with a 200ms micro-batch interval and 500 MB memory budget
engine = RillEngine(
    trigger_interval_ms=200, 
    memory_budget_mb=500.0,
    quack_address="quack:0.0.0.0:9494", 
    quack_token="secret_token"
)

# 2. Define schema with primary key and register table
orders_schema = schema([
    ("order_id", pa.int64()),
    ("user_tier", pa.string()),
    ("amount", pa.float64())
], primary_key="order_id", mode="snapshot")

engine.register_table("orders", schema=orders_schema)

# 3. Schedule a live dashboard query to compute business KPIs
engine.add_dashboard_scheduled_query(
    name="Max Order Amount",
    sql="SELECT MAX(amount) as max_amount FROM orders",
    interval_seconds=1.0,
    chart_type="bar",
    x_col="ts",
    y_col="max_amount"
)

# 4. Attach memory connector to 'orders' table
connector = MemoryConnector(target_table="orders")
engine.add_connector(connector)

# 5. Add a Scheduled DuckDB SQL Query running every 1 second
sql_task = ScheduledSQLTask(
    name="tier_revenue",
    query="SELECT user_tier, SUM(amount) as total_revenue, COUNT(*) as order_count FROM orders GROUP BY user_tier",
    output_table="revenue_by_tier",
    interval_seconds=1.0
)
engine.add_sql_task(sql_task)

# 6. Start engine and Quack server (`quack:0.0.0.0:9494`)
engine.start()

# Push incoming events directly to connector
connector.push({
    "order_id": [1, 2, 3],
    "user_tier": ["Gold", "Silver", "Gold"],
    "amount": [100.50, 45.00, 250.00]
})

time.sleep(1.2)

# The live data is fully isolated to prevent locking issues. 
# Telemetry, Scheduled Queries, and Alerts can be read safely via query_metrics:
alerts = engine.query_metrics("SELECT * FROM rill_alerts LIMIT 5").to_pylist()
print("Recent System Alerts:\\n", alerts)

engine.stop()
'''

SECTION_3 = '''
from rills import RillEngine, MemoryConnector
import traceback

engine = RillEngine(
    trigger_interval_ms=200,
    quack_address="quack:0.0.0.0:9494"
)

engine.register_table("orders", primary_key="order_id")
connector = MemoryConnector(target_table="orders")
engine.add_connector(connector)

# Push custom alerts from your application code
engine.alert("Engine started successfully")           # info severity
engine.warn("Order queue backlog exceeds threshold")   # warning severity

try:
    # Your business logic here
    result = process_payment(order)
except Exception:
    engine.error("Payment processing failed", detail=traceback.format_exc())

# Alerts with full control
engine.push_alert(
    "Revenue dropped below $1,000",
    severity="warning",
    detail="Current daily revenue: $847.23. Threshold: $1,000."
)

engine.start()

results = engine.query_metrics("""
    SELECT ts, severity, source, message 
    FROM rill_alerts 
    WHERE severity = 'error' 
    ORDER BY ts DESC LIMIT 10
""").to_pylist()
engine.stop()
'''

_NEEDS_ALERTS = ("add_dashboard_scheduled_query", "query_metrics")


def _without_alert_api(code):
    """Drop the statements that call the not-yet-bound metrics API."""
    out, skipping, depth = [], False, 0
    for line in code.splitlines():
        if not skipping and any(f"engine.{name}(" in line for name in _NEEDS_ALERTS):
            skipping, depth = True, 0
        if skipping:
            depth += line.count("(") - line.count(")")
            if depth <= 0:
                skipping = False
            continue
        out.append(line)
    return "\n".join(out).replace('print("Recent System Alerts:\\n", alerts)', "")


def test_section_2_without_metrics_api():
    scope = {}
    exec(compile(_without_alert_api(SECTION_2), "seed_section_2", "exec"), scope)
    engine = scope["engine"]
    revenue = {r["user_tier"]: r["total_revenue"]
               for r in engine.get_table("revenue_by_tier").to_arrow().to_pylist()}
    assert revenue == {"Gold": 350.5, "Silver": 45.0}
    assert engine.get_table("orders").num_rows == 3
    engine.close()


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # rill_metrics.db is written to the working directory


def test_section_2_unchanged():
    scope = {}
    exec(compile(SECTION_2, "seed_section_2", "exec"), scope)
    engine = scope["engine"]
    # A clean run records no alert (a failing task or KPI query would).
    assert scope["alerts"] == []
    revenue = {r["user_tier"]: r["total_revenue"]
               for r in engine.get_table("revenue_by_tier").to_arrow().to_pylist()}
    assert revenue == {"Gold": 350.5, "Silver": 45.0}
    # The dashboard KPI runs on the metrics store's schedule (every second).
    kpi = lambda: engine.latest_kpis()["Max Order Amount"]  # noqa: E731
    wait_until(lambda: kpi()["value"] == 250.0, timeout=30, what="the KPI 'Max Order Amount'")
    assert kpi()["errors"] == 0 and kpi()["last_error"] == ""
    assert engine.query_metrics(
        "SELECT max(value) AS v FROM rill_kpi_history WHERE query = 'Max Order Amount'"
    ).to_pylist() == [{"v": 250.0}]
    engine.close()


def test_section_3_unchanged():
    scope = {}
    exec(compile(SECTION_3, "seed_section_3", "exec"), scope)
    messages = [r["message"] for r in scope["results"]]
    assert "Payment processing failed" in messages
    scope["engine"].close()
