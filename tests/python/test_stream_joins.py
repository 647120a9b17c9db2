"""Join tasks with and without aggregation; checked against DuckDB."""

import duckdb
import pyarrow as pa
import pytest

from rills import MemoryConnector, RetentionPolicy, RillEngine, TableJoinTask


def _setup(engine):
    orders = engine.register_table("orders", primary_key="order_id")
    orders.upsert(pa.table({"order_id": [1, 2, 3, 4], "user_id": [10, 20, 10, 30],
                            "amount": [100.0, 250.0, 50.0, 5.0]}))
    users = engine.register_table("users", primary_key="user_id")
    users.upsert(pa.table({"user_id": [10, 20], "region": ["US", "EU"]}))
    return orders.to_arrow().select(["order_id", "user_id", "amount"]), users.to_arrow().select(
        ["user_id", "region"])


def test_join_without_aggregation(engine):
    o, u = _setup(engine)
    engine.add_join_task(TableJoinTask(name="enrich", left_table="orders", right_table="users",
                                       keys="user_id", output_table="orders_enriched", join_type="inner"))
    engine.step()
    enriched = engine.get_table("orders_enriched")
    assert enriched is not None
    got = sorted((r["order_id"], r["region"], r["amount"]) for r in enriched.to_arrow().to_pylist())
    want = sorted(duckdb.sql("SELECT order_id, region, amount FROM o JOIN u USING (user_id)").fetchall())
    assert got == want


def test_left_outer_join(engine):
    o, u = _setup(engine)
    engine.add_join_task(TableJoinTask("enrich_all", "orders", "users", keys="user_id",
                                       output_table="all_orders", join_type="left outer"))
    engine.step()
    rows = {r["order_id"]: r["region"] for r in engine.get_table("all_orders").to_arrow().to_pylist()}
    assert rows == {1: "US", 2: "EU", 3: "US", 4: None}


def test_join_with_aggregation(engine):
    o, u = _setup(engine)
    engine.add_join_task(TableJoinTask(
        name="region_revenue", left_table="orders", right_table="users", keys="user_id",
        output_table="region_summary", group_by="region",
        aggregations=[("amount", "sum"), ("order_id", "count"), ("amount", "max")],
        primary_key="region"))
    engine.step()
    summary = engine.get_table("region_summary")
    got = {r["region"]: (r["amount_sum"], r["order_id_count"], r["amount_max"])
           for r in summary.to_arrow().to_pylist()}
    want = {region: (s, c, m) for region, s, c, m in duckdb.sql(
        "SELECT region, SUM(amount), COUNT(order_id), MAX(amount) FROM o JOIN u USING (user_id) "
        "GROUP BY region").fetchall()}
    assert got == want == {"US": (150.0, 2, 100.0), "EU": (250.0, 1, 250.0)}


def test_join_follows_updates(engine):
    _setup(engine)
    engine.add_join_task(TableJoinTask("rev", "orders", "users", keys="user_id", output_table="rev",
                                       group_by="region", aggregations=[("amount", "sum")]))
    engine.step()
    engine.get_table("orders").upsert({"order_id": [1], "user_id": [20], "amount": [1.0]})
    engine.step()
    got = {r["region"]: r["amount_sum"] for r in engine.get_table("rev").to_arrow().to_pylist()}
    assert got == {"US": 50.0, "EU": 251.0}


def test_incremental_join_appends_new_rows(make_engine):
    engine = make_engine(trigger_interval_ms=10)
    engine.register_table("orders", mode="append", retention_policy=RetentionPolicy(max_rows=1000))
    engine.register_table("profiles", mode="snapshot", primary_key="user_id")
    orders, profiles = MemoryConnector("orders"), MemoryConnector("profiles")
    engine.add_connector(orders)
    engine.add_connector(profiles)
    engine.add_join_task(TableJoinTask("jp", "orders", "profiles", keys="user_id",
                                       output_table="enriched_orders", incremental=True,
                                       retention_policy=RetentionPolicy(max_rows=1000)))
    profiles.push({"user_id": [101, 102], "country": ["USA", "UK"]})
    orders.push({"order_id": [1, 2], "user_id": [101, 102], "amount": [100.0, 200.0]})
    engine.step()
    assert engine.get_table("enriched_orders").num_rows == 2
    orders.push({"order_id": [3], "user_id": [101], "amount": [300.0]})
    engine.step()
    rows = engine.get_table("enriched_orders").to_arrow().to_pylist()
    assert sorted((r["order_id"], r["country"]) for r in rows) == [(1, "USA"), (2, "UK"), (3, "USA")]
    engine.close()


def test_bad_join_arguments(engine):
    with pytest.raises(ValueError):
        TableJoinTask("j", "a", "b", keys=[], output_table="o")
    with pytest.raises(ValueError):
        TableJoinTask("j", "a", "b", keys=["x", "y"], right_keys=["x"], output_table="o")
    with pytest.raises(ValueError, match="sideways"):
        engine.add_join_task(TableJoinTask("j", "a", "b", keys="x", output_table="o", join_type="sideways"))
    with pytest.raises(ValueError, match="median"):
        engine.add_join_task(TableJoinTask("j2", "a", "b", keys="x", output_table="o",
                                           aggregations=[("v", "median")]))
