"""PostgreSQL wire protocol with real clients over real sockets on 127.0.0.1.

The server is the one users run: RillEngine(quack_address="quack:127.0.0.1:0",
quack_token=...).start() serves HTTP and PostgreSQL on its one port. The
engine has an `orders` table of 100 rows (order_id i, customer
'customer_<i % 7>', amount i * 1.25, quantity i % 5 + 1, paid i even,
created_at 2023-11-14 22:13:20 + i s) fed through a MemoryConnector.
Clients: psql, psycopg 3, SQLAlchemy + pandas, pgjdbc. DuckDB's Python client
is the oracle for values.
"""

import datetime
import decimal
import os
import pathlib
import shutil
import signal
import subprocess
import threading
import time

import duckdb
import psycopg
import pyarrow as pa
import pytest

from rills import MemoryConnector, RillEngine, _core, schema
from conftest import require, require_module

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROWS = 100
TOKEN = "pgwire-test-token"
ORDERS = schema([("order_id", pa.int64()), ("customer", pa.string()), ("amount", pa.float64()),
                 ("quantity", pa.int32()), ("paid", pa.bool_()),
                 ("created_at", pa.timestamp("us"))], primary_key="order_id")


def orders_batch(first, n):
    ids = list(range(first, first + n))
    return {"order_id": ids, "customer": [f"customer_{i % 7}" for i in ids],
            "amount": [i * 1.25 for i in ids], "quantity": [i % 5 + 1 for i in ids],
            "paid": [i % 2 == 0 for i in ids],
            "created_at": [datetime.datetime(2023, 11, 14, 22, 13, 20)
                           + datetime.timedelta(seconds=i) for i in ids]}


class Server:
    """A started RillEngine serving on 127.0.0.1 (ticks only when asked: step())."""

    def __init__(self, tmp, rows=ROWS, **server_options):
        self.engine = RillEngine(trigger_interval_ms=3_600_000,
                                 quack_address="quack:127.0.0.1:0", quack_token=TOKEN,
                                 metrics_path=str(tmp / "metrics.db"),
                                 metrics_flush_interval_seconds=0.2)
        self.engine.register_table("orders", schema=ORDERS)
        self.connector = MemoryConnector(target_table="orders")
        self.engine.add_connector(self.connector)
        self.next_id = 0
        if rows:
            self.push(rows)
        self.engine.start()
        if server_options:
            # The same server with non-default limits (what ServerOptions offers).
            _core.serve(self.engine._core, self.engine.quack_address, TOKEN, **server_options)
        self.token = TOKEN
        self.port = int(self.engine.quack_address.rpartition(":")[2])

    def push(self, n):
        """Push n more orders through the connector and run one tick."""
        self.connector.push(orders_batch(self.next_id, n))
        self.next_id += n
        self.engine.step()

    def dsn(self, dbname="rill", password=None):
        return (f"host=127.0.0.1 port={self.port} user=tester dbname={dbname} "
                f"password={password or self.token}")

    def close(self):
        self.engine.close()


def module_server(prefix):
    """A module-scoped `server` fixture: one Server (in a temp dir named after
    `prefix`) for the tests of the module that assigns it to `server`."""
    @pytest.fixture(scope="module")
    def server(tmp_path_factory):
        s = Server(tmp_path_factory.mktemp(prefix))
        yield s
        s.close()
    return server


server = module_server("pgwire")


def orders_oracle():
    """The same orders in DuckDB (the oracle)."""
    con = duckdb.connect()
    con.execute(f"""
        CREATE TABLE orders AS SELECT i AS order_id, 'customer_' || (i % 7) AS customer,
          i * 1.25 AS amount, CAST(i % 5 + 1 AS INTEGER) AS quantity, i % 2 = 0 AS paid,
          TIMESTAMP '2023-11-14 22:13:20' + to_seconds(i) AS created_at
        FROM range({ROWS}) t(i)""")
    return con


def psql(server, *args, password=None, timeout=30, **kwargs):
    if shutil.which("psql") is None:
        require("psql (Debian postgresql-client) is not installed")
    env = dict(os.environ, PGPASSWORD=password or server.token, PGCONNECT_TIMEOUT="10")
    if "-d" not in args:
        args = ("-d", "rill", *args)
    return subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(server.port), "-U", "tester",
                           "-X", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, **kwargs)


# ---- psql ------------------------------------------------------------------------

def test_psql_runs_queries_with_scram_authentication(server):
    r = psql(server, "-At", "-c", "SELECT count(*), sum(amount) FROM orders WHERE paid")
    assert r.returncode == 0, r.stderr
    expected = orders_oracle().execute(
        "SELECT count(*), sum(amount) FROM orders WHERE paid").fetchone()
    count, total = r.stdout.strip().split("|")
    assert int(count) == expected[0]
    assert float(total) == pytest.approx(float(expected[1]))


def test_psql_lists_tables_and_describes_orders(server):
    r = psql(server, "-c", r"\dt")
    assert r.returncode == 0, r.stderr
    assert "orders" in r.stdout and "public" in r.stdout
    r = psql(server, "-c", r"\d orders")
    assert r.returncode == 0, r.stderr
    lines = {line.split("|")[0].strip(): line.split("|")[1].strip()
             for line in r.stdout.splitlines() if line.count("|") >= 2}
    assert lines["order_id"] == "bigint"
    assert lines["customer"] == "text"
    assert lines["amount"] == "double precision"
    assert lines["quantity"] == "integer"
    assert lines["paid"] == "boolean"
    assert lines["created_at"] == "timestamp without time zone"
    r = psql(server, "-c", r"\l")
    assert r.returncode == 0, r.stderr
    assert "rill_metrics" in r.stdout


def test_psql_rejects_a_wrong_token(server):
    r = psql(server, "-c", "SELECT 1", password="not-the-token")
    assert r.returncode == 2
    assert "password authentication failed" in r.stderr


def test_psql_ctrl_c_cancels_a_long_query(server):
    if shutil.which("psql") is None:
        require("psql (Debian postgresql-client) is not installed")
    env = dict(os.environ, PGPASSWORD=server.token)
    proc = subprocess.Popen(
        ["psql", "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "tester", "-d", "rill",
         "-c", "SELECT count(*) FROM range(1000000000000) a"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)  # psql sends a CancelRequest
    # The count runs for hours: psql ends (with the cancel message) only if it was cancelled.
    out, err = proc.communicate(timeout=60)
    assert "canceling statement due to user request" in err


def test_psql_sees_rows_pushed_after_a_tick(server):
    def count():
        r = psql(server, "-At", "-c", "SELECT count(*) FROM orders")
        assert r.returncode == 0, r.stderr
        return int(r.stdout)
    before = count()
    server.push(5)
    assert count() == before + 5


# ---- psycopg -------------------------------------------------------------------

def test_psycopg_simple_and_parameterized_queries(server):
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        rows = conn.execute("SELECT order_id, customer FROM orders WHERE order_id < 3 "
                            "ORDER BY order_id").fetchall()
        assert rows == [(0, "customer_0"), (1, "customer_1"), (2, "customer_2")]
        rows = conn.execute(
            "SELECT order_id, amount FROM orders WHERE customer = %s AND order_id < %s "
            "ORDER BY order_id", ("customer_3", 20)).fetchall()
        assert rows == [(3, 3.75), (10, 12.5), (17, 21.25)]
        # A parameter that looks like SQL stays a value.
        rows = conn.execute("SELECT count(*) FROM orders WHERE customer = %s",
                            ("x' OR '1'='1",)).fetchall()
        assert rows == [(0,)]


def test_psycopg_server_side_cursor_fetches_in_chunks(server):
    oracle = [r[0] for r in orders_oracle().execute(
        "SELECT order_id FROM orders ORDER BY order_id").fetchall()]
    with psycopg.connect(server.dsn()) as conn:
        with conn.cursor(name="chunks") as cur:
            cur.itersize = 7
            cur.execute("SELECT order_id FROM orders WHERE order_id < %s ORDER BY order_id",
                        (ROWS,))
            first = cur.fetchmany(15)
            rest = cur.fetchall()
    assert [r[0] for r in first + rest] == oracle


def test_holdable_cursor_in_autocommit(server):
    # Execute row limits with PortalSuspended are pinned by the C++ session test
    # (psycopg fetches with FETCH statements instead).
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        with conn.cursor(name="limited", withhold=True) as named:
            named.itersize = 3
            rows = list(named.execute("SELECT order_id FROM orders ORDER BY order_id LIMIT 10"))
        assert [r[0] for r in rows] == list(range(10))


# A result of many DuckDB chunks and Arrow batches (and many send-buffer
# flushes within one batch): every row must arrive once, in order, intact.
LARGE_QUERY = """SELECT i, 'v' || i AS s, i * 0.5 AS f,
  CASE WHEN i % 3 = 0 THEN NULL ELSE CAST(i AS INTEGER) END AS n, i % 2 = 0 AS b,
  TIMESTAMP '2024-01-01' + to_seconds(i) AS ts,
  TIMESTAMP '1969-12-31 23:59:58' + to_microseconds(i * 104729) AS ts_frac,
  TIMESTAMP '0001-01-01' + to_days(i * 12) AS ts_old
FROM range(300000) t(i) ORDER BY i"""


@pytest.mark.parametrize("binary", [False, True])
def test_large_result_matches_duckdb(server, binary):
    expected = duckdb.connect().execute(LARGE_QUERY).fetchall()
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        got = conn.cursor(binary=binary).execute(LARGE_QUERY).fetchall()
    assert len(got) == len(expected)
    assert got == expected


def test_large_result_through_a_server_side_cursor(server):
    expected = duckdb.connect().execute(LARGE_QUERY).fetchall()
    with psycopg.connect(server.dsn()) as conn:
        with conn.cursor(name="large") as cur:
            cur.itersize = 70001  # FETCH counts that cross batch boundaries
            cur.execute(LARGE_QUERY)
            got = cur.fetchmany(1234) + cur.fetchall()
    assert got == expected


TYPE_QUERY = """SELECT
  true AS b, CAST(-3 AS TINYINT) AS i1, CAST(300 AS SMALLINT) AS i2, 70000 AS i4,
  CAST(9000000000 AS BIGINT) AS i8, CAST(200 AS UTINYINT) AS u1,
  CAST(4000000000 AS UINTEGER) AS u4, CAST(1.5 AS REAL) AS f4, CAST(-2.25 AS DOUBLE) AS f8,
  CAST('12345.6789' AS DECIMAL(18, 4)) AS dec, CAST('-0.001' AS DECIMAL(10, 3)) AS dec_small,
  CAST(123456789012345678901234567890 AS HUGEINT) AS huge, 'héllo, "world"' AS txt,
  '' AS empty_text, CAST('\\x00\\xff' AS BLOB) AS blob, DATE '2024-02-29' AS d,
  DATE '0044-03-15' AS d_old, TIME '13:14:15.123456' AS t,
  TIMESTAMP '2024-01-02 03:04:05.678' AS ts, TIMESTAMPTZ '2024-01-02 03:04:05+00' AS tstz,
  INTERVAL '3 days 04:05:06' AS iv, [1, 2, NULL] AS int_list,
  ['a', 'b c', NULL, ''] AS text_list, [1.5, 2.5] AS double_list,
  CAST(NULL AS INTEGER) AS null_int, CAST('NaN' AS DOUBLE) AS nan,
  CAST('infinity' AS DOUBLE) AS inf"""


def duck_values():
    return list(duckdb.connect().execute(TYPE_QUERY).fetchone())


@pytest.mark.parametrize("binary", [False, True])
def test_column_types_round_trip_like_duckdb(server, binary):
    expected = duck_values()
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        cur = conn.cursor(binary=binary)
        got = list(cur.execute(TYPE_QUERY).fetchone())
        names = [d.name for d in cur.description]
        oids = [d.type_code for d in cur.description]
    assert 0 not in oids and 705 not in oids
    for name, g, e in zip(names, got, expected):
        if isinstance(e, float) and e != e:
            assert g != g, name
        elif isinstance(e, datetime.datetime) and e.tzinfo is not None:
            assert g == e, name
        elif name == "huge":
            # PostgreSQL has no 128-bit integer: HUGEINT travels as numeric.
            assert g == decimal.Decimal(e) and g.as_tuple().exponent == 0, name
        else:
            assert g == e and type(g) == type(e), (name, g, e)


def test_real_postgres_oids_for_common_types(server):
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        cur = conn.execute("SELECT true, 1::SMALLINT, 1, 1::BIGINT, 1::REAL, 1::DOUBLE, "
                           "1::DECIMAL(5,2), 'x', 'x'::BLOB, DATE '2024-01-01', "
                           "TIME '01:00', TIMESTAMP '2024-01-01', TIMESTAMPTZ '2024-01-01', "
                           "INTERVAL 1 DAY, [1], ['a'], {'a': 1}")
        oids = [d.type_code for d in cur.description]
    assert oids == [16, 21, 23, 20, 700, 701, 1700, 25, 17, 1082, 1083, 1114, 1184, 1186,
                    1007, 1009, 25]


def test_errors_carry_sqlstates(server):
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        cases = [("SELEC 1", "42601"), ("SELECT * FROM no_such_table", "42P01"),
                 ("INSERT INTO orders VALUES (1)", "25006"),
                 # DDL needs the admin credential (issue 26): insufficient privilege.
                 ("CREATE TABLE t (a INT)", "42501"), ("DROP TABLE orders", "42501")]
        for sql, state in cases:
            with pytest.raises(psycopg.Error) as err:
                conn.execute(sql)
            assert err.value.sqlstate == state, sql
            assert str(err.value)
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on


def test_session_statements_are_acknowledged(server):
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("SET application_name = 'pgwire-test'")
        assert conn.execute("SHOW application_name").fetchone() == ("pgwire-test",)
        assert conn.execute("SHOW server_version").fetchone()[0].startswith("16.")
        assert conn.execute("SHOW standard_conforming_strings").fetchone() == ("on",)
        conn.execute("RESET application_name")
        assert conn.execute("SHOW application_name").fetchone() == ("",)
        conn.execute("BEGIN")
        conn.execute("ROLLBACK")
        conn.execute("DISCARD ALL")
        assert conn.info.parameter_status("server_encoding") == "UTF8"
        assert conn.info.parameter_status("integer_datetimes") == "on"
        assert conn.info.backend_pid != 0


def test_several_statements_and_empty_queries_in_one_message(server):
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        pgconn = conn.pgconn
        pgconn.send_query(b"SELECT 1; ; -- just a comment\n SELECT 'two'")
        statuses = []
        while (res := pgconn.get_result()) is not None:
            statuses.append((res.status, res.ntuples))
        assert [n for _, n in statuses] == [1, 1]
        res = pgconn.exec_(b"  -- nothing\n")
        assert res.status == psycopg.pq.ExecStatus.EMPTY_QUERY


def test_catalog_functions(server):
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        row = conn.execute("SELECT version(), current_setting('server_version_num'), "
                           "quote_ident('a b'), quote_ident('ok'), current_database(), "
                           "pg_catalog.format_type(1184, -1)").fetchone()
        assert row[0].startswith("PostgreSQL 16")
        assert row[1:] == ("160004", '"a b"', "ok", "rill", "timestamp with time zone")
        nulls = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_type WHERE oid IN "
            "(16,17,20,21,23,25,700,701,1043,1082,1083,1114,1184,1186,1700,2950,114) "
            "AND (typname IS NULL OR typlen IS NULL OR typtype IS NULL OR typelem IS NULL "
            "OR typarray IS NULL OR typinput IS NULL)").fetchone()
        assert nulls == (0,)


def test_statement_timeout_gives_57014(tmp_path):
    s = Server(tmp_path, rows=10, query_timeout_seconds=0.3)
    try:
        with psycopg.connect(s.dsn(), autocommit=True) as conn:
            with pytest.raises(psycopg.errors.QueryCanceled) as err:
                conn.execute("SELECT count(*) FROM range(1000000000000) a")
            assert "timeout" in str(err.value)
            assert conn.execute("SELECT count(*) FROM orders").fetchone() == (10,)
    finally:
        s.close()


def test_idle_in_transaction_sessions_are_closed_and_idle_sessions_stay(tmp_path):
    s = Server(tmp_path, rows=1, idle_timeout_seconds=0.3)
    try:
        idle = psycopg.connect(s.dsn(), autocommit=True)
        with psycopg.connect(s.dsn()) as conn:  # not autocommit: BEGIN first
            assert conn.execute("SELECT 1").fetchone() == (1,)
            time.sleep(1.0)
            with pytest.raises(psycopg.Error) as err:
                conn.execute("SELECT 1")
            assert err.value.sqlstate == "25P03"
            assert "idle-in-transaction timeout" in str(err.value)
        # Idle outside a transaction (psql, a pool): stays open, like PostgreSQL.
        assert idle.execute("SELECT 2").fetchone() == (2,)
        idle.close()
        # A client that never finishes authenticating is closed too, at the
        # login deadline (login_timeout_seconds, 10 s by default).
        import socket
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as raw:
            raw.sendall(b"\x00\x00\x00\x08\x04\xd2\x16\x2f")  # SSLRequest
            assert raw.recv(1) == b"N"
            raw.settimeout(30)
            data = b""
            while chunk := raw.recv(4096):  # ends when the server closes
                data += chunk
            assert b"authentication did not complete" in data
    finally:
        s.close()


def test_connection_limit_counts_postgres_connections(tmp_path):
    s = Server(tmp_path, rows=1, max_connections=2)
    try:
        first = psycopg.connect(s.dsn(), autocommit=True)
        second = psycopg.connect(s.dsn(), autocommit=True)
        with pytest.raises(psycopg.OperationalError) as err:
            psycopg.connect(s.dsn(), autocommit=True, connect_timeout=10)
        assert "too many clients" in str(err.value)
        r = psql(s, "-At", "-c", "SELECT 1")
        assert r.returncode == 2 and "too many clients" in r.stderr
        # The slots are the server's, shared with HTTP: it gets its 503.
        import http.client
        web = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        web.request("GET", "/healthz")
        assert web.getresponse().status == 503
        web.close()
        # Both sessions still work; closing one frees its slot.
        assert first.execute("SELECT 1").fetchone() == (1,)
        second.close()
        deadline = time.time() + 10
        while True:
            try:
                third = psycopg.connect(s.dsn(), autocommit=True, connect_timeout=10)
                break
            except psycopg.OperationalError:
                assert time.time() < deadline, "the closed connection's slot was not freed"
                time.sleep(0.05)
        assert third.execute("SELECT 3").fetchone() == (3,)
        third.close()
        first.close()
    finally:
        s.close()


def test_idle_unauthenticated_sockets_leave_room_for_psycopg(tmp_path):
    """Sockets that start up and never answer the SCRAM challenge hold at most
    max_unauthenticated_connections (here max_connections / 2 = 4) slots: the
    oldest are closed as new ones come, and psycopg logs in."""
    import socket
    s = Server(tmp_path, rows=1, max_connections=8)
    idle = []
    try:
        startup = b"user\0tester\0database\0rill\0\0"
        packet = (len(startup) + 8).to_bytes(4, "big") + (196608).to_bytes(4, "big") + startup
        for _ in range(8):  # every slot of max_connections
            raw = socket.create_connection(("127.0.0.1", s.port), timeout=30)
            raw.sendall(packet)
            assert raw.recv(1) == b"R"  # AuthenticationSASL: waiting for the client
            idle.append(raw)

        def closed_by_server(raw):
            data = b""
            while chunk := raw.recv(4096):  # ends when the server closes
                data += chunk
            return data

        for raw in idle[:4]:  # the oldest four made room (each an event)
            assert b"53300" in closed_by_server(raw)
        with psycopg.connect(s.dsn(), autocommit=True, connect_timeout=30) as conn:
            assert conn.execute("SELECT count(*) FROM orders").fetchone() == (1,)
    finally:
        for raw in idle:
            raw.close()
        s.close()


def test_cancel_request_from_psycopg(server):
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        threading.Timer(1.0, conn.cancel).start()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute("SELECT count(*) FROM range(1000000000000) a")
        assert conn.execute("SELECT 2").fetchone() == (2,)


def test_metrics_database_is_selected_by_name(server):
    with psycopg.connect(server.dsn(dbname="rill_metrics"), autocommit=True) as conn:
        tables = {r[0] for r in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
        assert "rill_alerts" in tables and "orders" not in tables
        # The catalog layer lists the metrics tables (and not the live ones).
        listed = {r[0] for r in conn.execute(
            "SELECT quote_ident(table_name) FROM information_schema.tables "
            "WHERE quote_ident(table_schema) = 'public'").fetchall()}
        assert listed == tables
        columns = conn.execute(
            "SELECT quote_ident(column_name), data_type FROM information_schema.columns "
            "WHERE quote_ident(table_name) = 'rill_alerts'").fetchall()
        oracle = conn.execute("SELECT column_name FROM duckdb_columns() "
                              "WHERE table_name = 'rill_alerts' ORDER BY column_index").fetchall()
        assert [c[0] for c in columns] == [c[0] for c in oracle]


def test_psql_lists_and_describes_the_metrics_database(server):
    r = psql(server, "-d", "rill_metrics", "-c", r"\dt")
    assert r.returncode == 0, r.stderr
    assert "rill_alerts" in r.stdout and "orders" not in r.stdout
    r = psql(server, "-d", "rill_metrics", "-c", r"\d rill_alerts")
    assert r.returncode == 0, r.stderr
    assert "severity" in r.stdout and "message" in r.stdout


# ---- SQLAlchemy + pandas ------------------------------------------------------------

def test_sqlalchemy_pandas_read_sql_and_inspect(server):
    sa = require_module("sqlalchemy")
    pd = require_module("pandas")
    engine = sa.create_engine(
        f"postgresql+psycopg://tester:{server.token}@127.0.0.1:{server.port}/rill")
    try:
        sql = "SELECT order_id, customer, amount FROM orders WHERE order_id < 10 ORDER BY order_id"
        got = pd.read_sql(sql, engine)
        expected = orders_oracle().execute(sql).df()
        pd.testing.assert_frame_equal(got, expected, check_dtype=False)
        inspector = sa.inspect(engine)
        assert "orders" in inspector.get_table_names()
        columns = [c["name"] for c in inspector.get_columns("orders")]
        assert columns[:6] == ["order_id", "customer", "amount", "quantity", "paid",
                               "created_at"]
    finally:
        engine.dispose()


# ---- Grafana ------------------------------------------------------------------------
# The statements of Grafana's PostgreSQL data source (health check and the query
# builder's schema, table and column listings), as its postgresMetaQuery.ts builds them.

GRAFANA_SCHEMA_CONSTRAINT = """
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )"""


def test_grafana_health_check_and_query_builder_listings(server):
    c = GRAFANA_SCHEMA_CONSTRAINT
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'").fetchall() == []
        schemas = conn.execute(
            """SELECT schema_name AS "name" FROM information_schema.schemata
               WHERE schema_name NOT IN ('information_schema', 'pg_catalog', 'pg_toast')
               ORDER BY schema_name""").fetchall()
        assert schemas == [("public",)]
        tables = conn.execute(
            """SELECT quote_ident(table_name) AS "table" FROM information_schema.tables
               WHERE quote_ident(table_schema) = 'public' ORDER BY 1""").fetchall()
        assert ("orders",) in tables
        tables = conn.execute(
            f"""SELECT CASE WHEN {c} THEN quote_ident(table_name)
                  ELSE quote_ident(table_schema) || '.' || quote_ident(table_name) END AS "table"
                FROM information_schema.tables
                WHERE quote_ident(table_schema) NOT IN ('information_schema', 'pg_catalog')
                ORDER BY CASE WHEN {c} THEN 0 ELSE 1 END, 1""").fetchall()
        assert ("orders",) in tables
        columns = conn.execute(
            f"""SELECT quote_ident(column_name) AS "column", data_type AS "type"
                FROM information_schema.columns
                WHERE CASE WHEN array_length(parse_ident('orders'),1) = 2
                  THEN quote_ident(table_schema) = (parse_ident('orders'))[1]
                    AND quote_ident(table_name) = (parse_ident('orders'))[2]
                  ELSE quote_ident(table_name) = 'orders' AND {c} END""").fetchall()
        assert columns[:6] == [("order_id", "bigint"), ("customer", "text"),
                               ("amount", "double precision"), ("quantity", "integer"),
                               ("paid", "boolean"), ("created_at", "timestamp without time zone")]


# ---- pgjdbc ------------------------------------------------------------------------

def test_pgjdbc_connects_lists_tables_and_runs_prepared_statements(server, tmp_path):
    if shutil.which("javac") is None:
        require("no JDK (javac) on this machine")
    jar_dir = ROOT / "build" / "pgjdbc"
    if not list(jar_dir.glob("postgresql-*.jar")) and shutil.which("mvn"):
        # What scripts/setup does, for a checkout whose set-up ran before it did.
        subprocess.run(["mvn", "-q", "dependency:copy",
                        "-Dartifact=org.postgresql:postgresql:42.7.4",
                        f"-DoutputDirectory={jar_dir}"], timeout=300, check=False)
    jars = sorted(jar_dir.glob("postgresql-*.jar"))
    if not jars:
        require("pgjdbc jar (scripts/setup fetches it into build/pgjdbc) or the JDK is missing")
    source = ROOT / "tests" / "java" / "PgwireJdbc.java"
    subprocess.run(["javac", "-d", str(tmp_path), "-cp", str(jars[-1]), str(source)], check=True,
                   timeout=120)
    r = subprocess.run(["java", "-cp", f"{jars[-1]}:{tmp_path}", "PgwireJdbc", str(server.port),
                        server.token], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert lines["product"] == "PostgreSQL 16"
    assert "public.orders" in lines["tables"].split(",")
    expected = orders_oracle().execute(
        "SELECT order_id, customer, amount FROM orders WHERE order_id BETWEEN 10 AND 99 "
        "AND customer = 'customer_3' ORDER BY order_id").fetchall()
    assert lines["rows"].split() == [f"{i}:{c}:{float(a)}" for i, c, a in expected]
