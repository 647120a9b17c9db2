"""Smoke tests: every example runs (short mode) and exits cleanly."""

import json
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _run(name, *args):
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_live_streaming_demo(tmp_path):
    sink = tmp_path / "tier_revenue.parquet"
    out = _run("live_streaming_demo.py", "--quick", "--sink", str(sink))
    assert "revenue by tier" in out and "final:" in out and "sink: wrote" in out
    import pyarrow.parquet as papq
    assert papq.read_table(sink).column_names[:3] == ["user_tier", "revenue", "orders"]


def test_multi_stream_join_demo():
    out = _run("multi_stream_join_demo.py", "--quick")
    assert "enriched=" in out


def test_benchmark_streams_json():
    out = _run("benchmark_streams.py", "--quick", "--json")
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert records and all(set(r) == {"name", "value", "unit"} for r in records)
    names = {r["name"] for r in records}
    assert "python_tick_10k_latency_ms" in names and "python_sql_1k_rows_per_s" in names


def test_toolkit_demo():
    out = _run("toolkit_demo.py")
    assert "'Laptop': {'count': 2, 'sum': 2299.98, 'avg': 1149.99}" in out
    assert "Events in sliding window: 30" in out and "window_start" in out
