"""`rill serve pipeline.yaml` with every connector kind of the Python API.

Each test writes a pipeline file whose connector reads real data — Parquet and
NDJSON files written by pyarrow, a WebSocket server, the real Kafka broker,
HTTP ingest into a declared json_stream connector, a real PostgreSQL through
logical replication — and checks, over the server's SQL (POST /api/v1/query),
that the table holds exactly what was sent (DuckDB computes the expected rows).
The option names are those of the Python classes (src/rill/pipeline/sources.h).
"""

import asyncio
import json
import os
import pathlib
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import require_module, requires
from serve_process import start_serve

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "serve-connectors"

pytestmark = requires(not RILL.exists(), f"{RILL} not built")

TABLE = """
engine: {trigger_interval_ms: 50}
tables:
  - name: orders
    columns: {id: int64, region: string, price: float64}
    primary_key: id
"""


def call(address, method, path, body=None, raw=None, headers=None):
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(f"http://{address}{path}", data=data, method=method,
                                 headers={"Authorization": f"Bearer {TOKEN}",
                                          "Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


class Served:
    """`rill serve` of a pipeline file; its output goes to files (a pipe nobody
    reads would fill with librdkafka's log lines and block the process)."""

    count = 0

    def __init__(self, tmp_path, yaml_text):
        Served.count += 1
        path = tmp_path / f"pipeline{Served.count}.yaml"
        path.write_text(yaml_text)
        self.stdout_path = tmp_path / f"serve{Served.count}.out"
        self.stderr_path = tmp_path / f"serve{Served.count}.err"
        self.proc, self.address = start_serve(
            [RILL, "serve", path, "--metrics", ":memory:", "--listen", "127.0.0.1:0", "--token",
             TOKEN], self.stdout_path, self.stderr_path)
        self.out = None

    def rows(self, sql):
        status, out = call(self.address, "POST", "/api/v1/query", {"sql": sql})
        assert status == 200, out
        return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in out["rows"]]

    def wait_rows(self, sql, want, timeout=30):
        deadline = time.time() + timeout
        got = None
        while time.time() < deadline:
            got = sorted(self.rows(sql))
            if got == want:
                return got
            time.sleep(0.1)
        assert got == want
        return got

    def close(self):
        if self.out is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self.out = self.stdout_path.read_text()
        assert self.proc.returncode == 0, self.stderr_path.read_text()[-3000:]


@pytest.fixture
def serve(tmp_path):
    started = []

    def start(yaml_text):
        s = Served(tmp_path, yaml_text)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


def expected(rows):
    """The final row per id (upserts), by DuckDB."""
    con = duckdb.connect()
    con.register("src", pa.Table.from_pylist(rows))
    return sorted(con.execute(
        "SELECT id, region, price FROM (SELECT *, row_number() OVER () AS n FROM src) "
        "QUALIFY row_number() OVER (PARTITION BY id ORDER BY n DESC) = 1").fetchall())


def make_rows(n, first=0):
    return [{"id": (first + i) % (n // 2 + 1), "region": ["eu", "us", "apac"][i % 3],
             "price": round(i * 1.25, 2)} for i in range(n)]


QUERY = "SELECT id, region, price FROM orders"


def test_file_connector_reads_parquet_and_ndjson_written_by_pyarrow(serve, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    s = serve(TABLE + f"""
connectors:
  - type: file
    name: files
    table: orders
    watch_path: {folder}
    file_pattern: "[ab].*"
    poll_interval_seconds: 0.05
    stable_seconds: 0.1
""")
    first, second = make_rows(40), make_rows(30, first=7)
    staged = tmp_path / "a.parquet"  # written whole, then moved in
    pq.write_table(pa.Table.from_pylist(first), staged)
    os.rename(staged, folder / "a.parquet")
    s.wait_rows(QUERY, expected(first))
    (folder / "b.ndjson").write_text("".join(json.dumps(r) + "\n" for r in second))
    s.wait_rows(QUERY, expected(first + second))
    status, stats = call(s.address, "GET", "/api/v1/telemetry/connectors")
    assert status == 200
    assert "files" in json.dumps(stats)


def test_websocket_connector_reads_a_websocket_server(serve):
    websockets_server = require_module("websockets.asyncio.server")
    rows = make_rows(50)
    frames = ["\n".join(json.dumps(r) for r in rows[i:i + 7]) for i in range(0, len(rows), 7)]
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = {}
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def handler(ws):
        for f in frames:
            await ws.send(f)
        await ws.wait_closed()

    def run():
        asyncio.set_event_loop(loop)

        async def main():
            stop["event"] = asyncio.Event()
            async with websockets_server.serve(handler, "127.0.0.1", port):
                ready.set()
                await stop["event"].wait()

        loop.run_until_complete(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        s = serve(TABLE + f"""
connectors:
  - type: websocket
    table: orders
    uri: ws://127.0.0.1:{port}/feed
    reconnect_initial_seconds: 0.1
    headers: {{X-Token: abc}}
""")
        s.wait_rows(QUERY, expected(rows))
    finally:
        loop.call_soon_threadsafe(stop["event"].set)
        thread.join(10)


def test_kafka_connector_reads_the_real_broker(serve, kafka_broker):
    topic = f"serve-{int(time.time() * 1000)}"
    kafka_broker.create_topic(topic, partitions=3)
    rows = make_rows(60)
    # One key per id: a partition keeps each id's rows in order.
    kafka_broker.produce(topic, [json.dumps(r) for r in rows],
                         keys=[str(r["id"]).encode() for r in rows])
    s = serve(TABLE + f"""
connectors:
  - type: kafka
    table: orders
    topics: {topic}
    start: earliest
    on_overflow: error
    kafka_config: {{bootstrap.servers: "{kafka_broker.bootstrap_servers}", group.id: g-{topic}}}
""")
    s.wait_rows(QUERY, expected(rows))


def test_json_stream_connector_takes_http_ingest_with_its_options(serve):
    s = serve(TABLE + """
connectors:
  - type: json_stream
    name: ingest
    table: orders
    op_column: op
    unexpected_field_behavior: error
""")
    body = "\n".join(json.dumps(r) for r in [
        {"id": 1, "region": "eu", "price": 1.0, "op": "insert"},
        {"id": 2, "region": "us", "price": 2.0, "op": "insert"},
        {"id": 1, "op": "delete", "region": None, "price": None},
        {"id": 3, "region": "eu", "price": 3.0, "extra": 1},
    ]).encode()
    status, reply = call(s.address, "POST", "/api/v1/ingest/orders?wait=true", raw=body,
                         headers={"Content-Type": "application/x-ndjson"})
    assert status == 200, reply
    assert reply["rejected"] == 1, reply  # the unexpected field, under "error"
    s.wait_rows(QUERY, [(2, "us", 2.0)])
    status, stats = call(s.address, "GET", "/api/v1/telemetry/connectors")
    assert "ingest" in json.dumps(stats)


def test_postgres_cdc_connector_mirrors_a_real_postgresql(serve, postgres_server):
    dbname = f"serve_{int(time.time() * 1000) % 10**9}"
    dsn = postgres_server.create_database(dbname)
    with postgres_server.connect(dbname) as con:
        con.execute("CREATE TABLE src (id bigint PRIMARY KEY, region text, price float8)")
        con.execute("INSERT INTO src SELECT g, 'eu', g * 0.5 FROM generate_series(1, 20) g")
        con.commit()
    s = serve(TABLE + f"""
connectors:
  - type: postgres_cdc
    target_table: orders
    dsn: "{dsn}"
    table: public.src
    slot_name: slot_{dbname}
""")
    want = sorted((i, "eu", i * 0.5) for i in range(1, 21))
    s.wait_rows(QUERY, want)
    with postgres_server.connect(dbname) as con:
        con.execute("UPDATE src SET region = 'us' WHERE id <= 5")
        con.execute("DELETE FROM src WHERE id > 15")
        con.commit()
    want = sorted((i, "us" if i <= 5 else "eu", i * 0.5) for i in range(1, 16))
    s.wait_rows(QUERY, want)


def test_a_bad_option_is_refused_with_file_line_and_option(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(TABLE + """
connectors:
  - type: kafka
    table: orders
    topics: t
    strat: earliest
""")
    out = subprocess.run([str(RILL), "serve", str(path), "--metrics", ":memory:",
                          "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert "bad.yaml:12: connectors[0].strat" in out.stderr, out.stderr
    assert "unknown option 'strat' of a kafka source" in out.stderr, out.stderr


def ingest(served, rows):
    body = "\n".join(json.dumps(r) for r in rows).encode()
    status, reply = call(served.address, "POST", "/api/v1/ingest/orders?wait=true", raw=body,
                         headers={"Content-Type": "application/x-ndjson"})
    assert status == 200 and reply["rejected"] == 0, reply
    return reply


def test_checkpoint_section_restores_the_tables_after_a_restart(serve, tmp_path):
    pipeline = TABLE + f"""
checkpoint: {{dir: {tmp_path / "ckpt"}, interval_seconds: 3600, format: arrow}}
"""
    rows = make_rows(30)
    s = serve(pipeline)
    ingest(s, rows)
    s.wait_rows(QUERY, expected(rows))
    s.close()  # SIGINT: a final checkpoint after the last tick
    assert "final checkpoint" in s.out, s.out
    again = serve(pipeline)
    assert sorted(again.rows(QUERY)) == expected(rows)
    more = make_rows(10, first=100)
    ingest(again, more)
    again.wait_rows(QUERY, expected(rows + more))


def test_stream_tasks_section_runs_a_stream_sql_task(serve):
    s = serve(TABLE + """
stream_tasks:
  - name: big_orders
    source: orders
    sql: SELECT id, price FROM orders WHERE price > 10
    max_rows: 1000
""")
    rows = make_rows(40)
    ingest(s, rows)
    # One push is one write (the last row per key): the task sees each written row once.
    want = sorted((i, price) for i, _, price in expected(rows) if price > 10)
    s.wait_rows("SELECT id, price FROM big_orders", want)


def test_the_docs_list_every_option_of_the_one_option_table():
    out = subprocess.run([str(RILL), "pipeline", "options"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    for kind in ("memory", "json_stream", "file", "websocket", "kafka", "postgres_cdc"):
        assert f"#### `type: {kind}`" in out.stdout
    docs = (ROOT / "docs" / "pipelines.md").read_text()
    begin, end = "<!-- BEGIN rill pipeline options -->\n", "<!-- END rill pipeline options -->"
    listed = docs[docs.index(begin) + len(begin):docs.index(end)]
    assert listed == out.stdout, "docs/pipelines.md is out of date: paste `rill pipeline options`"
