"""Small queries over pgwire: what runs on the network thread and from cached plans.

Each session keeps one DuckDB connection with the plans of its statements that
read no table (a SELECT of constants) and answers those, and session
statements (SET, SHOW, BEGIN ...), on the io thread; everything else runs on
the query pool. These tests pin what must not change with that: answers (DuckDB's
Python client is the oracle), a replaced table's new schema, cancellation and
statement timeouts, and that a slow query on one connection does not hold up
small queries on another.
"""

import random
import threading
import time

import duckdb
import psycopg
import pyarrow as pa
import pytest

from rills import MemoryConnector, schema
from test_pgwire import Server, module_server


server = module_server("pgwire-small")


def test_repeated_constant_queries_match_duckdb(server):
    rng = random.Random(29)
    oracle = duckdb.connect()
    shapes = ["SELECT {a} + {b} AS s, 'v' || {a} AS t",
              "SELECT {a} * {b} AS p WHERE {a} > {b}",
              "SELECT CAST({a} AS DOUBLE) / 4 AS d, {b} % 3 AS m"]
    queries = [rng.choice(shapes).format(a=rng.randint(-5, 5), b=rng.randint(-5, 5))
               for _ in range(12)]
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        # Each text several times: psycopg prepares it from the 5th time on
        # (Parse once, then Bind/Execute), the server caches its plan.
        for _ in range(8):
            for q in queries:
                for prepare in (None, False):  # psycopg's choice, and the simple protocol
                    got = conn.execute(q, prepare=prepare).fetchall()
                    assert got == oracle.execute(q).fetchall(), q
        # Session statements between them, answered on the io thread too.
        conn.execute("SET application_name = 'small-queries'")
        assert conn.execute("SHOW application_name").fetchone() == ("small-queries",)
        assert conn.execute("SELECT 42 AS answer").fetchone() == (42,)
        # A statement over 16 KiB runs on the pool even with a cached plan: same answer.
        long_literal = "SELECT '" + "x" * 20000 + "' AS long_text"
        for _ in range(7):
            assert conn.execute(long_literal).fetchone() == ("x" * 20000,)


def test_prepared_statement_follows_a_table_replaced_with_another_schema(server):
    engine = server.engine
    first = schema([("id", pa.int64()), ("v", pa.int64())], primary_key="id")
    engine.register_table("swapped", schema=first)
    feed = MemoryConnector(target_table="swapped")
    engine.add_connector(feed)
    feed.push({"id": [1, 2], "v": [10, 20]})
    engine.step()
    q = "SELECT * FROM swapped ORDER BY id"

    def user_columns(cur):
        """Names and rows of the table's own columns (SELECT * adds the system ones)."""
        names = [d.name for d in cur.description]
        keep = [i for i, n in enumerate(names) if n in ("id", "v", "tag")]
        return [names[i] for i in keep], [tuple(r[i] for i in keep) for r in cur.fetchall()]

    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        for _ in range(6):  # prepared by psycopg from the 5th run on
            assert user_columns(conn.execute(q)) == (["id", "v"], [(1, 10), (2, 20)])
        engine.drop_table("swapped")
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute(q)
        second = schema([("id", pa.int64()), ("tag", pa.string())], primary_key="id")
        engine.register_table("swapped", schema=second)
        feed2 = MemoryConnector(target_table="swapped")
        engine.add_connector(feed2)
        feed2.push({"id": [3], "tag": ["c"]})
        engine.step()
        assert user_columns(conn.execute(q)) == (["id", "tag"], [(3, "c")])
    engine.drop_table("swapped")


def test_cancel_after_cached_small_queries_on_the_same_connection(server):
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        for _ in range(10):
            assert conn.execute("SELECT 7 AS seven").fetchone() == (7,)
        threading.Timer(1.0, conn.cancel).start()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute("SELECT count(*) FROM range(1000000000000) a")
        assert conn.execute("SELECT 7 AS seven").fetchone() == (7,)


def test_statement_timeout_still_applies_after_cached_small_queries(tmp_path):
    s = Server(tmp_path, rows=10, query_timeout_seconds=0.3)
    try:
        with psycopg.connect(s.dsn(), autocommit=True) as conn:
            for _ in range(10):
                assert conn.execute("SELECT 1 AS one").fetchone() == (1,)
            with pytest.raises(psycopg.errors.QueryCanceled) as err:
                conn.execute("SELECT count(*) FROM range(1000000000000) a")
            assert "timeout" in str(err.value)
            assert conn.execute("SELECT 1 AS one").fetchone() == (1,)
    finally:
        s.close()


def test_slow_query_on_one_connection_does_not_hold_up_small_queries_on_another(server):
    events = []
    lock = threading.Lock()

    def note(what):
        with lock:
            events.append(what)

    slow = psycopg.connect(server.dsn(), autocommit=True)
    started = threading.Event()

    def run_slow():
        started.set()
        try:
            # Runs for hours unless cancelled.
            slow.execute("SELECT count(*) FROM range(1000000000000) a")
            note("slow finished")
        except psycopg.errors.QueryCanceled:
            note("slow cancelled")

    worker = threading.Thread(target=run_slow)
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as quick:
            for _ in range(6):  # cached and prepared before the slow query starts
                quick.execute("SELECT 1 AS one").fetchone()
            worker.start()
            started.wait()
            time.sleep(0.3)  # let the slow query reach the server (no timing is asserted)
            for i in range(200):
                assert quick.execute("SELECT 1 AS one").fetchone() == (1,)
                assert quick.execute("SHOW timezone").fetchone() == ("UTC",)
                assert quick.execute("SELECT count(*) FROM orders").fetchone()[0] > 0
            note("small queries done")
        slow.cancel()
        worker.join(timeout=60)
    finally:
        slow.close()
    assert events == ["small queries done", "slow cancelled"]
