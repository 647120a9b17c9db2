"""`rill serve` with a `windows:` section, and the toolkit's REST routes on the
one port (queues, analytics metrics, window results), over real sockets.

The window results are checked against DuckDB-on-the-engine (POST
/api/v1/query) computing the same windows over the source rows."""

import json
import os
import pathlib
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import requires

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "toolkit-token"

pytestmark = requires(not RILL.exists(), f"{RILL} not built")

PIPELINE = """
engine: {trigger_interval_ms: 50}
tables:
  - name: clicks
    columns: {page: string, v: float64, ts: float64}
    mode: append
    retention: {max_rows: 1000000}
connectors:
  - name: gen
    type: generator
    table: clicks
    rows_per_second: 2000
    interval_ms: 20
    seed: 5
    columns: {page: {choice: [home, cart, pay]}, v: {random_float: [0, 10]}, ts: now}
windows:
  - name: per_second
    source: clicks
    time_column: ts
    window: tumbling
    size_seconds: 1
    group_by: page
    aggregations: {n: "count(*)", s: "sum(v)"}
"""


def call(address, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{address}{path}", data=data, method=method,
                                 headers={"Authorization": f"Bearer {TOKEN}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture
def served(tmp_path):
    path = tmp_path / "windows.yaml"
    path.write_text(PIPELINE)
    proc = subprocess.Popen([str(RILL), "serve", str(path), "--metrics", ":memory:",
                             "--listen", "127.0.0.1:0", "--token", TOKEN],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        address = None
        deadline = time.time() + 20
        while time.time() < deadline and address is None:
            line = proc.stdout.readline()
            if not line:
                break
            if "listening on " in line:
                address = line.split("listening on ", 1)[1].strip()
        assert address, "rill serve did not print its address: " + proc.stderr.read()
        yield address
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_window_results_match_duckdb_over_the_source(served):
    deadline = time.time() + 20
    rows = []
    while time.time() < deadline and len(rows) < 6:
        time.sleep(0.5)
        status, out = call(served, "GET", "/api/v1/windows/per_second/results?limit=1000")
        assert status == 200, out
        rows = out["rows"]
    assert len(rows) >= 6, "no closed windows within 20 s"
    status, listing = call(served, "GET", "/api/v1/windows")
    assert listing["windows"][0]["name"] == "per_second" and listing["windows"][0]["window"] == "tumbling"
    # Late rows (behind the watermark when they arrived) are not in the windows.
    status, late = call(served, "GET", "/api/v1/windows/per_second/late?limit=100000")
    late_ts = {(r["page"], r["ts"]) for r in late["rows"]}
    for row in rows[:6]:
        ws = row["window_start"]
        # Windows assign microseconds (round(ts * 1e6)), as here.
        lo, hi = round(ws * 1e6), round((ws + 1) * 1e6)
        sql = (f"SELECT ts, v FROM clicks WHERE page = '{row['page']}' "
               f"AND round(ts * 1e6) >= {lo} AND round(ts * 1e6) < {hi}")
        status, src = call(served, "POST", "/api/v1/query", {"sql": sql})
        assert status == 200, src
        kept = [r["v"] for r in src["rows"] if (row["page"], r["ts"]) not in late_ts]
        assert row["n"] == len(kept), row
        assert row["s"] == pytest.approx(sum(kept)), row


def test_queues_and_metrics_over_rest(served):
    assert call(served, "POST", "/api/v1/queues", {"name": "events", "max_size": 10})[0] == 201
    assert call(served, "POST", "/api/v1/queues/events/enqueue",
                {"message": {"event": "user_login", "user_id": 1}})[0] == 201
    assert call(served, "POST", "/api/v1/queues/events/enqueue",
                {"message": {"event": "alert"}, "priority": 10})[0] == 201
    status, out = call(served, "POST", "/api/v1/queues/events/dequeue")
    assert status == 200 and out["message"] == {"event": "alert"}
    status, stats = call(served, "GET", "/api/v1/queues/events/stats")
    assert (stats["current_size"], stats["total_enqueued"], stats["total_dequeued"]) == (1, 2, 1)
    assert call(served, "GET", "/api/v1/queues/nope/stats")[0] == 404
    for value in (3, 5):
        assert call(served, "POST", "/api/v1/analytics/metrics", {"name": "api_calls", "value": value})[0] == 201
    status, metric = call(served, "GET", "/api/v1/analytics/metrics/api_calls")
    assert (metric["count"], metric["sum"], metric["avg"], metric["min"], metric["max"]) == (2, 8, 4, 3, 5)
    assert metric["rate_per_second"] > 0
