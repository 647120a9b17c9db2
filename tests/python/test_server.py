"""The network server from Python: RillEngine(quack_address=...), every HTTP route
with and without the token, each query format read back by its real reader
(pyarrow IPC, csv, json), Prometheus text parsed by prometheus_client, limits,
start/stop/restart. Real sockets on 127.0.0.1 only."""

import csv
import http.client
import io
import json
import socket
import time

import pyarrow as pa
import pyarrow.ipc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rills import MemoryConnector, RillEngine, schema

TOKEN = "s3cret-token"


def host_port(engine):
    text = engine.quack_address[len("quack:"):]
    host, _, port = text.rpartition(":")
    return host, int(port)


def request(engine, method, path, body=None, token=TOKEN, headers=None):
    host, port = host_port(engine)
    conn = http.client.HTTPConnection(host, port, timeout=30)
    hdrs = dict(headers or {})
    if token:
        hdrs["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        hdrs["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), payload


def query(engine, sql, fmt="json", token=TOKEN):
    return request(engine, "POST", "/api/v1/query", {"sql": sql, "format": fmt}, token=token)


@pytest.fixture
def served(tmp_path):
    eng = RillEngine(trigger_interval_ms=50, quack_address="quack:127.0.0.1:0",
                     quack_token=TOKEN, metrics_path=str(tmp_path / "m.db"),
                     metrics_flush_interval_seconds=0.2)
    eng.register_table("orders", schema=schema([("order_id", pa.int64()), ("user_tier", pa.string()),
                                                ("amount", pa.float64())],
                                               primary_key="order_id", mode="snapshot"))
    conn = MemoryConnector(target_table="orders")
    eng.add_connector(conn)
    conn.push({"order_id": list(range(1000)),
               "user_tier": ["Gold" if i % 3 else "Silver" for i in range(1000)],
               "amount": [i * 0.5 for i in range(1000)]})
    eng.start()
    deadline = time.time() + 10
    while eng.get_table("orders").num_rows < 1000 and time.time() < deadline:
        time.sleep(0.02)
    yield eng
    eng.close()


def test_start_serves_and_prints_address_token_and_dashboard(served, capsys):
    assert served.quack_address.startswith("quack:127.0.0.1:")
    assert host_port(served)[1] > 0
    assert served.quack_token == TOKEN
    assert served.dashboard_url.endswith(f"/?token={TOKEN}")
    status, _, body = request(served, "GET", "/healthz", token=None)
    assert status == 200 and json.loads(body)["status"] == "ok"


def test_every_api_route_refuses_a_missing_or_wrong_token(served):
    routes = [("GET", "/api/v1/info", None), ("POST", "/api/v1/query", {"sql": "SELECT 1"}),
              ("POST", "/api/v1/metrics/query", {"sql": "SELECT 1"}), ("GET", "/api/v1/tables"),
              ("GET", "/api/v1/tables/orders"), ("GET", "/api/v1/telemetry"),
              ("GET", "/api/v1/telemetry/history"), ("GET", "/api/v1/telemetry/tables"),
              ("GET", "/api/v1/alerts"), ("POST", "/api/v1/alerts", {"message": "x"}),
              ("GET", "/api/v1/kpis"), ("GET", "/api/v1/rules"), ("GET", "/metrics"),
              ("POST", "/api/webhook/send", {"url": "http://x"})]
    for route in routes:
        method, path, body = (route + (None,))[:3]
        for token in (None, "wrong", TOKEN + "x"):
            status, _, payload = request(served, method, path, body, token=token)
            assert status == 401, (path, token, status)
            assert b"orders" not in payload and b"Gold" not in payload
        status, _, _ = request(served, method, path, body)
        # The relay answers 502 when the receiver cannot be reached ("x" does not resolve).
        expected = (502,) if path == "/api/webhook/send" else (200, 201)
        assert status in expected, (path, status)


def test_json_format_matches_duckdb_on_the_same_rows(served):
    import duckdb
    sql = "SELECT user_tier, count(*) AS n, sum(amount) AS total FROM orders GROUP BY 1 ORDER BY 1"
    status, headers, body = query(served, sql)
    assert status == 200
    doc = json.loads(body)
    assert [c["name"] for c in doc["columns"]] == ["user_tier", "n", "total"]
    assert doc["columns"][1]["type"] == "int64"
    orders = served.get_table("orders").to_arrow()  # noqa: F841 (read by duckdb)
    expected = duckdb.sql(sql).fetchall()
    assert [(r["user_tier"], r["n"], r["total"]) for r in doc["rows"]] == expected


def test_arrow_format_is_read_by_pyarrow_open_stream(served):
    sql = "SELECT order_id, user_tier, amount FROM orders ORDER BY order_id"
    status, headers, body = query(served, sql, "arrow")
    assert status == 200
    assert headers["Content-Type"] == "application/vnd.apache.arrow.stream"
    got = pa.ipc.open_stream(body).read_all()
    import duckdb
    orders = served.get_table("orders").to_arrow()  # noqa: F841 (read by duckdb)
    assert got.equals(duckdb.sql(sql).fetch_arrow_table().cast(got.schema))
    assert got.num_rows == 1000
    assert got.column("order_id").to_pylist() == list(range(1000))


def test_csv_and_ndjson_formats_are_read_by_their_readers(served):
    sql = "SELECT order_id, amount FROM orders ORDER BY order_id"
    status, headers, body = query(served, sql, "csv")
    assert status == 200 and headers["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    assert len(rows) == 1000
    assert float(rows[10]["amount"]) == 5.0
    status, _, body = query(served, sql, "ndjson")
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert lines[999] == {"order_id": 999, "amount": 499.5}


def test_bad_sql_and_bad_bodies_get_400_with_the_reason(served):
    status, _, body = query(served, "DELETE FROM orders")
    assert status == 400 and "SELECT" in json.loads(body)["message"]
    status, _, body = query(served, "SELECT nope FROM orders")
    assert status == 400 and "nope" in json.loads(body)["message"]
    status, _, _ = request(served, "POST", "/api/v1/query", b"{\"sql\": ")
    assert status == 400
    status, _, body = query(served, "SELECT 1", "parquet")
    assert status == 400 and "parquet" in json.loads(body)["message"]


def test_tables_and_info(served):
    status, _, body = request(served, "GET", "/api/v1/tables")
    table = json.loads(body)["tables"][0]
    assert table["name"] == "orders" and table["rows"] == 1000
    assert table["primary_key"] == ["order_id"] and table["mode"] == "snapshot"
    assert [c["name"] for c in table["schema"]][:3] == ["order_id", "user_tier", "amount"]
    status, _, body = request(served, "GET", "/api/v1/info")
    info = json.loads(body)
    assert info["tables"] == ["orders"]
    assert "quack:" + info["address"] == served.quack_address
    # Counted from the server's start: positive, and growing between two requests.
    assert info["uptime_seconds"] > 0
    later = json.loads(request(served, "GET", "/api/v1/info")[2])
    assert later["uptime_seconds"] > info["uptime_seconds"]


def test_alerts_pushed_over_http_reach_query_metrics(served):
    status, _, _ = request(served, "POST", "/api/v1/alerts",
                           {"message": "from http", "severity": "error", "detail": "d"})
    assert status == 201
    rows = served.query_metrics(
        "SELECT message, severity, source FROM rill_alerts WHERE message = 'from http'").to_pylist()
    assert rows == [{"message": "from http", "severity": "error", "source": "user"}]
    served.warn("from python")
    served.query_metrics("SELECT 1")  # flushes
    _, _, body = request(served, "GET", "/api/v1/alerts?severity=warning&source=user")
    assert "from python" in [r["message"] for r in json.loads(body)["rows"]]


def test_kpis_created_over_http_appear_in_python(served):
    status, _, body = request(served, "POST", "/api/v1/kpis",
                              {"name": "max", "sql": "SELECT max(amount) AS m FROM orders",
                               "interval_seconds": 0.1})
    assert status == 201, body
    deadline = time.time() + 10
    value = None
    while time.time() < deadline and value is None:
        _, _, body = request(served, "GET", "/api/v1/kpis")
        value = json.loads(body)["kpis"][0]["value"]
        time.sleep(0.1)
    assert value == 499.5


def test_prometheus_text_parses_with_prometheus_client(served):
    query(served, "SELECT 1")
    status, headers, body = request(served, "GET", "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    for name in ("rill_ingest_rows", "rill_rejected_rows", "rill_dropped_rows", "rill_table_rows",
                 "rill_table_bytes", "rill_tick_duration_seconds", "rill_query_duration_seconds",
                 "rill_task_failures", "rill_alerts", "rill_open_connections", "rill_build_info"):
        assert name in families, name
    rows = {s.labels.get("table"): s.value for s in families["rill_table_rows"].samples}
    assert rows["orders"] == 1000
    assert families["rill_ingest_rows"].type == "counter"
    assert families["rill_query_duration_seconds"].type == "histogram"
    for family in families.values():
        for sample in family.samples:
            assert set(sample.labels) <= {"table", "connector", "task", "severity", "protocol",
                                          "le"}, sample


def test_login_cookie_authenticates_browser_requests(served):
    status, headers, _ = request(served, "POST", "/api/v1/login", {"token": TOKEN}, token=None)
    assert status == 200
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    status, _, _ = request(served, "GET", "/api/v1/info", token=None,
                           headers={"Cookie": cookie.split(";")[0]})
    assert status == 200
    status, _, _ = request(served, "POST", "/api/v1/login", {"token": "bad"}, token=None)
    assert status == 401


def test_stop_closes_the_port_and_restart_reuses_it(served):
    addr = served.quack_address
    host, port = host_port(served)
    served.stop()
    with pytest.raises(OSError):
        socket.create_connection((host, port), timeout=2).close()
    served.start()
    assert served.quack_address == addr
    status, _, _ = request(served, "GET", "/api/v1/info")
    assert status == 200


def test_start_quack_port_and_generated_token(monkeypatch, tmp_path):
    monkeypatch.delenv("RILLS_QUACK_LISTEN", raising=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    eng = RillEngine(metrics_path=None)
    try:
        eng.start(quack_port=free)
        assert eng.quack_address == f"quack:127.0.0.1:{free}"
        assert len(eng.quack_token) >= 32
        status, _, _ = request(eng, "GET", "/api/v1/info", token=eng.quack_token)
        assert status == 200
        status, _, body = request(eng, "GET", "/api/v1/alerts", token=eng.quack_token)
        assert status == 503  # no metrics database
    finally:
        eng.close()


def test_no_auth_is_refused_off_loopback(monkeypatch):
    monkeypatch.delenv("RILLS_QUACK_LISTEN", raising=False)
    eng = RillEngine(quack_address="quack:0.0.0.0:0", quack_token="", metrics_path=None)
    try:
        with pytest.raises(ValueError, match="loopback"):
            eng.start()
    finally:
        eng.close()


def test_address_in_use_raises_oserror(served, monkeypatch):
    monkeypatch.setenv("RILLS_QUACK_LISTEN", served.quack_address[len("quack:"):])
    other = RillEngine(quack_token="x", metrics_path=None)
    try:
        with pytest.raises(OSError, match="cannot listen"):
            other.start()
        assert not other.running
    finally:
        other.close()


def test_oversized_header_and_body_are_refused(served):
    status, _, _ = request(served, "GET", "/api/v1/info", headers={"X-Big": "a" * 20000})
    assert status == 431
    host, port = host_port(served)
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /api/v1/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                  TOKEN.encode() + b"\r\nContent-Length: " + str(17 * 1024 * 1024).encode() +
                  b"\r\n\r\n{\"sql\": \"")
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413") and b"max_body_bytes" in reply


def test_quack_dashboard_demo_serves_its_tables(tmp_path):
    import os
    import pathlib
    import re
    import subprocess
    import sys
    demo = pathlib.Path(__file__).resolve().parents[2] / "examples" / "quack_dashboard_demo.py"
    env = dict(os.environ, RILLS_QUACK_LISTEN="127.0.0.1:0")
    proc = subprocess.Popen([sys.executable, str(demo), "--duration", "20", "--metrics-path",
                             str(tmp_path / "m.db")], stdout=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stdout.readline()
        m = re.search(r"quack:(127\.0\.0\.1):(\d+)\s+token: (\w+)", first)
        assert m, first
        host, port, token = m.group(1), int(m.group(2)), m.group(3)
        deadline = time.time() + 15
        names = []
        while time.time() < deadline and "revenue_by_tier" not in names:
            conn = http.client.HTTPConnection(host, port, timeout=10)
            conn.request("GET", "/api/v1/tables", headers={"Authorization": f"Bearer {token}"})
            names = [t["name"] for t in json.loads(conn.getresponse().read())["tables"]]
            conn.close()
            time.sleep(0.3)
        assert {"orders", "revenue_by_tier"} <= set(names)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
