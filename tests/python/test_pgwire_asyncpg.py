"""asyncpg (and pgjdbc, psycopg with server-side binding) against Rill's pgwire.

asyncpg prepares every statement and asks the server for the parameter types
(ParameterDescription), then encodes each argument in binary for that type:
a server that describes every parameter as text makes `WHERE n > $1` with an
int fail in the client. Rill describes the types DuckDB binds. The server is
the one users run (tests/python/test_pgwire.py's Server: an `orders` table of
100 rows); DuckDB's Python client is the oracle.
"""

import asyncio
import datetime
import decimal
import shutil
import subprocess

import pytest

from test_pgwire import ROOT, TOKEN, Server, module_server, orders_oracle

asyncpg = pytest.importorskip("asyncpg")


server = module_server("asyncpg")


def run(coro):
    return asyncio.run(coro)


async def connect(server, database="rill"):
    return await asyncpg.connect(host="127.0.0.1", port=server.port, user="tester",
                                 password=TOKEN, database=database, ssl=False, timeout=30)


def oracle(sql, *params):
    return orders_oracle().execute(sql, list(params)).fetchall()


def test_asyncpg_connects_with_scram_and_fetches(server):
    async def main():
        conn = await connect(server)
        try:
            return await conn.fetchval("SELECT count(*) FROM orders")
        finally:
            await conn.close()
    assert run(main()) == 100


@pytest.mark.parametrize("where, arg", [
    ("order_id > $1", 95),                                       # int8 column, int
    ("quantity = $1", 3),                                        # int4 column, int
    ("amount < $1", 10.0),                                       # float8 column, float
    ("customer = $1", "customer_3"),                             # text
    ("paid = $1", True),                                         # bool
    ("created_at >= $1", datetime.datetime(2023, 11, 14, 22, 14, 50)),  # timestamp
])
def test_asyncpg_parameters_get_the_type_of_their_column(server, where, arg):
    sql = f"SELECT order_id FROM orders WHERE {where} ORDER BY order_id"

    async def main():
        conn = await connect(server)
        try:
            return [r["order_id"] for r in await conn.fetch(sql, arg)]
        finally:
            await conn.close()
    expected = [r[0] for r in oracle(sql.replace("$1", "?"), arg)]
    assert expected, "the oracle found no rows: the case tests nothing"
    assert run(main()) == expected


def test_asyncpg_cast_parameters_and_values(server):
    async def main():
        conn = await connect(server)
        try:
            return (await conn.fetchval("SELECT $1::bigint + 1", 41),
                    await conn.fetchval("SELECT $1::double * 2", 1.25),
                    await conn.fetchval("SELECT $1::date + 1", datetime.date(2024, 2, 28)),
                    await conn.fetchval("SELECT $1::decimal(10,2) * 2", decimal.Decimal("1.25")),
                    await conn.fetchval("SELECT $1::smallint", 7),
                    await conn.fetchval("SELECT $1::real", 0.5),
                    await conn.fetchval("SELECT $1", "untyped stays text"))
        finally:
            await conn.close()
    assert run(main()) == (42, 2.5, datetime.date(2024, 2, 29), decimal.Decimal("2.50"), 7,
                           0.5, "untyped stays text")


def test_asyncpg_prepared_statement_reused_with_new_arguments(server):
    sql = "SELECT count(*) AS n, sum(amount) AS total FROM orders WHERE order_id BETWEEN $1 AND $2"

    async def main():
        conn = await connect(server)
        try:
            stmt = await conn.prepare(sql)
            types = [t.name for t in stmt.get_parameters()]
            results = [tuple(await stmt.fetchrow(lo, hi)) for lo, hi in [(0, 9), (10, 19),
                                                                          (50, 99)]]
            return types, results
        finally:
            await conn.close()
    types, results = run(main())
    assert types == ["int8", "int8"]
    for (lo, hi), got in zip([(0, 9), (10, 19), (50, 99)], results):
        n, total = oracle(sql.replace("$1", "?").replace("$2", "?"), lo, hi)[0]
        assert got[0] == n and got[1] == pytest.approx(float(total))


def test_asyncpg_introspects_types_it_has_no_codec_for(server):
    # Arrays (and other non-scalar types) make asyncpg look the type up in
    # pg_type / pg_namespace / pg_range with its introspection query, and
    # array arguments go in binary.
    async def main():
        conn = await connect(server)
        try:
            ints = await conn.fetchval("SELECT [1, 2, 3]::INTEGER[]")
            texts = await conn.fetchval("SELECT list(customer ORDER BY order_id) FROM orders "
                                        "WHERE order_id < 3")
            total = await conn.fetchval("SELECT list_sum($1::BIGINT[])", [1, 2, None, 3])
            echoed = await conn.fetchval("SELECT $1::VARCHAR[]", ["a", "b'c"])
            return ints, texts, total, echoed
        finally:
            await conn.close()
    ints, texts, total, echoed = run(main())
    assert ints == [1, 2, 3]
    assert texts == ["customer_0", "customer_1", "customer_2"]
    assert total == 6
    assert echoed == ["a", "b'c"]


def test_asyncpg_statement_timeout_is_57014(tmp_path):
    s = Server(tmp_path, rows=1, query_timeout_seconds=0.3)

    async def main():
        conn = await connect(s)
        try:
            with pytest.raises(asyncpg.exceptions.QueryCanceledError):
                await conn.fetchval("SELECT count(*) FROM range(1000000000000) a")
            return await conn.fetchval("SELECT count(*) FROM orders")
        finally:
            await conn.close()
    try:
        assert run(main()) == 1
    finally:
        s.close()


def test_asyncpg_metrics_database_with_parameters(server):
    async def main():
        conn = await connect(server, database="rill_metrics")
        try:
            return await conn.fetchval("SELECT count(*) FROM rill_alerts WHERE ts > $1", 0.0)
        finally:
            await conn.close()
    assert run(main()) >= 0 and isinstance(run(main()), int)


def test_psycopg_server_side_binding_prepared_and_binary(server):
    import psycopg
    sql = "SELECT order_id FROM orders WHERE order_id > %s AND amount < %s ORDER BY order_id"
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        for _ in range(3):  # prepare=True: a named statement, reused
            got = [r[0] for r in conn.execute(sql, (90, 120.0), prepare=True, binary=True)]
    expected = [r[0] for r in oracle(sql.replace("%s", "?"), 90, 120.0)]
    assert got == expected and expected


def test_pgjdbc_prepared_statement_set_long_and_set_double(server, tmp_path):
    if shutil.which("javac") is None:
        pytest.skip("no JDK (javac) on this machine")
    jars = sorted((ROOT / "build" / "pgjdbc").glob("postgresql-*.jar"))
    if not jars:
        pytest.skip("pgjdbc jar (scripts/setup fetches it into build/pgjdbc) is missing")
    source = ROOT / "tests" / "java" / "PgwireJdbcParams.java"
    subprocess.run(["javac", "-d", str(tmp_path), "-cp", str(jars[-1]), str(source)], check=True,
                   timeout=120)
    r = subprocess.run(["java", "-cp", f"{jars[-1]}:{tmp_path}", "PgwireJdbcParams",
                        str(server.port), server.token], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    expected = oracle("SELECT order_id FROM orders WHERE order_id > ? AND amount < ? "
                      "ORDER BY order_id", 90, 120.0)
    assert lines["rows"].split() == [str(i) for (i,) in expected]
    assert lines["cast"] == "42"
    assert lines["params"] == "int8 float8"
