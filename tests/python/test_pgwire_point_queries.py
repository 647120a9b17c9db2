"""Point queries of a keyed table (`WHERE key = constant`), over pgwire and query_sql.

The server reads such rows through the table's key index instead of scanning
(src/rill/sql/point_lookup_internal.h); the answers must be DuckDB's over the
same rows. The oracle is DuckDB's Python client over a copy of the table taken
right before each round, after random upserts and deletes; parameters go
through psycopg's extended protocol (text and binary, prepared or not).
"""

import random

import duckdb
import psycopg
import pyarrow as pa

from rills import MemoryConnector, schema
from test_pgwire import module_server


server = module_server("pgwire-points")


def test_point_queries_match_duckdb_after_upserts_and_deletes(server):
    engine = server.engine
    engine.register_table("points", schema=schema(
        [("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())], primary_key="id"))
    feed = MemoryConnector(target_table="points")
    engine.add_connector(feed)
    rng = random.Random(2929)
    shapes = [
        ("SELECT id, name, score FROM points WHERE id = %s", lambda k: (k,)),
        ("SELECT name FROM points WHERE id = %s", lambda k: (str(k),)),
        ("SELECT score, name AS n FROM points WHERE id = %s::BIGINT", lambda k: (k,)),
        ("SELECT id FROM points WHERE id IN (%s, %s)", lambda k: (k, k + 1)),
        ("SELECT count(*) AS c FROM points WHERE id = %s", lambda k: (k,)),
        ("SELECT name FROM points WHERE id = %s AND score > 10", lambda k: (k,)),
        ("SELECT id, name FROM points WHERE id = {k}", lambda k: ()),
        ("SELECT id, name FROM points WHERE id = '{k}'", lambda k: ()),
        ("SELECT id FROM points WHERE id = NULL", lambda k: ()),
    ]
    oracle = duckdb.connect()
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        for _ in range(25):
            keys = [rng.randrange(30) for _ in range(rng.randint(1, 6))]
            feed.push({"id": keys,
                       "name": [None if rng.random() < 0.2 else f"n{rng.randrange(99)}"
                                for _ in keys],
                       "score": [rng.randrange(40) / 2 for _ in keys]})
            engine.step()
            if rng.random() < 0.4:
                engine.get_table("points").delete({"id": [rng.randrange(30), rng.randrange(30)]})
            points = engine.query_sql("SELECT * FROM points")  # noqa: F841 (the oracle's table)
            for _ in range(8):
                text, params = rng.choice(shapes)
                k = rng.randrange(32)
                text = text.replace("{k}", str(k))
                args = params(k)
                want = sorted(oracle.execute(text.replace("%s", "?"), list(args)).fetchall(),
                              key=repr)
                for prepare, binary in ((None, False), (False, False), (True, True)):
                    cur = conn.cursor(binary=binary)
                    got = cur.execute(text, args, prepare=prepare).fetchall()
                    assert sorted(got, key=repr) == want, (text, args, prepare, binary)
                if not args:  # query_sql (the Python path): DuckDB's types and rows
                    got = engine.query_sql(text)
                    expected = oracle.execute(text).arrow()
                    if isinstance(expected, pa.RecordBatchReader):
                        expected = expected.read_all()
                    assert got.schema.equals(expected.schema), (text, got.schema, expected.schema)
                    assert sorted(got.to_pylist(), key=repr) == \
                        sorted(expected.to_pylist(), key=repr), text
