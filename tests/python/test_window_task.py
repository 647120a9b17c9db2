"""engine.add_window_task(WindowTask(...)): event-time windows checked against DuckDB."""

import random

import duckdb
import pyarrow as pa
import pytest

from rills import MemoryConnector, RetentionPolicy, RillEngine, WindowTask, schema

SCHEMA = schema([("t", pa.float64()), ("k", pa.string()), ("amount", pa.float64())], mode="append")


def _engine_with_source():
    engine = RillEngine(metrics_path=None)
    engine.register_table("ev", schema=SCHEMA, retention_policy=RetentionPolicy(max_rows=1_000_000))
    conn = MemoryConnector(name="ev_in", target_table="ev")
    engine.add_connector(conn)
    return engine, conn


@pytest.mark.parametrize("window", ["tumbling", "hopping", "session"])
def test_windows_match_duckdb(window):
    rng = random.Random(7)
    engine, conn = _engine_with_source()
    task = WindowTask("w", "ev", "out", time_column="t", window=window, size_seconds=10,
                      slide_seconds=5, gap_seconds=3, group_by="k",
                      aggregations={"n": "count(*)", "s": "sum(amount)", "hi": "max(amount)",
                                    "med": "median(amount)"},
                      allowed_lateness_seconds=100)
    engine.add_window_task(task)
    rows = []
    for tick in range(20):
        batch = [{"t": round(tick * 4 + rng.uniform(-5, 5), 3), "k": rng.choice("abc"),
                  "amount": float(rng.randint(1, 50))} for _ in range(rng.randint(0, 15))]
        rows += batch
        if batch:
            conn.push(batch)
        engine.step()
    # One far-future event moves the watermark past every window so far.
    conn.push([{"t": 10_000.0, "k": "z", "amount": 0.0}])
    engine.step()
    got = sorted(tuple(r.values()) for r in engine.query_sql(
        "SELECT window_start, window_end, k, n, s, hi, med FROM out").to_pylist())
    ev = pa.Table.from_pylist(rows)  # noqa: F841 (read by duckdb)
    if window == "tumbling":
        windows = "SELECT floor(t / 10) * 10 AS ws, floor(t / 10) * 10 + 10 AS we, * FROM ev"
    elif window == "hopping":
        windows = ("SELECT r.ws, r.ws + 10 AS we, ev.* FROM ev, LATERAL (SELECT unnest(range("
                   "CAST(floor(ev.t / 5) * 5 AS BIGINT), CAST(floor(ev.t - 10) AS BIGINT), -5)) AS ws) r "
                   "WHERE r.ws > ev.t - 10")
    else:
        windows = ("WITH o AS (SELECT *, CASE WHEN t - lag(t) OVER (PARTITION BY k ORDER BY t) < 3 "
                   "THEN 0 ELSE 1 END AS brk FROM ev), s AS (SELECT *, sum(brk) OVER (PARTITION BY k "
                   "ORDER BY t ROWS UNBOUNDED PRECEDING) AS sid FROM o) SELECT min(t) OVER (PARTITION BY k, sid) AS ws, "
                   "max(t) OVER (PARTITION BY k, sid) + 3 AS we, * FROM s")
    want = sorted(duckdb.sql(
        f"SELECT ws::DOUBLE, we::DOUBLE, k, count(*), sum(amount), max(amount), median(amount) "
        f"FROM ({windows}) GROUP BY ws, we, k").fetchall())
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
        assert g[2:6] == w[2:6]
        assert g[0] == pytest.approx(w[0]) and g[1] == pytest.approx(w[1])
        assert g[6] == pytest.approx(w[6])
    stats = task.stats()
    assert stats["rows_in"] == len(rows) + 1
    assert stats["late_rows"] == 0
    assert stats["groups_open"] >= 1  # the far-future event's window


def test_late_rows_are_kept_with_reason():
    engine, conn = _engine_with_source()
    task = WindowTask("w", "ev", "out", time_column="t", size_seconds=10,
                      aggregations=[("amount", "sum"), ("*", "count")])
    engine.add_window_task(task)
    conn.push([{"t": 25.0, "k": "a", "amount": 1.0}])
    engine.step()
    conn.push([{"t": 3.0, "k": "a", "amount": 2.0}, {"t": None, "k": "b", "amount": 3.0},
               {"t": 26.0, "k": "a", "amount": 4.0}])
    engine.step()
    late = engine.query_sql("SELECT k, late_reason, event_time, watermark, task FROM out_late ORDER BY k")
    assert late.to_pylist() == [
        {"k": "a", "late_reason": "behind watermark", "event_time": 3.0, "watermark": 25.0, "task": "w"},
        {"k": "b", "late_reason": "null event time", "event_time": None, "watermark": 25.0, "task": "w"},
    ]
    assert engine.query_sql("SELECT * FROM out").num_rows == 0
    conn.push([{"t": 40.0, "k": "a", "amount": 1.0}])
    engine.step()
    out = engine.query_sql("SELECT window_start, window_end, amount_sum, count FROM out").to_pylist()
    assert out == [{"window_start": 20.0, "window_end": 30.0, "amount_sum": 5.0, "count": 2}]
    stats = task.stats()
    assert stats["late_rows"] == 1 and stats["null_time_rows"] == 1 and stats["late_rows_kept"] == 2


def test_on_update_and_remove():
    engine, conn = _engine_with_source()
    task = WindowTask("w", "ev", "live", time_column="t", size_seconds=10, group_by=["k"],
                      aggregations={"s": "sum(amount)"}, emit="on_update")
    engine.add_window_task(task)
    conn.push([{"t": 1.0, "k": "a", "amount": 1.0}])
    engine.step()
    conn.push([{"t": 2.0, "k": "a", "amount": 2.0}])
    engine.step()
    assert engine.query_sql("SELECT k, s, is_final FROM live").to_pylist() == [
        {"k": "a", "s": 3.0, "is_final": False}]
    engine.remove_window_task("w")
    conn.push([{"t": 50.0, "k": "a", "amount": 2.0}])
    engine.step()
    assert engine.query_sql("SELECT k, s, is_final FROM live").to_pylist() == [
        {"k": "a", "s": 3.0, "is_final": False}]
    engine.add_window_task(task)  # again, with fresh state


def test_bad_configuration_raises_value_error():
    with pytest.raises(ValueError, match="window"):
        WindowTask("w", "ev", "out", time_column="t", window="rolling")
    with pytest.raises(ValueError, match="gap_seconds"):
        WindowTask("w", "ev", "out", time_column="t", window="session")
    with pytest.raises(ValueError, match="size_seconds"):
        WindowTask("w", "ev", "out", time_column="t", size_seconds=0)
    with pytest.raises(ValueError):
        WindowTask("w", "ev", "out", time_column="t", aggregations={})
    engine, _ = _engine_with_source()
    engine.add_window_task(WindowTask("w", "ev", "out", time_column="t"))
    with pytest.raises(ValueError, match="already"):
        engine.add_window_task(WindowTask("w", "ev", "out2", time_column="t"))
