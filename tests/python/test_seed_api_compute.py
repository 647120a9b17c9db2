"""rills.compute (issue 14): the seed's join/filter/aggregate/upsert helpers and module paths.

pyarrow and DuckDB are the oracles: every join type is checked against the
same join written in DuckDB SQL.
"""

import random

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import rills
from rills.compute import aggregate_table, filter_table, join_tables, upsert_table


def _canon(table):
    # Rows as sorted tuples of (column, value), order-independent.
    return sorted(tuple(sorted(r.items(), key=lambda kv: kv[0])) for r in table.to_pylist())


@pytest.fixture
def sides():
    rng = random.Random(14)
    left = pa.table({
        "k": pa.array([rng.randrange(8) for _ in range(60)], pa.int64()),
        "lv": pa.array([rng.random() for _ in range(60)]),
        "shared": pa.array([f"l{i}" for i in range(60)]),
    })
    right = pa.table({
        "k": pa.array([rng.randrange(4, 12) for _ in range(40)], pa.int64()),
        "rv": pa.array([rng.randrange(1000) for _ in range(40)], pa.int64()),
        "shared": pa.array([f"r{i}" for i in range(40)]),
    })
    return left, right


DUCK_SQL = {
    "inner": "SELECT l.k, l.lv, l.shared, r.rv, r.shared AS shared_right FROM l JOIN r USING (k)",
    "left outer": "SELECT l.k, l.lv, l.shared, r.rv, r.shared AS shared_right FROM l LEFT JOIN r ON l.k = r.k",
    "right outer": "SELECT r.k, l.lv, l.shared, r.rv, r.shared AS shared_right FROM l RIGHT JOIN r ON l.k = r.k",
    "full outer": "SELECT COALESCE(l.k, r.k) AS k, l.lv, l.shared, r.rv, r.shared AS shared_right "
                  "FROM l FULL JOIN r ON l.k = r.k",
    "left semi": "SELECT * FROM l SEMI JOIN r USING (k)",
    "left anti": "SELECT * FROM l ANTI JOIN r USING (k)",
    "right semi": "SELECT * FROM r SEMI JOIN l USING (k)",
    "right anti": "SELECT * FROM r ANTI JOIN l USING (k)",
}


@pytest.mark.parametrize("join_type", list(DUCK_SQL))
def test_join_tables_matches_duckdb_for_every_pyarrow_join_type(sides, join_type):
    left, right = sides
    got = join_tables(left, right, keys="k", join_type=join_type)
    con = duckdb.connect()
    con.register("l", left)
    con.register("r", right)
    want = con.execute(DUCK_SQL[join_type]).arrow()
    want = want.read_all() if hasattr(want, "read_all") else want
    assert sorted(got.column_names) == sorted(want.column_names)
    assert _canon(got.select(want.column_names)) == _canon(want)


def test_join_tables_suffixes_right_keys_and_system_columns():
    left = pa.table({"id": [1, 2], "v": [10, 20], "z_insert_ts": [1.0, 2.0], "z_update_ts": [1.0, 2.0]})
    right = pa.table({"uid": [2, 3], "v": [200, 300], "z_insert_ts": [5.0, 6.0], "z_update_ts": [5.0, 6.0]})
    got = join_tables(left, right, keys="id", right_keys="uid", left_suffix="_l", right_suffix="_r")
    assert got.to_pylist() == [{"id": 2, "v_l": 20, "z_insert_ts_l": 2.0, "z_update_ts_l": 2.0,
                                "v_r": 200, "z_insert_ts_r": 5.0, "z_update_ts_r": 5.0}]
    # Default suffixes: the right side's stamps are dropped, the left's kept.
    got = join_tables(left, right, keys=["id"], right_keys=["uid"])
    assert got.column_names == ["id", "v", "z_insert_ts", "z_update_ts", "v_right"]
    with pytest.raises(ValueError, match="join_type"):
        join_tables(left, right, keys="id", join_type="cross")


def test_filter_table_with_mask_and_expression():
    t = pa.table({"a": [1, 5, None, 9], "b": ["w", "x", "y", "z"]})
    mask = pc.greater(t["a"], 3)
    assert filter_table(t, mask).to_pydict() == {"a": [5, 9], "b": ["x", "z"]}
    assert filter_table(t, pc.field("a") < 6).to_pydict() == {"a": [1, 5], "b": ["w", "x"]}
    assert filter_table(t, pa.array([True, False, False, True])).num_rows == 2


def test_aggregate_table_grouped_and_global_against_duckdb():
    t = pa.table({"g": ["a", "b", "a", "c", "b"], "x": [1.0, 2.0, 3.0, 4.0, 5.0]})
    got = aggregate_table(t, "g", [("x", "sum"), ("x", "count"), ("x", "max")])
    want = duckdb.sql("SELECT g, SUM(x) s, COUNT(x) c, MAX(x) m FROM t GROUP BY g").fetchall()
    assert sorted((r["g"], r["x_sum"], r["x_count"], r["x_max"]) for r in got.to_pylist()) == sorted(want)
    total = aggregate_table(t, None, [("x", "sum"), ("x", "mean")])
    assert total.to_pylist() == [{"x_sum": 15.0, "x_mean": 3.0}]
    assert aggregate_table(t, [], [("x", "min")]).to_pylist() == [{"x_min": 1.0}]


def test_module_paths_of_the_seed():
    from rills.compute.operations import aggregate_table as a, filter_table as f, join_tables as j
    from rills.compute.sql import DuckDBBridge, ScheduledSQLTask
    from rills.compute.upsert import upsert_table as u
    from rills.compute.join import TableJoinTask

    assert (a, f, j, u) == (aggregate_table, filter_table, join_tables, upsert_table)
    assert ScheduledSQLTask is rills.ScheduledSQLTask and DuckDBBridge is rills.DuckDBBridge
    assert TableJoinTask is rills.TableJoinTask
    assert rills.join_tables is join_tables


def test_upsert_table_through_compute_matches_pyarrow_oracle():
    old = pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]})
    new = pa.table({"id": [2, 4], "v": ["B", "D"]})
    got = upsert_table(old, new, primary_key="id")
    assert sorted((r["id"], r["v"]) for r in got.to_pylist()) == [(1, "a"), (2, "B"), (3, "c"), (4, "D")]
