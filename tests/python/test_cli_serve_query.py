"""The `rill serve` and `rill query` commands of the `rill` binary.

`rill query` is tested against a small HTTP server in this file that answers
as /api/v1/query does; `test_serve_and_query_end_to_end` runs both commands
against each other once the binary has the network server (skipped before).
"""

import http.server
import json
import os
import pathlib
import signal
import subprocess
import threading
import time

import duckdb
import pytest

from conftest import require, requires

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
EXAMPLE = ROOT / "examples" / "pipelines" / "orders.yaml"

pytestmark = requires(not RILL.exists(), f"{RILL} not built")


class FakeQueryServer:
    """Answers POST /api/v1/sql with scripted (status, body) pairs; records requests."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.requests.append((self.path, dict(self.headers), json.loads(body)))
                status, payload = outer.replies[min(len(outer.requests), len(outer.replies)) - 1]
                data = payload.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def run(*args, env=None, timeout=30):
    full_env = dict(os.environ)
    full_env.pop("RILL_TOKEN", None)
    full_env.update(env or {})
    return subprocess.run([str(RILL), *args], capture_output=True, text=True, timeout=timeout,
                          env=full_env)


def test_query_prints_an_aligned_table_and_sends_the_env_token():
    result = {"columns": [{"name": "region", "type": "VARCHAR"}, {"name": "revenue", "type": "DOUBLE"}],
              "rows": [["us-east", 1234.5], ["apac", None]]}
    with FakeQueryServer([(200, json.dumps(result))]) as server:
        out = run("query", "--server", server.address, "SELECT region, revenue FROM r",
                  env={"RILL_TOKEN": "tok123"})
    assert out.returncode == 0, out.stderr
    assert out.stdout == ("region  | revenue\n"
                          "--------+--------\n"
                          "us-east |  1234.5\n"
                          "apac    |    NULL\n"
                          "(2 rows)\n")
    path, headers, body = server.requests[0]
    assert path == "/api/v1/sql"  # queries and DDL (issue 26)
    assert headers["Authorization"] == "Bearer tok123"
    assert body == {"sql": "SELECT region, revenue FROM r", "format": "json"}


def test_query_token_flag_wins_over_env_and_csv_is_passed_through():
    with FakeQueryServer([(200, "a,b\n1,2\n")]) as server:
        out = run("query", "--server", f"quack:{server.address}", "--token", "flag",
                  "--format", "csv", "SELECT 1 AS a, 2 AS b", env={"RILL_TOKEN": "env"})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "a,b\n1,2\n"
    assert server.requests[0][1]["Authorization"] == "Bearer flag"
    assert server.requests[0][2]["format"] == "csv"


def test_query_error_exits_one_with_the_server_message():
    error = {"code": "invalid", "message": "Catalog Error: Table with name nope does not exist!"}
    with FakeQueryServer([(400, json.dumps(error))]) as server:
        out = run("query", "--server", server.address, "SELECT * FROM nope")
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.strip() == "rill query: Catalog Error: Table with name nope does not exist!"


def test_query_unreachable_server_exits_two():
    out = run("query", "--server", "127.0.0.1:1", "SELECT 1")
    assert out.returncode == 2
    assert "cannot reach the rill server at 127.0.0.1:1" in out.stderr


def test_serve_reports_a_bad_pipeline_with_file_line_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables:\n  - name: t\n    columns: {a: int64}\n    primary_key: b\n")
    out = run("serve", str(bad), "--metrics", ":memory:")
    assert out.returncode == 1
    assert f"{bad}:4: tables[0].primary_key: column \"b\" named in key does not exist" in out.stderr


def test_serve_runs_the_example_and_stops_cleanly_on_sigint(tmp_path):
    db = tmp_path / "metrics.db"
    proc = subprocess.Popen([str(RILL), "serve", str(EXAMPLE), "--metrics", str(db),
                             "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "1 tables, 2 connectors, 1 tasks, 3 KPI queries, 2 alert rules" in stdout
    assert "stopped after" in stdout
    # The metrics file, read by DuckDB itself: every KPI ran and has history.
    con = duckdb.connect(str(db), read_only=True)
    kpis = dict(con.execute("SELECT query, count(*) FROM rill_kpi_history GROUP BY query").fetchall())
    assert set(kpis) == {"total_revenue", "max_order_amount", "cancelled_ratio"}
    rules = con.execute("SELECT name FROM rill_alert_rules ORDER BY name").fetchall()
    assert rules == [("high_cancellation_rate",), ("slow_ticks",)]
    con.close()


def test_serve_and_query_end_to_end(tmp_path):
    proc = subprocess.Popen([str(RILL), "serve", str(EXAMPLE), "--metrics", ":memory:",
                             "--listen", "127.0.0.1:0", "--token", "e2e-token"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        address = None
        deadline = time.time() + 20
        while time.time() < deadline and address is None:
            line = proc.stdout.readline()
            if not line:
                break
            if "no network server" in line:
                require("this build of rill has no network server")
            if "listening on " in line:
                address = line.split("listening on ", 1)[1].strip()
        assert address, "rill serve did not print its address"
        time.sleep(1.5)  # a few ticks of generated orders
        out = run("query", "--server", address, "--token", "e2e-token",
                  "SELECT count(*) AS n FROM orders")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0].strip() == "n" and int(lines[2]) > 0
        denied = run("query", "--server", address, "--token", "wrong", "SELECT 1")
        assert denied.returncode == 1
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
