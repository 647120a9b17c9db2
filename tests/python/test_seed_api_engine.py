"""RillEngine options of the seed's API (issue 14): metrics store options, alert rules
with message/enabled, register_table replacing a table."""

import pyarrow as pa
import pytest

import rills
from rills import MemoryConnector, MetricsStoreOptions, RillEngine


def test_metrics_store_options_are_validated():
    with pytest.raises(ValueError, match="unknown metrics option"):
        MetricsStoreOptions.of({"alert_retention": 5})
    with pytest.raises(ValueError):
        MetricsStoreOptions(alert_retention_seconds=-1)
    with pytest.raises(ValueError):
        MetricsStoreOptions(alert_retention_seconds=0)
    with pytest.raises(ValueError):
        MetricsStoreOptions(event_queue_capacity=0)
    with pytest.raises(TypeError):
        MetricsStoreOptions.of(42)
    with pytest.raises(ValueError, match="unknown metrics option"):
        RillEngine(metrics_options={"nope": 1})


def test_alert_retention_prunes_old_alerts(make_engine, tmp_path):
    engine = make_engine(metrics_path=str(tmp_path / "m.db"),
                         metrics_options={"alert_retention_seconds": 0.2,
                                          "flush_interval_seconds": 0.05,
                                          "rate_limit_window_seconds": 0.0})
    engine.push_alert("old", severity="warning")
    # Alerts older than 0.2 s are pruned by the next flush cycles.
    import time
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        n = engine.query_metrics("SELECT COUNT(*) AS n FROM rill_alerts WHERE message = 'old'").column("n")[0].as_py()
        if n == 0:
            break
        time.sleep(0.05)
    assert n == 0
    kept = make_engine(metrics_path=str(tmp_path / "k.db"),
                       metrics_options=MetricsStoreOptions(flush_interval_seconds=0.05))
    kept.push_alert("stays")
    time.sleep(0.3)
    assert kept.query_metrics("SELECT COUNT(*) AS n FROM rill_alerts WHERE message = 'stays'") \
        .column("n")[0].as_py() == 1


def test_add_alert_rule_with_message_and_enabled(make_engine):
    engine = make_engine(metrics_path=":memory:", metrics_flush_interval_seconds=0.05)
    engine.register_table("s", schema=pa.schema([("v", pa.float64())]))
    c = MemoryConnector(target_table="s")
    engine.add_connector(c)
    c.push({"v": [1.0, 2.0]})
    engine.step()
    engine.add_alert_rule("on", "table.s.rows", ">", 1, cooldown_seconds=0,
                          message="too many rows in s")
    engine.add_alert_rule("off", "table.s.rows", ">", 1, cooldown_seconds=0,
                          message="disabled rule fired", enabled=False)
    engine.start()
    import time
    deadline = time.monotonic() + 10
    rows = []
    while time.monotonic() < deadline and not rows:
        rows = engine.query_metrics(
            "SELECT rule, message FROM rill_alerts WHERE source = 'rule'").to_pylist()
        time.sleep(0.05)
    engine.stop()
    assert rows and all(r["rule"] == "on" for r in rows)
    assert rows[0]["message"].startswith("too many rows in s")


def test_register_table_replaces_an_existing_table(engine):
    first = engine.register_table("t", schema=pa.schema([("a", pa.int64())]), primary_key="a")
    first.upsert(pa.table({"a": [1, 2]}))
    second = engine.register_table("t", schema=pa.schema([("b", pa.string())]))
    assert second.num_rows == 0
    assert engine.get_table("t").schema.names[:1] == ["b"]
    assert engine.query_sql("SELECT COUNT(*) AS n FROM t").column("n")[0].as_py() == 0
    with pytest.raises(ValueError, match="reserved"):
        engine.register_table("rill_metrics", schema=pa.schema([("a", pa.int64())]))
