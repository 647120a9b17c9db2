"""Memory budget: ResourceWarning and on_memory_warning."""

import warnings

import pyarrow as pa
import pytest

from rills import MemoryConnector, RillEngine


def test_check_memory_budget_warns_and_calls_back(make_engine):
    calls = []
    engine = make_engine(memory_budget_bytes=10, on_memory_warning=lambda a, b: calls.append((a, b)))
    tbl = engine.register_table("heavy_table")
    tbl.upsert(pa.table({"col": list(range(10))}))
    with pytest.warns(ResourceWarning, match="RillEngine memory budget exceeded!") as record:
        allocated, budget, exceeded = engine.check_memory_budget()
    assert exceeded is True and budget == 10 and allocated > 10
    assert len(record) >= 1
    assert calls and calls[0][1] == 10 and calls[0][0] > 10
    engine.close()


def test_step_warns_when_over_budget(make_engine):
    calls = []
    engine = make_engine(memory_budget_mb=0.000001, on_memory_warning=lambda a, b: calls.append(b))
    c = MemoryConnector("t")
    engine.add_connector(c)
    c.push({"v": list(range(1000))})
    with pytest.warns(ResourceWarning):
        engine.step()
    assert calls == [int(0.000001 * 1024 * 1024)]
    assert engine.get_metrics()["memory_warnings"] >= 1
    engine.close()


def test_within_budget_is_silent(make_engine):
    engine = make_engine(memory_budget_bytes=1 << 40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        allocated, budget, exceeded = engine.check_memory_budget()
    assert exceeded is False and budget == 1 << 40
    no_budget = make_engine()
    assert no_budget.check_memory_budget()[1:] == (None, False)


def test_callback_error_is_recorded_not_raised(make_engine):
    def bad(allocated, budget):
        raise RuntimeError("callback failed on purpose")

    engine = make_engine(memory_budget_bytes=1, on_memory_warning=bad)
    engine.register_table("t").upsert({"v": [1, 2, 3]})
    with pytest.warns(ResourceWarning):
        engine.check_memory_budget()
    events = [e for e in engine.recent_events() if "callback failed on purpose" in e["message"]]
    assert events and "Traceback" in events[0]["detail"]


def test_bad_budget_arguments(make_engine):
    with pytest.raises(ValueError):
        make_engine(memory_budget_bytes=-1)
    with pytest.raises(ValueError):
        make_engine(trigger_interval_ms=0)
