"""Engine metrics, business metrics and the OutputAPI."""

import pyarrow.compute as pc
import pytest

from rills import MemoryConnector, MetricsRegistry, OutputAPI, RillEngine
from conftest import require_module


def test_system_and_business_metrics(engine):
    connector = MemoryConnector(target_table="sales")
    engine.add_connector(connector)

    def avg_ticket(eng):
        tbl = eng.get_table("sales")
        if tbl is None or tbl.num_rows == 0:
            return 0.0
        return pc.mean(tbl.to_arrow().column("amount")).as_py()

    engine.register_business_metric("avg_ticket", avg_ticket)
    connector.push({"id": [1, 2], "amount": [100.0, 200.0]})
    engine.step()
    m = engine.get_metrics()
    assert m["total_records_processed"] == 2
    assert m["last_batch_records"] == 2
    assert m["table_row_counts"]["sales"] == 2
    assert m["business_metrics"]["avg_ticket"] == 150.0
    assert m["last_batch_latency_ms"] > 0 and m["ticks"] == 1  # measured, not left at 0
    connector.push({"id": [3], "amount": [300.0]})
    engine.step()
    m = engine.get_metrics()
    assert m["total_records_processed"] == 3
    assert m["last_batch_records"] == 1
    assert m["business_metrics"]["avg_ticket"] == 200.0
    assert m["connectors"][connector.name]["drained_records"] == 3


def test_non_numeric_and_failing_metrics(engine):
    engine.register_business_metric("summary", lambda eng: {"tables": eng.table_names()})
    engine.register_business_metric("broken", lambda eng: 1 / 0)
    engine.step()
    business = engine.get_metrics()["business_metrics"]
    assert business["summary"] == {"tables": []}
    assert business["broken"].startswith("Error evaluating metric")
    events = [e for e in engine.recent_events() if e["component"] == "metric:broken"]
    assert len(events) == 1 and "ZeroDivisionError" in events[0]["detail"]
    engine.metrics.unregister_metric("broken")
    engine.step()
    assert "broken" not in engine.get_metrics()["business_metrics"]


def test_output_api(engine):
    out = OutputAPI(engine)
    assert out.get_table("nothing") is None
    engine.register_table("t", primary_key="id").upsert({"id": [1, 2], "v": [3.0, 4.0]})
    engine.register_business_metric("answer", lambda eng: 42)
    seen = []
    out.subscribe_table("t", lambda name, table: seen.append(table.num_rows))
    engine.get_table("t").upsert({"id": [3], "v": [5.0]})
    engine.step()
    assert out.get_table("t").num_rows == 3
    assert out.get_scalar("answer") == 42
    assert out.get_scalar("ticks") == 1
    assert out.get_scalar("missing", default="d") == "d"
    assert seen == [3]
    pd = require_module("pandas")
    assert len(out.get_pandas("t")) == 3


def test_standalone_registry():
    reg = MetricsRegistry()
    reg.register_metric("one", lambda eng: 1)
    assert reg.evaluate_business_metrics() == {"one": 1}
    with pytest.raises(TypeError):
        reg.register_metric("x", 3)
