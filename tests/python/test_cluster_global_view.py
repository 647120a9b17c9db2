"""Global views (issue 28): `CREATE MATERIALIZED VIEW ... WITH (scope = 'global')`
on the `rill serve` instances of one application, on the real broker. Each
instance holds only the rows of its own input partitions; the global view on
every instance (read over the REST API and over pgwire with psycopg), and on
a separate Rill that only reads the partials topic, equals DuckDB over
everything produced, and follows later input. The view declared
in the pipeline file and the one declared over SQL both work; a query that
does not decompose, a table without _partition and an engine that is no
application's instance are refused, naming why.
"""
import os
import pathlib
import uuid

import duckdb
import psycopg
import pyarrow as pa
import pytest

from conftest import requires
from serve_process import METADATA_COLUMNS, application_pipeline, http_request, start_serve, stop_all, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "global-view-token"
ADMIN = "global-view-admin"
PARTITIONS = 6
REGIONS = ["eu", "us", "apac", "latam"]

pytestmark = [requires(not RILL.exists(), f"{RILL} not built"), pytest.mark.timeout(300)]

BY_REGION = ("SELECT region, count(*) AS n, sum(price) AS revenue, avg(price) AS mean, "
             "min(price) AS lo, max(price) AS hi FROM orders GROUP BY region")
VIEW_ROWS = "SELECT region, n, revenue, mean, lo, hi FROM by_region ORDER BY region"


def reference(rows, sql):
    con = duckdb.connect()
    con.register("orders", pa.table({"id": [r[0] for r in rows], "region": [r[1] for r in rows],
                                     "price": [r[2] for r in rows]}))
    return con.execute(sql).fetchall()


def close_to(got, want):
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            if isinstance(b, float):
                if a is None or abs(float(a) - b) > 1e-9 * max(1.0, abs(b)):
                    return False
            elif isinstance(b, int) and not isinstance(b, bool):
                # sum of a BIGINT is a HUGEINT, decimal(38, 0) in Arrow: JSON gives its text.
                if a is None or int(a) != b:
                    return False
            elif a != b:
                return False
    return True


def test_global_view_on_every_instance_equals_duckdb_over_all_input(kafka_broker, tmp_path):
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    app = f"gv-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, PARTITIONS)
    servers = kafka_broker.bootstrap_servers
    pipeline = tmp_path / "app.yaml"
    pipeline.write_text(application_pipeline(
        app, servers, topic,
        "{id: int64, region: string, price: float64, " + METADATA_COLUMNS + "}",
        metadata_columns=True, commit_interval_ms=100) + f"""tasks:
  - name: by_region
    type: sql
    scope: global
    interval_seconds: 0.2
    sql: {BY_REGION}
""")
    procs = {}
    nodes = ("node-1", "node-2", "node-3")

    def query(node, sql):
        code, body = http_request(procs[node][1], "/api/v1/query", TOKEN,
                                  ('{"sql": "' + sql.replace('"', '\\"') + '"}').encode())
        assert code == 200, body
        return body["rows"]

    def ddl(node, sql):
        return http_request(procs[node][1], "/api/v1/sql", ADMIN, sql.encode())

    def view_rows(node, sql):
        return [tuple(r.values()) for r in query(node, sql)]

    try:
        for node in nodes:
            procs[node] = start_serve([RILL, "serve", "--metrics", ":memory:", "--listen", "127.0.0.1:0",
                                       "--token", TOKEN, "--admin-token", ADMIN, "--instance-id", node,
                                       pipeline], tmp_path / f"{node}.out", tmp_path / f"{node}.err")

        def owned(node):
            code, body = http_request(procs[node][1], "/api/v1/telemetry/cluster", TOKEN)
            return len(body["partitions"]) if code == 200 else 0

        wait_for(lambda: all(owned(n) > 0 for n in nodes) and sum(owned(n) for n in nodes) == PARTITIONS,
                 90, "every instance to own partitions")

        # Also declared over SQL, on one instance: the others declare it from
        # the application's topic of views (each publishes its partitions' partials).
        top = "SELECT max(price) AS hi, count(*) AS n, sum(id) AS ids FROM orders"
        code, body = ddl("node-1", f"CREATE MATERIALIZED VIEW totals WITH (scope = 'global', "
                                   f"interval_seconds = 0.2) AS {top}")
        assert code == 200, body

        def views(node):
            code, body = ddl(node, "SHOW VIEWS")
            return {r["name"] for r in body["rows"]} if code == 200 else set()
        for node in nodes:
            wait_for(lambda: "totals" in views(node), 30, f"totals declared on {node}")

        rows = []

        def produce(first, count):
            batch = [(i, REGIONS[(i * 7) % len(REGIONS)], float(i % 89) + 0.5) for i in range(first, first + count)]
            kafka_broker.produce(topic, [f'{{"id":{i},"region":"{r}","price":{p}}}' for i, r, p in batch],
                                 keys=[str(i).encode() for i, _, _ in batch])
            rows.extend(batch)

        produce(0, 12000)
        ordered = BY_REGION + " ORDER BY region"
        want = reference(rows, ordered)
        for node in nodes:
            wait_for(lambda: close_to(view_rows(node, VIEW_ROWS), want), 60, f"the global view on {node}")
        # Each instance holds a part of the rows only.
        local = [query(n, "SELECT count(*) AS n FROM orders")[0]["n"] for n in nodes]
        assert sum(local) == len(rows) and all(0 < c < len(rows) for c in local), local
        # The view's columns keep the query's types: count is an integer.
        assert all(isinstance(r["n"], int) for r in query("node-1", "SELECT n FROM by_region"))

        # Over pgwire, as any PostgreSQL client reads it.
        host, port = procs["node-2"][1].rsplit(":", 1)
        with psycopg.connect(host=host, port=int(port), user="reader", password=TOKEN,
                             dbname="rill", autocommit=True) as conn:
            got = conn.execute("SELECT region, n, revenue, mean, lo, hi FROM by_region "
                               "ORDER BY region").fetchall()
        assert close_to([tuple(r) for r in got], want), (got, want)

        want_top = reference(rows, top)
        for node in nodes:
            wait_for(lambda: close_to(view_rows(node, "SELECT hi, n, ids FROM totals"), want_top),
                     60, f"the SQL-declared global view on {node}")

        # Later input flows into the views.
        produce(12000, 3000)
        want = reference(rows, ordered)
        want_top = reference(rows, top)
        for node in nodes:
            wait_for(lambda: close_to(view_rows(node, VIEW_ROWS), want), 60,
                     f"the global view on {node} after more input")
            wait_for(lambda: close_to(view_rows(node, "SELECT hi, n, ids FROM totals"), want_top),
                     60, f"totals on {node} after more input")

        # A separate Rill, no instance of the application, serves the same answer
        # from the partials topic (the query's table declared with its columns).
        import rills
        reader = rills.RillEngine(metrics_path=None, trigger_interval_ms=50)
        try:
            reader.execute_ddl("CREATE TABLE orders (id BIGINT, region TEXT, price DOUBLE, "
                               "_partition INTEGER) WITH (mode = 'append', max_rows = 10)")
            reader.execute_ddl(f"CREATE MATERIALIZED VIEW by_region WITH (scope = 'global', "
                               f"app_id = '{app}', bootstrap_servers = '{servers}', "
                               f"interval_seconds = 0.2) AS {BY_REGION}")
            reader.start()

            def reader_rows():
                t = reader.query_sql(VIEW_ROWS)
                return list(zip(*[t.column(c).to_pylist() for c in t.column_names]))
            wait_for(lambda: close_to(reader_rows(), want), 60, "a separate Rill's global view")
            with pytest.raises(rills.DDLError, match="go together"):
                reader.execute_ddl(f"CREATE MATERIALIZED VIEW v2 WITH (scope = 'global', "
                                   f"app_id = '{app}') AS {BY_REGION}")
            reader.execute_ddl("DROP MATERIALIZED VIEW by_region")
            assert reader.query_sql("SELECT count(*) AS n FROM information_schema.tables WHERE "
                                    "table_name LIKE 'by_region%'").column("n")[0].as_py() == 0
        finally:
            reader.close()

        # SHOW VIEWS lists it with its scope; the partials topic exists.
        code, body = ddl("node-1", "SHOW VIEWS")
        listed = {r["name"]: r["options"] for r in body["rows"]}
        assert "scope = 'global'" in listed["by_region"] and "scope = 'global'" in listed["totals"]

        # Refused, naming why.
        code, body = ddl("node-1", "CREATE MATERIALIZED VIEW med WITH (scope = 'global') AS "
                                   "SELECT region, median(price) AS m FROM orders GROUP BY region")
        assert code != 200 and "median" in str(body), body
        code, body = ddl("node-1", "CREATE TABLE plain (id BIGINT, region TEXT, PRIMARY KEY (id))")
        assert code == 200, body
        code, body = ddl("node-1", "CREATE MATERIALIZED VIEW p WITH (scope = 'global') AS "
                                   "SELECT region, count(*) AS n FROM plain GROUP BY region")
        assert code != 200 and "_partition" in str(body), body

        # DROP removes the view and its parts, on every instance.
        code, body = ddl("node-1", "DROP MATERIALIZED VIEW totals")
        assert code == 200, body
        for node in nodes:
            wait_for(lambda: "totals" not in views(node), 30, f"totals dropped on {node}")
            tables = {r["name"] for r in query(node, "SELECT table_name AS name FROM information_schema.tables")}
            assert not {"totals", "totals__partial", "totals__partials"} & tables, (node, tables)
    finally:
        stop_all(procs)


def test_global_scope_outside_an_application_is_refused():
    import rills

    engine = rills.RillEngine()
    try:
        engine.execute_ddl("CREATE TABLE t (id BIGINT, g TEXT, _partition INTEGER, PRIMARY KEY (id))")
        with pytest.raises(rills.DDLError) as refused:
            engine.add_application_view(rills.ApplicationView("v", "SELECT g, count(*) AS n FROM t GROUP BY g"))
        assert "instance of an application" in str(refused.value)
        assert refused.value.sqlstate == "22023"
        with pytest.raises(rills.DDLError) as bad:
            engine.execute_ddl("CREATE MATERIALIZED VIEW v WITH (scope = 'everywhere') AS SELECT 1")
        assert "scope" in str(bad.value)
    finally:
        engine.close()


def events_instance(make_engine, app, servers, topic, node, **kwargs):
    """A started Python engine of application `app`: the append table `events`
    (id, g, v and the metadata columns) fed by `topic`."""
    import rills

    engine = make_engine(metrics_path=None, trigger_interval_ms=20, app_id=app, instance_id=node,
                         bootstrap_servers=servers, session_timeout_ms=6000, **kwargs)
    engine.register_table("events", pa.schema([
        ("id", pa.int64()), ("g", pa.string()), ("v", pa.float64()), ("_topic", pa.string()),
        ("_partition", pa.int32()), ("_offset", pa.int64()), ("_key", pa.binary()),
        ("_timestamp", pa.timestamp("ms"))]), mode="append",
        retention_policy=rills.RetentionPolicy(max_rows=10**7))
    engine.add_connector(rills.KafkaConnector("events", topic, {"bootstrap.servers": servers},
                                              name="events_in", metadata_columns=True))
    engine.start()
    return engine


def test_an_instance_that_starts_later_declares_the_applications_views(kafka_broker, make_engine):
    """A global view declared over SQL on node-1 only: node-2, started later
    and declaring nothing, takes it from the application's topic of views and
    serves the same exact answer; a DROP on node-2 drops it on node-1."""
    topic = f"events-{uuid.uuid4().hex[:8]}"
    app = f"late-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, PARTITIONS)
    servers = kafka_broker.bootstrap_servers
    sql = "SELECT g, count(*) AS n, sum(v) AS total FROM events GROUP BY g"
    a = events_instance(make_engine, app, servers, topic, "node-1")
    a.execute_ddl(f"CREATE MATERIALIZED VIEW by_g WITH (scope = 'global', interval_seconds = 0.2) AS {sql}")
    batch = [(i, f"g{i % 4}", float(i % 7)) for i in range(3000)]
    kafka_broker.produce(topic, [f'{{"id":{i},"g":"{g}","v":{v}}}' for i, g, v in batch],
                         keys=[str(i).encode() for i, _, _ in batch])
    b = events_instance(make_engine, app, servers, topic, "node-2")
    con = duckdb.connect()
    con.register("events", pa.table({"id": [r[0] for r in batch], "g": [r[1] for r in batch],
                                     "v": [r[2] for r in batch]}))
    want = con.execute(sql + " ORDER BY g").fetchall()

    def answer(engine):
        try:
            got = engine.query_sql("SELECT g, n, total FROM by_g ORDER BY g")
        except Exception:  # not declared yet
            return None
        return list(zip(*[got.column(c).to_pylist() for c in got.column_names]))

    wait_for(lambda: len(b.cluster_status()["partitions"]) > 0, 60, "node-2 joining")
    wait_for(lambda: close_to(answer(b) or [], want) and close_to(answer(a) or [], want), 60,
             "the view on both instances")
    b.execute_ddl("DROP MATERIALIZED VIEW by_g")
    wait_for(lambda: answer(a) is None, 30, "the view dropped on node-1")


def test_application_view_stays_exact_when_partitions_move_and_an_instance_restarts(kafka_broker,
                                                                                     make_engine):
    """rills.ApplicationView on two engines of one application (an append table):
    node-2 leaves (its partitions move to node-1) and comes back as a new life;
    the view equals DuckDB over every record after each step."""
    import rills

    topic = f"events-{uuid.uuid4().hex[:8]}"
    app = f"av-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, PARTITIONS)
    servers = kafka_broker.bootstrap_servers
    sql = "SELECT g, count(*) AS n, sum(v) AS total, max(v) AS hi FROM events GROUP BY g"

    def instance(node, **kwargs):
        engine = events_instance(make_engine, app, servers, topic, node, **kwargs)
        view = rills.ApplicationView("by_g", sql, interval_seconds=0.2)
        engine.add_application_view(view)
        return engine, view

    rows = []

    def produce(first, count):
        batch = [(i, f"g{i % 5}", float(i % 13)) for i in range(first, first + count)]
        kafka_broker.produce(topic, [f'{{"id":{i},"g":"{g}","v":{v}}}' for i, g, v in batch],
                             keys=[str(i).encode() for i, _, _ in batch])
        rows.extend(batch)

    def want():
        con = duckdb.connect()
        con.register("events", pa.table({"id": [r[0] for r in rows], "g": [r[1] for r in rows],
                                         "v": [r[2] for r in rows]}))
        return con.execute(sql + " ORDER BY g").fetchall()

    def exact(view):
        got = view.to_arrow().sort_by("g")
        return close_to(list(zip(*[got.column(c).to_pylist() for c in got.column_names])), want())

    a, view_a = instance("node-1")
    b, view_b = instance("node-2", leave_on_stop=True)
    wait_for(lambda: len(a.cluster_status()["partitions"]) == PARTITIONS // 2
             and len(b.cluster_status()["partitions"]) == PARTITIONS // 2, 60, "the first assignment")
    produce(0, 4000)
    wait_for(lambda: exact(view_a) and exact(view_b), 60, "both views after the first rows")

    # node-2 leaves: node-1 owns every partition and reads on.
    b.stop()
    b.close()
    wait_for(lambda: len(a.cluster_status()["partitions"]) == PARTITIONS, 30, "node-1 owning all")
    produce(4000, 3000)
    wait_for(lambda: exact(view_a), 60, "node-1's view after the move")

    # node-2 comes back (a new life, an empty table): the partitions split again.
    b, view_b = instance("node-2", leave_on_stop=True)
    wait_for(lambda: len(b.cluster_status()["partitions"]) == PARTITIONS // 2, 60, "node-2 back")
    produce(7000, 3000)
    wait_for(lambda: exact(view_a) and exact(view_b), 60, "both views after the restart")
    assert b.query_sql("SELECT count(*) AS n FROM events").column("n")[0].as_py() < len(rows)
    b.remove_application_view(view_b)
    assert "by_g" not in {r for r in b.query_sql(
        "SELECT table_name FROM information_schema.tables").column("table_name").to_pylist()}
