"""Pipelines declared in SQL (issue 26): `rill serve` with no pipeline file, built
from psql with the admin credential, over the real Kafka broker; the read-only
token refused (42501) over pgwire and HTTP; every refusal with its SQLSTATE; a
few hundred malformed statements; the catalog surviving a restart (checkpoint);
`rill pipeline dump` round trips (SQL and YAML); and RillEngine.execute_ddl.

DuckDB computes every expected result from what was produced.
"""

import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request

import duckdb
import pyarrow as pa
import pytest

from conftest import require, require_module, requires
from serve_process import http_request, start_serve

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "ddl-reader"
ADMIN = "ddl-admin-secret"

pytestmark = requires(not RILL.exists(), f"{RILL} not built")
psycopg = require_module("psycopg")


class Serve:
    """`rill serve` (optionally of a pipeline file) with the admin credential."""

    count = 0

    def __init__(self, tmp_path, *args, pipeline=None):
        Serve.count += 1
        self.tmp_path = tmp_path
        self.out_path = tmp_path / f"serve{Serve.count}.out"
        self.err_path = tmp_path / f"serve{Serve.count}.err"
        cmd = [str(RILL), "serve", "--metrics", ":memory:", "--listen", "127.0.0.1:0",
               "--token", TOKEN, "--admin-token", ADMIN, *args]
        if pipeline is not None:
            cmd.append(str(pipeline))
        self.proc, self.address = start_serve(cmd, self.out_path, self.err_path)
        self.port = int(self.address.rsplit(":", 1)[1])

    def connect(self, admin=False):
        return psycopg.connect(host="127.0.0.1", port=self.port, dbname="rill",
                               user="admin" if admin else "reader",
                               password=ADMIN if admin else TOKEN, autocommit=True,
                               connect_timeout=10)

    def rows(self, sql, admin=False):
        with self.connect(admin) as conn:
            return conn.execute(sql).fetchall()

    def http_sql(self, token, sql):
        return http_request(self.address, "/api/v1/sql", token, sql.encode())

    def psql_file(self, path, user="admin", password=ADMIN):
        if shutil.which("psql") is None:
            require("psql (Debian postgresql-client) is not installed")
        env = dict(os.environ, PGPASSWORD=password, PGCONNECT_TIMEOUT="10")
        return subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", user,
                               "-d", "rill", "-v", "ON_ERROR_STOP=1", "-f", str(path)],
                              env=env, capture_output=True, text=True, timeout=120)

    def dump(self, fmt):
        r = subprocess.run([str(RILL), "pipeline", "dump", "--server", self.address, "--token",
                            ADMIN, "--format", fmt], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def wait(self, sql, want, timeout=60, admin=False):
        deadline = time.time() + timeout
        got = None
        while time.time() < deadline:
            try:
                got = sorted(self.rows(sql, admin))
            except psycopg.errors.UndefinedTable:
                got = None
            if got == want:
                return
            time.sleep(0.2)
        assert got == want, f"{sql}: {got} != {want}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise
        assert self.proc.returncode == 0, self.err_path.read_text()[-3000:]
        return self.out_path.read_text()


@pytest.fixture
def serve(tmp_path):
    started = []

    def start(*args, pipeline=None):
        s = Serve(tmp_path, *args, pipeline=pipeline)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.send_signal(signal.SIGINT)
            try:
                s.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                s.proc.kill()


# ---- Credentials -------------------------------------------------------------------------

def test_read_only_token_gets_42501_for_ddl_over_pgwire_and_http(serve):
    s = serve()
    statements = [
        "CREATE TABLE t (a BIGINT)",
        "CREATE SOURCE s INTO t WITH (connector = 'memory')",
        "CREATE MATERIALIZED VIEW v AS SELECT 1 AS x",
        "CREATE STREAM VIEW v WITH (source = 't', max_rows = 10) AS SELECT * FROM t",
        "CREATE WINDOW w WITH (source = 't', window = 'tumbling', size_seconds = 1)",
        "CREATE SINK k FROM t WITH (connector = 'file', path = '/tmp/never')",
        "CREATE KPI k AS SELECT 1 AS x",
        "CREATE ALERT RULE r WITH (metric = 'm', op = '>', threshold = 1)",
        "DROP TABLE t", "DROP SOURCE s", "DROP MATERIALIZED VIEW v", "DROP STREAM VIEW v",
        "DROP WINDOW w", "DROP SINK k", "DROP KPI k", "DROP ALERT RULE r",
    ]
    with s.connect() as conn:
        for sql in statements:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql)
        # Read-only statements are still open to it.
        assert conn.execute("SHOW TABLES").fetchall() == []
        assert conn.execute("SELECT 41 + 1").fetchone() == (42,)
    for sql in statements:
        status, reply = s.http_sql(TOKEN, sql)
        assert status == 403 and reply["sqlstate"] == "42501", (sql, reply)
    status, reply = s.http_sql(ADMIN, "CREATE TABLE t (a BIGINT, PRIMARY KEY (a))")
    assert status == 200 and reply["command"] == "CREATE TABLE", reply
    status, reply = s.http_sql(TOKEN, "SHOW TABLES")
    assert status == 200 and [r["name"] for r in reply["rows"]] == ["t"], reply
    # A wrong admin password is refused at login, the admin user with the reader's token too.
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(host="127.0.0.1", port=s.port, dbname="rill", user="admin",
                        password=TOKEN, connect_timeout=10)
    with s.connect(admin=True) as conn:
        conn.execute("DROP TABLE t")
        assert conn.execute("SHOW TABLES").fetchall() == []


def test_every_refusal_has_its_sqlstate_and_creates_nothing(serve):
    s = serve()
    with s.connect(admin=True) as conn:
        conn.execute("CREATE TABLE orders (id BIGINT NOT NULL, region TEXT, price DOUBLE, "
                     "PRIMARY KEY (id))")
        conn.execute("CREATE MATERIALIZED VIEW per_region AS SELECT region, count(*) AS n "
                     "FROM orders GROUP BY region")
        cases = [
            ("CREATE TABLE orders (id BIGINT)", "42710"),
            ("CREATE MATERIALIZED VIEW orders AS SELECT 1 AS x", "42710"),
            ("CREATE TABLE x (a BIGINT) WITH (colour = 'red')", "42601"),
            ("CREATE TABLE x (a BIGINT) WITH (max_rows = 'lots')", "22023"),
            ("CREATE TABLE x (a BIGINT) WITH (mode = 'sideways')", "22023"),
            ("CREATE TABLE x (a NOSUCHTYPE)", "42704"),
            ("CREATE SOURCE s INTO nowhere WITH (connector = 'memory')", "42704"),
            ("CREATE SOURCE s INTO orders WITH (connector = 'kafka')", "42601"),
            ("CREATE SOURCE s INTO orders WITH (connector = 'kafka', topics = 'x', "
             "start = 'yesterday')", "22023"),
            ("CREATE SOURCE s INTO orders WITH (connector = 'telepathy')", "22023"),
            ("CREATE MATERIALIZED VIEW v AS SELECT * FROM nowhere", "42704"),
            ("CREATE MATERIALIZED VIEW v WITH (interval_seconds = 'soon') AS SELECT 1 AS x",
             "22023"),
            ("CREATE STREAM VIEW v WITH (source = 'nowhere', max_rows = 5) AS SELECT 1", "42704"),
            ("CREATE STREAM VIEW v WITH (max_rows = 5) AS SELECT 1", "42601"),
            ("CREATE WINDOW w WITH (source = 'orders', window = 'round', size_seconds = 1)",
             "22023"),
            ("CREATE WINDOW w WITH (window = 'tumbling', size_seconds = 1)", "42601"),
            ("CREATE SINK k FROM nowhere WITH (connector = 'file', path = '/tmp/x')", "42704"),
            ("CREATE SINK k FROM orders WITH (connector = 'kafka', topic = 't', colour = 1)",
             "42601"),
            ("CREATE KPI k AS SELECT * FROM nowhere", "42704"),
            ("CREATE ALERT RULE r WITH (metric = 'm', op = '>', threshold = 'high')", "22023"),
            ("DROP TABLE orders", "2BP01"),
            ("DROP SINK nothing", "42704"),
            ("DROP WINDOW per_region", "42809"),
            ("CREATE TABEL x (a BIGINT)", "42601"),
        ]
        before = conn.execute("SHOW TABLES").fetchall(), conn.execute("SHOW VIEWS").fetchall()
        for sql, state in cases:
            with pytest.raises(psycopg.Error) as info:
                conn.execute(sql)
            assert info.value.sqlstate == state, (sql, info.value.sqlstate, str(info.value))
        after = conn.execute("SHOW TABLES").fetchall(), conn.execute("SHOW VIEWS").fetchall()
        assert [r[0] for r in after[0]] == [r[0] for r in before[0]]
        assert [r[0] for r in after[1]] == [r[0] for r in before[1]]
        for show in ("SHOW SOURCES", "SHOW SINKS", "SHOW WINDOWS"):
            assert conn.execute(show).fetchall() == [], show
        conn.execute("DROP TABLE orders CASCADE")
        assert conn.execute("SHOW VIEWS").fetchall() == []


VALID = [
    "CREATE TABLE t (id BIGINT NOT NULL, name TEXT, PRIMARY KEY (id)) WITH (mode = 'snapshot')",
    "CREATE SOURCE s INTO t WITH (connector = 'file', watch_path = '/tmp/rill-ddl-never', "
    "file_pattern = '*.ndjson', \"poll_interval_seconds\" = 5)",
    "CREATE MATERIALIZED VIEW v WITH (interval_seconds = 1) AS SELECT name, count(*) FROM t "
    "GROUP BY name",
    "CREATE STREAM VIEW sv WITH (source = 't', max_rows = 100) AS SELECT * FROM t WHERE id > 1",
    "CREATE WINDOW w WITH (source = 't', window = 'tumbling', size_seconds = 60, "
    "aggregations = 'n=count(*)')",
    "CREATE SINK k FROM t WITH (connector = 'file', path = '/tmp/rill-never', format = 'csv')",
    "CREATE KPI k WITH (interval_seconds = 1) AS SELECT count(*) AS n FROM t",
    "CREATE ALERT RULE r WITH (metric = 'k', op = '>', threshold = 5)",
    "DROP MATERIALIZED VIEW IF EXISTS v CASCADE",
]


CLEANUP = ["DROP ALERT RULE IF EXISTS r", "DROP KPI IF EXISTS k", "DROP SINK IF EXISTS k",
           "DROP WINDOW IF EXISTS w", "DROP STREAM VIEW IF EXISTS sv",
           "DROP MATERIALIZED VIEW IF EXISTS v", "DROP SOURCE IF EXISTS s",
           "DROP TABLE IF EXISTS t CASCADE"]


def malformed_statements(n, seed=26):
    """Truncations, token swaps and garbage around the valid statements."""
    rng = random.Random(seed)
    out = []
    for sql in VALID:
        words = sql.split(" ")
        for cut in range(1, len(words)):
            out.append(" ".join(words[:cut]))
    junk = ["(", ")", "'", "\"", ",", "=", "WITH", "AS", "INTO", "FROM", "CREATE", "DROP",
            "TABLE", ";", "''", "\"\"", "--", "/*", "NULL", "1e999", "\x01", "é", "((((", "))"]
    while len(out) < n:
        words = rng.choice(VALID).split(" ")
        i = rng.randrange(len(words))
        op = rng.randrange(3)
        if op == 0:
            words[i] = rng.choice(junk)
        elif op == 1:
            words.insert(i, rng.choice(junk))
        else:
            del words[i]
        out.append(" ".join(words))
    return out


def test_hundreds_of_malformed_statements_are_refused_and_the_server_stays_up(serve):
    s = serve()
    statements = malformed_statements(400)
    refused = 0
    with s.connect(admin=True) as conn:
        for sql in statements:
            try:
                conn.execute(sql)
            except psycopg.Error as e:
                assert e.sqlstate and len(e.sqlstate) == 5, (sql, e)
                refused += 1
            # Whatever a mutation happened to create is dropped again.
            for cleanup in CLEANUP:
                conn.execute(cleanup)
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert refused >= 300, refused
    assert s.proc.poll() is None


# ---- The pipeline from psql, over the real broker, across a restart ---------------

def consume_all(bootstrap, topic, expect_at_least, timeout=60):
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    messages = []
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                if len(messages) >= expect_at_least:
                    break
                continue
            if m.error():
                continue
            messages.append((m.key(), m.value()))
    finally:
        consumer.close()
    return messages


def revenue_by_region(rows):
    produced = pa.Table.from_pylist(rows)  # noqa: F841 (DuckDB reads it by name)
    return sorted(duckdb.sql("SELECT region, sum(price) AS revenue, count(*) AS n FROM produced "
                             "GROUP BY region").fetchall())


def make_orders(first_id, count, minute0=0):
    rng = random.Random(first_id)
    rows = []
    for i in range(count):
        minute = minute0 + i * 4 // count  # spread over 4 minutes of event time
        rows.append({"order_id": first_id + i, "region": rng.choice(["eu", "us", "apac"]),
                     "price": float(rng.randrange(1, 300)),
                     "ts": f"2026-01-01T00:{minute:02d}:{rng.randrange(60):02d}"})
    return rows


def test_psql_script_builds_a_kafka_pipeline_that_survives_a_restart(serve, kafka_broker, tmp_path):
    require_module("confluent_kafka")
    stamp = int(time.time() * 1000)
    topic_in, topic_out = f"ddl-orders-{stamp}", f"ddl-revenue-{stamp}"
    kafka_broker.create_topic(topic_in, partitions=2)
    kafka_broker.create_topic(topic_out, partitions=1)
    bootstrap = kafka_broker.bootstrap_servers
    checkpoints = tmp_path / "checkpoints"
    script = tmp_path / "pipeline.sql"
    script.write_text(f"""
CREATE TABLE orders (order_id BIGINT NOT NULL, region TEXT, price DOUBLE, ts TIMESTAMP,
                     PRIMARY KEY (order_id))
  WITH (mode = 'snapshot', max_rows = 1000000, max_age_seconds = 360000000, time_column = 'ts');
CREATE SOURCE orders_kafka INTO orders
  WITH (connector = 'kafka', topics = '{topic_in}', "bootstrap.servers" = '{bootstrap}',
        "group.id" = 'rill-ddl-{stamp}', format = 'json', start = 'earliest', on_overflow = 'error');
CREATE MATERIALIZED VIEW revenue_by_region WITH (interval_seconds = 0.2, primary_key = 'region') AS
  SELECT region, sum(price) AS revenue, count(*) AS n FROM orders GROUP BY region;
CREATE STREAM VIEW big_orders WITH (source = 'orders', max_rows = 100000) AS
  SELECT * FROM orders WHERE price > 100;
CREATE WINDOW orders_per_minute WITH (source = 'orders', time_column = 'ts', window = 'tumbling',
  size_seconds = 60, group_by = 'region', aggregations = 'n=count(*),revenue=sum(price)');
CREATE SINK revenue_out FROM revenue_by_region
  WITH (connector = 'kafka', topic = '{topic_out}', "bootstrap.servers" = '{bootstrap}', mode = 'upsert');
SHOW SINKS;
""")
    s = serve("--checkpoint-dir", str(checkpoints), "--checkpoint-interval", "1")
    r = s.psql_file(script)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "revenue_out" in r.stdout

    first = make_orders(1, 120)
    kafka_broker.produce(topic_in, [json.dumps(o) for o in first],
                         keys=[str(o["order_id"]) for o in first])
    s.wait("SELECT region, revenue, n FROM revenue_by_region", revenue_by_region(first))
    # Then a last row in minute 5 closes the windows of minutes 0..3. Sent only
    # once the others are in: the topic has two partitions, and a row of minute 5
    # read before rows of the other partition would close their windows early.
    closing = {"order_id": 10_000, "region": "eu", "price": 5.0, "ts": "2026-01-01T00:05:00"}
    kafka_broker.produce(topic_in, [json.dumps(closing)], keys=[str(closing["order_id"])])
    first.append(closing)
    s.wait("SELECT region, revenue, n FROM revenue_by_region", revenue_by_region(first))
    big = sorted((o["order_id"],) for o in first if o["price"] > 100)
    s.wait("SELECT order_id FROM big_orders", big)
    closed = pa.Table.from_pylist(  # noqa: F841 (DuckDB reads it by name)
        [o for o in first if o["ts"] < "2026-01-01T00:04:00"])
    want_windows = sorted(duckdb.sql(
        "SELECT epoch(time_bucket(INTERVAL 60 SECOND, ts::TIMESTAMP))::BIGINT AS w, region, "
        "count(*) AS n, sum(price) AS revenue FROM closed GROUP BY ALL").fetchall())
    s.wait("SELECT epoch(window_start)::BIGINT, region, n, revenue FROM orders_per_minute",
           want_windows)
    # The sink topic: the last value of each region's key is the view's row. The
    # sink is exactly-once (a checkpoint directory): its transactions commit with
    # the checkpoints (every second), so the last update shows up within one.
    deadline = time.time() + 30
    while True:
        messages = consume_all(bootstrap, topic_out, expect_at_least=3)
        last = {}
        for key, value in messages:
            last[key] = json.loads(value) if value is not None else None
        got = sorted((v["region"], v["revenue"], v["n"]) for v in last.values() if v is not None)
        if got == revenue_by_region(first) or time.time() > deadline:
            break
        time.sleep(0.5)
    assert got == revenue_by_region(first), messages[-10:]

    # What SHOW lists, and the pg_catalog sees the created objects.
    shown = {r[0]: r for r in s.rows("SHOW VIEWS")}
    assert set(shown) == {"revenue_by_region", "big_orders"}
    assert shown["revenue_by_region"][1] == "materialized view"
    assert [r[0] for r in s.rows("SHOW WINDOWS")] == ["orders_per_minute"]
    assert [r[0] for r in s.rows("SHOW SOURCES")] == ["orders_kafka"]
    tables = {r[0] for r in s.rows("SELECT table_name FROM information_schema.tables")}
    assert {"orders", "revenue_by_region", "big_orders", "orders_per_minute"} <= tables

    out = s.stop()
    assert "final checkpoint" in out

    # Restart with the same flags and no script: the catalog and the data are back.
    s2 = serve("--checkpoint-dir", str(checkpoints), "--checkpoint-interval", "1")
    assert "declared objects" in s2.out_path.read_text()
    assert sorted(r[0] for r in s2.rows("SHOW VIEWS")) == ["big_orders", "revenue_by_region"]
    assert [r[0] for r in s2.rows("SHOW SINKS")] == ["revenue_out"]
    s2.wait("SELECT region, revenue, n FROM revenue_by_region", revenue_by_region(first))
    # Processing continues from the checkpointed offsets: nothing counted twice.
    more = make_orders(20_000, 30)
    kafka_broker.produce(topic_in, [json.dumps(o) for o in more],
                         keys=[str(o["order_id"]) for o in more])
    s2.wait("SELECT region, revenue, n FROM revenue_by_region", revenue_by_region(first + more))
    s2.wait("SELECT count(*) FROM orders", [(len(first) + len(more),)])


# ---- Dumps -------------------------------------------------------------------------------

PIPELINE = """
engine: {trigger_interval_ms: 50}
tables:
  - name: orders
    columns: {id: int64, region: string, price: float64}
    primary_key: id
  - name: events
    columns: [{name: id, type: int64, nullable: false}, {name: at, type: "timestamp[ms]"}]
    mode: append
    retention: {max_rows: 1000}
connectors:
  - type: json_stream
    name: ingest
    table: orders
    on_overflow: error
tasks:
  - name: by_region
    type: sql
    sql: SELECT region, sum(price) AS revenue FROM orders GROUP BY region
    output: by_region
    interval_seconds: 0.5
stream_tasks:
  - name: pricey
    sql: SELECT * FROM orders WHERE price > 10
    source: orders
    max_rows: 500
windows:
  - name: per_minute
    source: orders
    window: tumbling
    size_seconds: 60
    group_by: region
    aggregations: {n: "count(*)"}
kpis:
  - name: total
    sql: SELECT sum(price) AS revenue FROM orders
    interval_seconds: 1
alert_rules:
  - name: too_much
    metric: total
    op: ">"
    threshold: 1000
sinks:
  - name: files
    type: file
    table: by_region
    path: {path}
    format: ndjson
"""


def test_pipeline_dump_round_trips_as_sql_and_as_yaml(serve, tmp_path):
    yaml_path = tmp_path / "p.yaml"
    yaml_path.write_text(PIPELINE.replace("{path}", str(tmp_path / "sink-out")))
    a = serve(pipeline=yaml_path)
    sql = a.dump("sql")
    assert sql.count("CREATE ") == 9, sql
    assert "CREATE SINK files FROM by_region" in sql
    yaml_dump = a.dump("yaml")
    a.stop()

    # SQL: fed to a server without a pipeline, through psql.
    b = serve()
    script = tmp_path / "dump.sql"
    script.write_text(sql)
    r = b.psql_file(script)
    assert r.returncode == 0, r.stderr
    assert b.dump("sql") == sql
    b.stop()

    # YAML: served as a pipeline file.
    again = tmp_path / "again.yaml"
    again.write_text(yaml_dump)
    c = serve(pipeline=again)
    assert c.dump("yaml") == yaml_dump
    assert c.dump("sql") == sql
    # The dump needs the admin token.
    status, reply = c.http_sql(TOKEN, "SHOW SINKS")
    assert status == 200 and [row["name"] for row in reply["rows"]] == ["files"]
    req = urllib.request.Request(f"http://{c.address}/api/v1/pipeline/dump?format=sql",
                                 headers={"Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(req, timeout=10)
    assert denied.value.code == 403


# ---- Python ------------------------------------------------------------------------------

def test_execute_ddl_in_python_builds_the_same_objects(make_engine):
    import rills

    engine = make_engine(metrics_path=":memory:")
    assert engine.execute_ddl(
        "CREATE TABLE orders (id BIGINT NOT NULL, region TEXT, price DOUBLE, PRIMARY KEY (id));"
        "CREATE MATERIALIZED VIEW revenue WITH (interval_seconds = 0.001) AS "
        "SELECT region, sum(price) AS revenue FROM orders GROUP BY region") \
        == "CREATE MATERIALIZED VIEW"
    conn = rills.MemoryConnector(target_table="orders")
    engine.add_connector(conn)
    rows = [{"id": i, "region": ["eu", "us"][i % 2], "price": float(i)} for i in range(50)]
    conn.push(pa.Table.from_pylist(rows))
    engine.step()
    engine.step()
    got = sorted(engine.query_sql("SELECT region, revenue FROM revenue").to_pylist(),
                 key=lambda r: r["region"])
    pushed = pa.Table.from_pylist(rows)  # noqa: F841 (DuckDB reads it by name)
    want = duckdb.sql("SELECT region, sum(price) AS revenue FROM pushed GROUP BY region "
                      "ORDER BY region").fetchall()
    assert [(r["region"], r["revenue"]) for r in got] == want
    shown = engine.execute_ddl("SHOW VIEWS")
    assert isinstance(shown, pa.Table)
    assert shown.column("name").to_pylist() == ["revenue"]
    with pytest.raises(rills.DDLError) as refused:
        engine.execute_ddl("DROP TABLE orders")
    assert refused.value.sqlstate == "2BP01"
    assert isinstance(refused.value, ValueError)
    with pytest.raises(rills.DDLError) as missing:
        engine.execute_ddl("CREATE KPI k AS SELECT * FROM nowhere")
    assert missing.value.sqlstate == "42704"
    assert engine.execute_ddl("DROP TABLE orders CASCADE") == "DROP TABLE"
    assert engine.execute_ddl("SHOW TABLES").num_rows == 0


def test_docs_sql_lists_every_statements_options_from_the_one_option_table():
    out = subprocess.run([str(RILL), "pipeline", "options", "--format", "sql"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    for heading in ("CREATE TABLE", "connector = 'kafka'", "CREATE MATERIALIZED VIEW",
                    "CREATE STREAM VIEW", "CREATE WINDOW", "CREATE SINK", "CREATE KPI",
                    "CREATE ALERT RULE"):
        assert heading in out.stdout, heading
    assert "`aggregations`" in out.stdout and "`topics` (required)" in out.stdout
    docs = (ROOT / "docs" / "sql.md").read_text()
    begin = "<!-- BEGIN rill pipeline options --format sql -->\n"
    end = "<!-- END rill pipeline options --format sql -->"
    listed = docs[docs.index(begin) + len(begin):docs.index(end)]
    assert listed == out.stdout, \
        "docs/sql.md is out of date: paste `rill pipeline options --format sql`"
