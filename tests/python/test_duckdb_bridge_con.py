"""engine.duckdb.con: DuckDB's connection API over the engine's DuckDB (issue 29).

The pure-Python Rill's examples/benchmark_streams.py (github lijose/rill) calls
`engine.duckdb.con.execute(f"PRAGMA threads={threads}")` inside try/except,
sets `engine.duckdb.use_prepared_statements`, and imports TableJoinTask from
`rill.compute.join` inside its benchmark function. Each of those calls is made
here as that file makes it, and every result is checked against DuckDB's own
Python client over the same rows.
"""

import datetime
import decimal
import time

import numpy as np
import pyarrow as pa
import pytest

import rills
from conftest import require_module

duckdb = require_module("duckdb")

DICT = pa.dictionary(pa.int32(), pa.int64())
IMPRESSIONS = [("product_id", DICT), ("account_id", pa.int64()), ("impression_id", pa.int64()),
               ("system_ts", pa.float64())]
CLICKS = [("product_id", DICT), ("account_id", pa.int64()), ("click_impression_id", pa.int64()),
          ("system_ts", pa.float64())]


def _batches(n_batches=3, rows=400, seed=5):
    """The seed benchmark's streams, small: clicks are 15% of each batch's impressions."""
    rng = np.random.default_rng(seed)
    now = time.time() - 300.0
    out, next_id = [], 100_000_000
    for _ in range(n_batches):
        product = rng.integers(1, 40, rows)
        account = rng.integers(1, 6, rows)
        ids = np.arange(next_id, next_id + rows)
        next_id += rows
        ts = now + rng.uniform(0, 300.0, rows)
        picked = rng.choice(rows, rows * 15 // 100, replace=False)
        out.append((
            {"product_id": product.tolist(), "account_id": account.tolist(),
             "impression_id": ids.tolist(), "system_ts": ts.tolist()},
            {"product_id": product[picked].tolist(), "account_id": account[picked].tolist(),
             "click_impression_id": ids[picked].tolist(),
             "system_ts": (ts[picked] + rng.uniform(0.1, 5.0, len(picked))).tolist()},
        ))
    return out


def _dictionary_batch(data, names):
    # As the seed's --dictionary path builds it.
    encoded = pa.array(data["product_id"]).dictionary_encode()
    product = pa.DictionaryArray.from_arrays(encoded.indices.cast(pa.int32()),
                                             encoded.dictionary.cast(pa.int64()))
    return pa.RecordBatch.from_arrays([product] + [pa.array(data[n]) for n in names[1:]],
                                      names=names)


def _streams(engine, batches, join=False):
    """The seed benchmark's set-up and ingest loop; returns the rows pushed per table."""
    imp_schema = rills.schema(IMPRESSIONS, mode="append")
    click_schema = rills.schema(CLICKS, mode="append")
    retention = rills.RetentionPolicy(max_age_seconds=600.0, time_column="system_ts")
    engine.register_table("impressions", schema=imp_schema, retention_policy=retention,
                          mode="append")
    engine.register_table("clicks", schema=click_schema, retention_policy=retention,
                          mode="append")
    imp_connector = rills.MemoryConnector("impressions", schema=imp_schema)
    click_connector = rills.MemoryConnector("clicks", schema=click_schema)
    engine.add_connector(imp_connector)
    engine.add_connector(click_connector)
    if join:
        from rills.compute.join import TableJoinTask  # function-local, as in the seed
        engine.join_tasks.append(TableJoinTask(
            name="imp_click_join", left_table="clicks", right_table="impressions",
            keys=["product_id", "account_id"], output_table="joined_events",
            join_type="inner", incremental=True))
    for i, (imp, click) in enumerate(batches):
        if i % 2:  # both of the seed's paths: dicts of lists, dictionary-encoded batches
            imp_connector.push(_dictionary_batch(imp, [n for n, _ in IMPRESSIONS]))
            click_connector.push(_dictionary_batch(click, [n for n, _ in CLICKS]))
        else:
            imp_connector.push(imp)
            click_connector.push(click)
        engine.step()
    return ({"impressions": pa.Table.from_pylist([r for b, _ in batches for r in _rows_of(b)]),
             "clicks": pa.Table.from_pylist([r for _, b in batches for r in _rows_of(b)])})


def _rows_of(columns):
    return [dict(zip(columns, values)) for values in zip(*columns.values())]


def _oracle(tables, sql, params=None):
    """`sql` run by DuckDB's own client over copies of the rows pushed."""
    con = duckdb.connect()
    for name, table in tables.items():
        con.register(name, table)
    return con.execute(sql, params)


TOP10 = ("SELECT product_id, COUNT(*) AS n FROM impressions WHERE system_ts >= {cutoff} "
         "GROUP BY product_id ORDER BY n DESC, product_id LIMIT 10")


def test_threads_pragma_as_the_seed_benchmark_runs_it(engine):
    con = engine.duckdb.con
    assert con and engine.duckdb.con is con
    threads = 4
    if threads and engine.duckdb.con:  # the seed's lines, verbatim
        try:
            engine.duckdb.con.execute(f"PRAGMA threads={threads}")
        except Exception:
            pass
    setting = "SELECT current_setting('threads') AS n"
    assert con.execute(setting).fetchone() == (4,)
    for sql, n in (("SET threads = 3", 3), ("set threads to 2;", 2), ("PRAGMA threads(1)", 1),
                   ("SET GLOBAL worker_threads = '2'", 2)):
        assert con.execute(sql).fetchall() == []
        assert con.execute(setting).fetchone() == (n,)
    assert engine.query_sql(setting).column("n").to_pylist() == [2]
    with pytest.raises(rills.InvalidInputError, match="threads"):
        con.execute("PRAGMA threads=0")
    with pytest.raises(rills.InvalidInputError, match="threads"):
        con.execute("SET threads = many")


def test_use_prepared_statements_and_the_function_local_join_import(engine):
    engine.duckdb.use_prepared_statements = True  # the seed sets it from its option
    assert engine.duckdb.use_prepared_statements is True
    engine.duckdb.use_prepared_statements = False
    assert engine.duckdb.use_prepared_statements is False
    batches = _batches()
    _streams(engine, batches, join=True)
    assert [t.name for t in engine.join_tasks] == ["imp_click_join"]
    # Incremental: each tick joins the clicks it brought with the impressions there then.
    expected = []
    for k in range(len(batches)):
        tables = {"impressions": pa.Table.from_pylist(
                      [r for b, _ in batches[:k + 1] for r in _rows_of(b)]),
                  "clicks": pa.Table.from_pylist(_rows_of(batches[k][1]))}
        expected += _oracle(tables, "SELECT c.click_impression_id, i.impression_id "
                                    "FROM clicks c JOIN impressions i "
                                    "USING (product_id, account_id)").fetchall()
    joined = engine.duckdb.con.execute(
        "SELECT click_impression_id, impression_id FROM joined_events").fetchall()
    assert sorted(joined) == sorted(expected) and len(expected) > len(batches[0][1])


def test_fetch_methods_return_the_live_tables_rows(engine):
    pushed = _streams(engine, _batches())
    con = engine.duckdb.con
    sql = TOP10.format(cutoff=time.time() - 600.0)
    expected = _oracle(pushed, sql).fetchall()
    assert len(expected) == 10
    assert con.execute(sql).fetchall() == expected
    assert engine.duckdb.con.execute(sql).arrow().equals(engine.query_sql(sql))
    assert con.execute(sql).fetch_arrow_table().to_pylist() == [
        {"product_id": p, "n": n} for p, n in expected]
    assert con.execute(sql).fetch_record_batch(3).read_all().num_rows == 10
    # One cursor: fetchone, fetchmany and fetchall go on where the last stopped.
    result = con.execute(sql)
    assert result.columns == ["product_id", "n"]
    assert result.fetchone() == expected[0]
    assert result.fetchmany(2) == expected[1:3]
    assert result.fetchall() == expected[3:]
    assert result.fetchone() is None and result.fetchall() == []
    assert result.arrow().num_rows == 0
    count = "SELECT COUNT(*) FROM clicks"
    assert con.execute(count).fetchone() == (pushed["clicks"].num_rows,)
    assert con.sql(count).fetchall() == [(pushed["clicks"].num_rows,)]


def test_df_matches_duckdbs(engine):
    require_module("pandas")
    pushed = _streams(engine, _batches(n_batches=2))
    sql = TOP10.format(cutoff=time.time() - 600.0)
    ours = engine.duckdb.con.execute(sql).df()
    theirs = _oracle(pushed, sql).df()
    assert list(ours.columns) == ["product_id", "n"]
    assert ours.to_dict("list") == theirs.to_dict("list")


def test_params_select_the_same_rows_as_duckdbs(engine):
    pushed = _streams(engine, _batches())
    con = engine.duckdb.con
    product = pushed["impressions"].column("product_id")[0].as_py()
    for sql, params in (
        ("SELECT impression_id FROM impressions WHERE product_id = ? AND account_id >= ? "
         "ORDER BY impression_id", [product, 2]),
        ("SELECT impression_id FROM impressions WHERE account_id = $2 OR product_id = $1 "
         "ORDER BY impression_id", (product, 3)),
        ("SELECT COUNT(*) FROM clicks WHERE system_ts < ?", [time.time() - 100.5]),
    ):
        assert con.execute(sql, params).fetchall() == _oracle(pushed, sql, params).fetchall()
    # ? and $1 inside strings, quoted names, comments and dollar quotes are text.
    sql = ("SELECT '?' AS \"a?\", E'\\'?' AS b, $$ $1 ? $$ AS c, $t$?$t$ AS d, ? AS e "
           "-- ? $1\n/* ? */")
    assert con.execute(sql, ["it's"]).fetchall() == duckdb.execute(sql, ["it's"]).fetchall()


@pytest.mark.parametrize("value", [
    None, True, False, 0, 7, -3, 2**40, 2**63, 1.5, -0.25, float("nan"), float("-inf"),
    "plain", "it's -- not a comment", "back\\slash", "", b"\x00\xff'", decimal.Decimal("1.25"),
    decimal.Decimal("-0.001"), decimal.Decimal("0.5"), decimal.Decimal("0.10"),
    datetime.date(2024, 2, 29), datetime.time(1, 2, 3, 4),
    datetime.datetime(2024, 1, 2, 3, 4, 5, 6),
], ids=repr)
def test_params_bind_with_duckdbs_types(engine, value):
    sql = "SELECT ? AS x, typeof(?) AS t"
    ours = engine.duckdb.con.execute(sql, [value, value]).fetchall()
    theirs = duckdb.execute(sql, [value, value]).fetchall()
    assert repr(ours) == repr(theirs)  # repr: nan == nan


def test_param_mistakes_are_refused_clearly(engine):
    con = engine.duckdb.con
    for sql, params in (("SELECT ?", [1, 2]), ("SELECT ?, ?", [1]), ("SELECT $2", [1]),
                        ("SELECT ?, $1", [1]), ("SELECT $name", [1]), ("SELECT $0", [1])):
        with pytest.raises(rills.InvalidInputError):
            con.execute(sql, params)
    with pytest.raises(rills.InvalidInputError):  # DuckDB's own error, as query_sql gives it
        con.execute("SELECT ?")
    with pytest.raises(TypeError, match="list or tuple"):
        con.execute("SELECT ?", "x")
    with pytest.raises(TypeError, match="object"):
        con.execute("SELECT ?", [object()])
    with pytest.raises(TypeError, match="sql must be a str"):
        con.execute(None)


@pytest.mark.parametrize("sql", [
    "INSERT INTO clicks VALUES (1, 1, 1, 1.0)",
    "CREATE TABLE t AS SELECT * FROM clicks",
    "COPY clicks TO '/tmp/rills_con_test.csv'",
    "SET memory_limit = '1GB'",
    "SELECT 1; SELECT 2",
    "SELECT * FROM missing_table",
    "SELECT nope FROM clicks",
])
def test_refused_statements_raise_what_query_sql_raises(engine, sql):
    pushed = _streams(engine, _batches(n_batches=1))
    with pytest.raises(Exception) as by_query_sql:
        engine.query_sql(sql)
    with pytest.raises(Exception) as by_con:
        engine.duckdb.con.execute(sql)
    assert type(by_con.value) is type(by_query_sql.value)
    assert isinstance(by_con.value, ValueError)
    assert str(by_con.value) == str(by_query_sql.value)
    assert engine.duckdb.con.execute("SELECT COUNT(*) FROM clicks").fetchone() == (
        pushed["clicks"].num_rows,)
    with pytest.raises(type(by_query_sql.value)):  # and the same with (no) params bound
        engine.duckdb.con.execute(sql, [])
