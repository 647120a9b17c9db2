"""upsert_table() and table upserts with single and composite keys; checked against DuckDB."""

import duckdb
import pyarrow as pa
import pytest

from rills import RillTable, schema, upsert_table


def _oracle_upsert(old, new, keys):
    # Independent oracle: old rows whose key is absent from new, then all new rows.
    con = duckdb.connect()
    con.register("old_t", old)
    con.register("new_t", new)
    cond = " AND ".join(f"o.{k} = n.{k}" for k in keys)
    return con.execute(
        f"SELECT * FROM old_t o WHERE NOT EXISTS (SELECT 1 FROM new_t n WHERE {cond}) "
        f"UNION ALL SELECT * FROM new_t").fetch_arrow_table()


def _sorted(table, keys):
    return table.sort_by([(k, "ascending") for k in keys]).to_pylist()


def test_upsert_table_single_key():
    s = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
    old = pa.table({"id": [1, 2, 3], "name": ["Alice", "Bob", "Charlie"], "score": [10.0, 20.0, 30.0]}, schema=s)
    new = pa.table({"id": [2, 4], "name": ["Bob Updated", "David"], "score": [25.5, 40.0]}, schema=s)
    result = upsert_table(old, new, primary_key="id")
    assert result.num_rows == 4
    assert _sorted(result.select(s.names), ["id"]) == _sorted(_oracle_upsert(old, new, ["id"]), ["id"])


def test_upsert_table_composite_key():
    old = pa.table({"user_id": [100, 100, 200], "session_id": ["s1", "s2", "s1"], "clicks": [5, 10, 3]})
    new = pa.table({"user_id": [100, 300], "session_id": ["s2", "s1"], "clicks": [15, 1]})
    keys = ["user_id", "session_id"]
    result = upsert_table(old, new, primary_key=keys)
    assert _sorted(result.select(old.column_names), keys) == _sorted(_oracle_upsert(old, new, keys), keys)


def test_upsert_table_without_key_appends_and_accepts_none():
    t1, t2 = pa.table({"val": [1, 2]}), pa.table({"val": [3, 4]})
    assert upsert_table(t1, t2, primary_key=None).column("val").to_pylist() == [1, 2, 3, 4]
    assert upsert_table(None, pa.table({"a": [10, 20]}), primary_key="a").column("a").to_pylist() == [10, 20]
    batch = pa.RecordBatch.from_pydict({"a": [1]})
    assert upsert_table(batch, batch, primary_key="a").num_rows == 1


def test_table_upsert_matches_oracle_over_many_batches():
    s = schema([("k1", pa.int64()), ("k2", pa.string()), ("v", pa.float64())], primary_key=["k1", "k2"])
    tbl = RillTable("composite", schema=s)
    expected = pa.table({"k1": pa.array([], pa.int64()), "k2": pa.array([], pa.string()),
                         "v": pa.array([], pa.float64())})
    for step in range(20):
        batch = pa.table({
            "k1": [(step * 7 + i) % 13 for i in range(10)],
            "k2": [f"s{(step + i) % 3}" for i in range(10)],
            "v": [float(step * 100 + i) for i in range(10)],
        })
        # Within one batch the last row per key wins: dedupe the batch for the oracle.
        con = duckdb.connect()
        con.register("b", batch)
        deduped = con.execute(
            "SELECT k1, k2, v FROM (SELECT *, row_number() OVER (PARTITION BY k1, k2 ORDER BY v DESC) rn "
            "FROM b) WHERE rn = 1").fetch_arrow_table()
        expected = _oracle_upsert(expected, deduped, ["k1", "k2"])
        tbl.upsert(batch)
    got = tbl.to_arrow().select(["k1", "k2", "v"])
    assert _sorted(got, ["k1", "k2"]) == _sorted(expected, ["k1", "k2"])


def test_upsert_accepts_python_inputs():
    tbl = RillTable("t", primary_key="id")
    tbl.upsert([{"id": 1, "x": "a"}, {"id": 2}])
    tbl.upsert({"id": [2], "x": ["b"]})
    tbl.upsert([pa.RecordBatch.from_pydict({"id": [3], "x": ["c"]})])
    rows = {r["id"]: r["x"] for r in tbl.to_arrow().to_pylist()}
    assert rows == {1: "a", 2: "b", 3: "c"}
    with pytest.raises(TypeError, match="got int"):
        tbl.upsert(42)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_large_first_load_then_upserts_match_duckdb_with_insert_times(seed):
    # A first load into an empty table takes its own path (the key index reports
    # only repeated keys, z_insert_ts shares the write's z_update_ts buffer);
    # 200k rows make the index's probe array a fresh mapping. Later batches mix
    # new keys, updates and keys repeated within the batch. Oracle: DuckDB, with
    # z_insert_ts = the time of a key's first write, z_update_ts = its last.
    import numpy as np

    rng = np.random.default_rng(seed)
    s = schema([("id", pa.int64()), ("v", pa.float64()), ("tag", pa.string())], primary_key="id")
    tbl = RillTable("load", schema=s)
    con = duckdb.connect()
    con.execute("CREATE TABLE ref (id BIGINT PRIMARY KEY, v DOUBLE, tag VARCHAR, "
                "z_insert_ts DOUBLE, z_update_ts DOUBLE)")
    sizes = [200_000, 5_000, 30_000, 1, 70_000]
    for step, n in enumerate(sizes):
        now = 1_000.0 + step
        domain = 150_000 if step == 0 else 400_000  # the first load repeats keys
        ids = rng.integers(0, domain, n)
        batch = pa.table({"id": ids, "v": rng.random(n),
                          "tag": pa.array([f"t{step}-{i % 7}" for i in range(n)])})
        tbl.upsert(batch, current_time=now)
        con.register("b", batch.append_column("rn", pa.array(np.arange(n))))
        con.execute(
            f"""INSERT INTO ref
                SELECT id, v, tag, {now}, {now} FROM (
                  SELECT *, row_number() OVER (PARTITION BY id ORDER BY rn DESC) AS last FROM b)
                WHERE last = 1
                ON CONFLICT (id) DO UPDATE SET v = excluded.v, tag = excluded.tag,
                  z_update_ts = excluded.z_update_ts""")
        con.unregister("b")
        got = tbl.to_arrow().sort_by("id")
        want = con.execute("SELECT * FROM ref ORDER BY id").fetch_arrow_table()
        assert got.num_rows == want.num_rows, f"step {step}"
        for column in ("id", "v", "tag", "z_insert_ts", "z_update_ts"):
            assert got.column(column).to_pylist() == want.column(column).to_pylist(), (
                f"step {step}, column {column}")
