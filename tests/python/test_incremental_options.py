"""The `incremental` option of materialized views (issue 27), as each way of
declaring one takes it: ScheduledSQLTask(..., incremental="auto" | True |
False), the DDL's `CREATE MATERIALIZED VIEW ... WITH (incremental = ...)` and a
pipeline file's `incremental:`. True on a query that cannot be maintained
incrementally is refused, naming the part that cannot (ORDER BY here); the
task stats say how each view is maintained (`maintenance`, `state_bytes`).
"""

import json
import os
import pathlib
import signal
import subprocess

import pyarrow as pa
import pytest

import rills
from conftest import requires
from serve_process import http_request, start_serve

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "incremental-token"
ADMIN = "incremental-admin"

GROUPED = "SELECT region, count(*) AS n, sum(price) AS revenue FROM orders GROUP BY region"
SORTED = "SELECT id, price FROM orders ORDER BY price DESC"
ORDERS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("region", pa.string()),
                    ("price", pa.float64())])


def orders_engine(make_engine):
    engine = make_engine()
    engine.register_table("orders", schema=ORDERS, primary_key="id")
    return engine


def push_orders(engine, rows):
    engine.get_table("orders").upsert(pa.Table.from_pylist(rows, schema=ORDERS))


# ---- ScheduledSQLTask ------------------------------------------------------------------

def test_incremental_defaults_to_auto_and_takes_true_or_false():
    task = rills.ScheduledSQLTask("t", GROUPED, "out")
    assert task.incremental == "auto"
    assert rills.ScheduledSQLTask("t", GROUPED, "out", incremental=True).incremental is True
    assert rills.ScheduledSQLTask("t", GROUPED, "out", incremental=False).incremental is False
    assert "incremental='auto'" in repr(task)


@pytest.mark.parametrize("bad", ["yes", "true", "AUTO", "", 1, 0, None, 2.5])
def test_a_bad_incremental_value_is_a_value_error_naming_it(bad):
    with pytest.raises(ValueError) as refused:
        rills.ScheduledSQLTask("t", GROUPED, "out", incremental=bad)
    message = str(refused.value)
    assert "incremental" in message and repr(bad) in message
    assert '"auto", True or False' in message
    task = rills.ScheduledSQLTask("t", GROUPED, "out")
    with pytest.raises(ValueError):
        task.incremental = bad
    assert task.incremental == "auto"


def test_incremental_true_on_a_query_that_cannot_be_maintained_is_refused_when_added(make_engine):
    engine = orders_engine(make_engine)
    task = rills.ScheduledSQLTask("top", SORTED, "top", incremental=True)
    with pytest.raises(ValueError) as refused:
        engine.add_sql_task(task)
    message = str(refused.value)
    assert "ORDER BY" in message, message
    assert "'top'" in message and "incremental=True" in message, message
    assert list(engine.sql_tasks) == []
    # auto and False take the same query: it is re-run.
    engine.add_sql_task(rills.ScheduledSQLTask("top_auto", SORTED, "top_auto"))
    engine.add_sql_task(rills.ScheduledSQLTask("top_off", SORTED, "top_off", incremental=False))
    push_orders(engine, [{"id": 1, "region": "eu", "price": 5.0},
                         {"id": 2, "region": "us", "price": 7.0}])
    engine.step()
    stats = engine.get_metrics()["tasks"]
    for name in ("top_auto", "top_off"):
        assert stats[name]["maintenance"].startswith("recompute ("), stats[name]
    assert engine.query_sql("SELECT id FROM top_off ORDER BY id").column("id").to_pylist() == [1, 2]


def test_task_stats_say_how_a_view_is_maintained(make_engine):
    engine = orders_engine(make_engine)
    engine.add_sql_task(rills.ScheduledSQLTask("by_region", GROUPED, "by_region",
                                               interval_seconds=0.001, incremental=True))
    engine.add_sql_task(rills.ScheduledSQLTask("by_region_off", GROUPED, "by_region_off",
                                               interval_seconds=0.001, incremental=False))
    before = engine.get_metrics()["tasks"]["by_region"]
    assert before["maintenance"] == ""  # not run yet
    push_orders(engine, [{"id": i, "region": ["eu", "us"][i % 2], "price": float(i)}
                         for i in range(10)])
    engine.step()
    stats = engine.get_metrics()["tasks"]
    on, off = stats["by_region"], stats["by_region_off"]
    assert on["maintenance"] == "incremental", on
    assert off["maintenance"].startswith("recompute ("), off
    for key in ("state_bytes", "changes_read", "rows_upserted", "rows_deleted"):
        assert isinstance(on[key], int) and on[key] >= 0, (key, on)
    want = engine.query_sql(GROUPED + " ORDER BY region").to_pylist()
    assert engine.query_sql("SELECT region, n, revenue FROM by_region ORDER BY region") \
        .to_pylist() == want
    # The engine's copy of the task keeps the mode.
    modes = {t.name: t.incremental for t in engine.sql_tasks}
    assert modes == {"by_region": True, "by_region_off": False}


# ---- DDL -------------------------------------------------------------------------------

def test_ddl_incremental_true_with_order_by_is_refused_with_0a000(make_engine):
    engine = make_engine()
    engine.execute_ddl("CREATE TABLE orders (id BIGINT NOT NULL, region TEXT, price DOUBLE, "
                       "PRIMARY KEY (id))")
    with pytest.raises(rills.DDLError) as refused:
        engine.execute_ddl("CREATE MATERIALIZED VIEW v WITH (incremental = true) AS " + SORTED)
    assert refused.value.sqlstate == "0A000"
    assert isinstance(refused.value, ValueError)
    assert "ORDER BY" in str(refused.value) and "incremental = true" in str(refused.value)
    shown = engine.execute_ddl("SHOW MATERIALIZED VIEWS")
    assert shown.num_rows == 0 and engine.get_table("v") is None

    with pytest.raises(rills.DDLError) as bad:
        engine.execute_ddl("CREATE MATERIALIZED VIEW v WITH (incremental = 'sometimes') AS "
                           + GROUPED)
    assert bad.value.sqlstate == "22023"
    assert "incremental" in str(bad.value) and "'sometimes'" in str(bad.value)

    assert engine.execute_ddl("CREATE MATERIALIZED VIEW v WITH (incremental = false) AS "
                              + SORTED) == "CREATE MATERIALIZED VIEW"
    assert engine.execute_ddl("CREATE MATERIALIZED VIEW g WITH (incremental = 'on') AS "
                              + GROUPED) == "CREATE MATERIALIZED VIEW"
    shown = {r["name"]: r for r in engine.execute_ddl("SHOW MATERIALIZED VIEWS").to_pylist()}
    assert shown["v"]["options"] == "incremental = 'false'"
    assert shown["g"]["options"] == "incremental = 'true'"  # one spelling
    counters = json.loads(shown["g"]["counters"])
    assert counters["maintenance"] == "incremental", counters
    assert counters["state_bytes"] >= 0
    assert json.loads(shown["v"]["counters"])["maintenance"].startswith("recompute (")


# ---- Pipeline files (rill serve) ---------------------------------------------------------

PIPELINE = """
tables:
  - name: orders
    columns: {id: int64, region: string, price: float64}
    primary_key: id
tasks:
  - name: by_region
    sql: SELECT region, count(*) AS n FROM orders GROUP BY region
    incremental: false
  - name: by_region_auto
    sql: SELECT region, count(*) AS n FROM orders GROUP BY region
"""


def http(address, path, data=None, token=ADMIN):
    return http_request(address, path, token, data)


@requires(not RILL.exists(), f"{RILL} not built")
def test_pipeline_file_takes_incremental_false(tmp_path):
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(PIPELINE)
    proc, address = start_serve(
        [RILL, "serve", "--metrics", ":memory:", "--listen", "127.0.0.1:0", "--token", TOKEN,
         "--admin-token", ADMIN, pipeline], tmp_path / "out", tmp_path / "err")
    try:
        status, reply = http(address, "/api/v1/sql", b"SHOW MATERIALIZED VIEWS")
        assert status == 200, reply
        shown = {r["name"]: r for r in reply["rows"]}
        assert shown["by_region"]["options"] == "incremental = 'false'"
        assert shown["by_region_auto"]["options"] == ""
        status, tasks = http(address, "/api/v1/telemetry/tasks")
        assert status == 200, tasks
        by_name = {t["task"]: t for t in tasks["tasks"]}
        for name in ("by_region", "by_region_auto"):
            assert "maintenance" in by_name[name] and "state_bytes" in by_name[name]
        dump = subprocess.run([str(RILL), "pipeline", "dump", "--server", address, "--token",
                               ADMIN, "--format", "yaml"], capture_output=True, text=True,
                              timeout=30)
        assert dump.returncode == 0, dump.stderr
        assert '"incremental": "false"' in dump.stdout, dump.stdout
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


@requires(not RILL.exists(), f"{RILL} not built")
def test_pipeline_file_refuses_incremental_true_on_order_by(tmp_path):
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(PIPELINE.replace("incremental: false", "incremental: true").replace(
        "GROUP BY region\n    incremental", "GROUP BY region ORDER BY n\n    incremental"))
    run = subprocess.run([str(RILL), "serve", "--metrics", ":memory:", "--listen",
                          "127.0.0.1:0", "--token", TOKEN, str(pipeline)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "ORDER BY" in run.stderr and "incremental = true" in run.stderr, run.stderr
    assert "p.yaml" in run.stderr, run.stderr
