"""PostgresCDCConnector against a real PostgreSQL 15 (issue 25).

The session's server (conftest `postgres_server`: initdb, wal_level=logical);
each test has a database and a replication slot of its own. The oracle is the
server itself: after each burst of randomized transactions (psycopg), Rill's
table must equal ``SELECT * FROM source`` (both as pyarrow tables, sorted by
key). Kill trials: tests/python/pg_cdc_kill.py (bench/faults/postgres_cdc.py
runs 500 and more).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import random
import time
import uuid

import pyarrow as pa
import pytest

from rills import PostgresCDCConnector, RillEngine

import pg_cdc_kill


@pytest.fixture
def pg(postgres_server, request):
    """(server, dsn, connection, slot name) of a database of this test's own."""
    name = "cdc_" + request.node.name.lower().replace("[", "_").replace("]", "")[:40]
    dsn = postgres_server.create_database(name)
    conn = postgres_server.connect(name)
    slot = ("s_" + name)[:60]
    yield postgres_server, dsn, conn, slot
    conn.close()
    with postgres_server.connect() as admin:
        admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                      "WHERE slot_name = %s AND NOT active", (slot,))


def wait_for(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last is True:
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {last}")


def source_rows(conn, table="src", key="id"):
    cur = conn.execute(f"SELECT * FROM {table} ORDER BY {key}")
    cols = [d.name for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def rill_rows(engine, table="t", key="id"):
    data = engine.query_sql(f"SELECT * FROM {table} ORDER BY {key}").to_pylist()
    return [{k: v for k, v in r.items() if not k.startswith("z_")} for r in data]


def make_engine(tmp_path=None, **kwargs):
    return RillEngine(trigger_interval_ms=20, metrics_path=None, **kwargs)


# --- streaming: randomized transactions, compared with SELECT * FROM source ----------------


def random_transaction(conn, rng, next_id):
    """A transaction of 1-6 random statements; returns the next free id."""
    with conn.transaction():
        for _ in range(rng.randint(1, 6)):
            r = rng.random()
            if r < 0.45:
                conn.execute("INSERT INTO src VALUES (%s, %s, %s)",
                             (next_id, f"v{rng.randint(0, 999)}", rng.randint(-5, 5)))
                next_id += 1
            elif r < 0.75:
                conn.execute("UPDATE src SET name = %s, n = n + 1 WHERE id = ("
                             "SELECT id FROM src ORDER BY random() LIMIT 1)",
                             (f"u{rng.randint(0, 999)}",))
            elif r < 0.85:  # the key itself changes: a delete of the old key, then an upsert
                conn.execute("UPDATE src SET id = %s WHERE id = ("
                             "SELECT id FROM src ORDER BY random() LIMIT 1)", (next_id,))
                next_id += 1
            elif r < 0.985:
                conn.execute("DELETE FROM src WHERE id IN ("
                             "SELECT id FROM src ORDER BY random() LIMIT %s)", (rng.randint(1, 3),))
            else:
                conn.execute("TRUNCATE src")
    return next_id


def test_snapshot_then_random_transactions_mirror_the_source(pg):
    server, dsn, conn, slot = pg
    conn.execute("CREATE TABLE src (id bigint PRIMARY KEY, name text, n int)")
    conn.execute("INSERT INTO src SELECT g, 'seed' || g, 0 FROM generate_series(1, 500) g")
    rng = random.Random(2512)
    engine = make_engine()
    engine.register_table("t", schema=pa.schema([("id", pa.int64()), ("name", pa.string()),
                                                 ("n", pa.int32())]), primary_key="id")
    cdc = PostgresCDCConnector("t", dsn, "src", slot)
    engine.add_connector(cdc)
    engine.start()
    try:
        wait_for(lambda: rill_rows(engine) == source_rows(conn), what="the snapshot")
        assert cdc.stats()["snapshot_rows"] == 500 and cdc.stats()["snapshot_done"] == 1
        next_id = 1000
        for burst in range(8):
            for _ in range(rng.randint(5, 25)):
                next_id = random_transaction(conn, rng, next_id)
            wait_for(lambda: rill_rows(engine) == source_rows(conn) or
                     (len(rill_rows(engine)), len(source_rows(conn))), what=f"burst {burst}")
        # Applied positions are confirmed to the slot (no checkpointer: CommitApplied).
        wait_for(lambda: conn.execute(
            "SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots "
            "WHERE slot_name = %s", (json.loads(cdc.position())["lsn"], slot)).fetchone()[0]
            is True, what="the slot's confirmed position")
        assert cdc.stats()["lag_bytes"] >= 0
    finally:
        engine.stop()
        engine.close()


def test_a_transaction_is_applied_in_one_tick(pg):
    """Subscribers see each published version: never a half transaction."""
    server, dsn, conn, slot = pg
    conn.execute("CREATE TABLE src (id bigint PRIMARY KEY, name text, n int)")
    engine = make_engine()
    engine.register_table("t", schema=pa.schema([("id", pa.int64()), ("name", pa.string()),
                                                 ("n", pa.int32())]), primary_key="id")
    counts = []
    engine.subscribe("t", lambda _name, table: counts.append(table.num_rows))
    engine.add_connector(PostgresCDCConnector("t", dsn, "src", slot))
    engine.start()
    try:
        time.sleep(1.0)  # the (empty) snapshot is done, the stream runs
        for i in range(20):
            with conn.transaction():
                for j in range(50):
                    conn.execute("INSERT INTO src VALUES (%s, 'x', 0)", (i * 50 + j,))
        wait_for(lambda: engine.get_table("t").num_rows == 1000, what="1000 rows")
        assert counts and all(c % 50 == 0 for c in counts), counts
    finally:
        engine.stop()
        engine.close()


def test_replica_identity_full_and_a_table_without_primary_key(pg):
    server, dsn, conn, slot = pg
    conn.execute("CREATE TABLE src (id int NOT NULL, name text, big text)")
    conn.execute("ALTER TABLE src REPLICA IDENTITY FULL")
    # A value large enough to be TOASTed out of line: unchanged in later updates.
    big = "".join(random.Random(1).choice("abcdefgh") for _ in range(20000))
    conn.execute("INSERT INTO src VALUES (1, 'a', %s), (2, 'b', 'small')", (big,))
    engine = make_engine()
    engine.register_table("t", schema=pa.schema([("id", pa.int32()), ("name", pa.string()),
                                                 ("big", pa.string())]), primary_key="id")
    engine.add_connector(PostgresCDCConnector("t", dsn, "src", slot))
    engine.start()
    try:
        wait_for(lambda: rill_rows(engine) == source_rows(conn), what="the snapshot")
        conn.execute("UPDATE src SET name = 'a2' WHERE id = 1")  # big: unchanged TOAST
        conn.execute("DELETE FROM src WHERE id = 2")
        conn.execute("INSERT INTO src VALUES (3, 'c', 'x')")
        wait_for(lambda: rill_rows(engine) == source_rows(conn), what="the changes")
        assert rill_rows(engine)[0]["big"] == big
    finally:
        engine.stop()
        engine.close()


def test_new_column_is_picked_up_and_a_type_change_is_rejected_with_an_alert(pg):
    server, dsn, conn, slot = pg
    conn.execute("CREATE TABLE src (id int PRIMARY KEY, a text)")
    engine = make_engine()
    engine.register_table("t", schema=pa.schema([("id", pa.int32()), ("a", pa.string()),
                                                 ("b", pa.int64())]), primary_key="id")
    cdc = PostgresCDCConnector("t", dsn, "src", slot)
    engine.add_connector(cdc)
    engine.start()
    try:
        conn.execute("INSERT INTO src VALUES (1, 'x')")
        wait_for(lambda: engine.get_table("t").num_rows == 1, what="row 1")
        conn.execute("ALTER TABLE src ADD COLUMN b bigint")
        conn.execute("INSERT INTO src VALUES (2, 'y', 42)")
        wait_for(lambda: rill_rows(engine) == source_rows(conn), what="the new column")
        conn.execute("ALTER TABLE src ALTER COLUMN b TYPE text")
        conn.execute("INSERT INTO src VALUES (3, 'z', 'not a number')")
        wait_for(lambda: cdc.stats()["rejected_records"] >= 1, what="the reject")
        rejects = engine.query_sql("SELECT * FROM rill_rejects").to_pylist()
        assert any("incompatible schema change" in str(r) for r in rejects), rejects
        assert any("incompatible schema change" in str(e) for e in engine.recent_events())
        assert engine.get_table("t").num_rows == 2
    finally:
        engine.stop()
        engine.close()


# --- types ---------------------------------------------------------------------------------

TYPES_DDL = """
CREATE TABLE types (
  id int PRIMARY KEY, i2 smallint, i8 bigint, num numeric(12, 3), numu numeric, txt text,
  vc varchar(20), flag boolean, f4 real, f8 double precision, d date, ts timestamp,
  tstz timestamptz, u uuid, j json, jb jsonb, by bytea, ia int[], ta text[], fa float8[])
"""


def type_rows(rng):
    rows = []
    for i in range(40):
        null = i % 7 == 3
        rows.append((
            i,
            None if null else rng.randint(-32768, 32767),
            None if null else rng.randint(-2**63, 2**63 - 1),
            None if null else decimal.Decimal(rng.randint(-10**11, 10**11)) / 1000,
            None if null else decimal.Decimal(rng.randint(-10**15, 10**15)) / 10**6,
            None if null else rng.choice(["", "plain", "tab\tnew\nline", "quote\"back\\slash", "ünï😀"]),
            None if null else f"vc{i}",
            None if null else bool(i % 2),
            None if null else rng.choice([1.5, -0.25, float("inf"), 3.4e38]),
            None if null else rng.choice([math.pi, -1e-300, float("-inf"), 1e308]),
            None if null else dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-40000, 40000)),
            None if null else dt.datetime(2000, 1, 1) + dt.timedelta(
                microseconds=rng.randint(-10**15, 10**15)),
            None if null else dt.datetime(2024, 5, 6, 7, 8, 9, rng.randint(0, 999999),
                                          tzinfo=dt.timezone(dt.timedelta(hours=rng.randint(-11, 12)))),
            None if null else uuid.UUID(int=rng.getrandbits(128)),
            None if null else json.dumps({"a": i, "b": [1, "x"]}),
            None if null else json.dumps({"k": "v", "n": None}),
            None if null else bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 20))),
            None if null else [rng.randint(-100, 100) if j != 1 else None for j in range(3)],
            None if null else ["a,b", "c\"d", "", "NULL", None, "e\\f", "{x}"],
            None if null else [0.5, -2.0],
        ))
    return rows


def normalize(value):
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc)
    return value


def test_every_mapped_type_round_trips(pg):
    server, dsn, conn, slot = pg
    conn.execute(TYPES_DDL)
    rng = random.Random(77)
    rows = type_rows(rng)
    placeholders = ", ".join(["%s"] * len(rows[0]))
    half = len(rows) // 2
    conn.cursor().executemany(f"INSERT INTO types VALUES ({placeholders})", rows[:half])
    engine = make_engine()
    cdc = PostgresCDCConnector("t", dsn, "types", slot)
    engine.register_table("t", primary_key="id")
    engine.add_connector(cdc)
    engine.start()
    try:
        # Half by the snapshot (COPY), half by the stream (pgoutput).
        wait_for(lambda: cdc.stats()["snapshot_done"] == 1, what="the snapshot")
        conn.cursor().executemany(f"INSERT INTO types VALUES ({placeholders})", rows[half:])
        wait_for(lambda: (engine.get_table("t").num_rows if engine.get_table("t") else 0)
                 == len(rows), what="every row")
        schema = engine.get_table("t").schema
        expected_types = {"i2": pa.int16(), "i8": pa.int64(), "num": pa.decimal128(12, 3),
                          "numu": pa.decimal128(38, 9), "txt": pa.string(), "flag": pa.bool_(),
                          "f4": pa.float32(), "f8": pa.float64(), "d": pa.date32(),
                          "ts": pa.timestamp("us"), "tstz": pa.timestamp("us", "UTC"),
                          "u": pa.string(), "j": pa.string(), "jb": pa.string(),
                          "by": pa.binary(), "ia": pa.list_(pa.int32()),
                          "ta": pa.list_(pa.string()), "fa": pa.list_(pa.float64())}
        for name, t in expected_types.items():
            assert schema.field(name).type == t, (name, schema.field(name).type)
        got = rill_rows(engine, "t")
        want = source_rows(conn, "types")
        assert len(got) == len(want)
        for g, w in zip(got, want):
            for col, wv in w.items():
                gv, wv = g[col], normalize(wv)
                if col in ("j", "jb") and gv is not None:
                    assert json.loads(gv) == wv, (col, g["id"], gv, wv)
                elif col == "f4" and gv is not None:
                    assert math.isclose(gv, wv, rel_tol=1e-6) or gv == wv, (col, gv, wv)
                else:
                    assert gv == wv, (col, g["id"], gv, wv)
    finally:
        engine.stop()
        engine.close()


def test_numeric_as_float64(pg):
    server, dsn, conn, slot = pg
    conn.execute("CREATE TABLE src (id int PRIMARY KEY, x numeric(10, 2), y numeric)")
    conn.execute("INSERT INTO src VALUES (1, 12.25, 1e20), (2, NULL, 'NaN')")
    engine = make_engine()
    engine.register_table("t", primary_key="id")
    engine.add_connector(PostgresCDCConnector("t", dsn, "src", slot, numeric_as="float64"))
    engine.start()
    try:
        wait_for(lambda: engine.get_table("t") is not None and engine.get_table("t").num_rows == 2,
                 what="rows")
        got = rill_rows(engine)
        assert got[0]["x"] == 12.25 and got[0]["y"] == 1e20
        assert got[1]["x"] is None and math.isnan(got[1]["y"])
    finally:
        engine.stop()
        engine.close()


# --- failures: server restart, dropped slot ------------------------------------------------


def test_server_restart_mid_stream_loses_nothing(postgres_server, tmp_path):
    """A server of its own (restarted while transactions stream)."""
    import pg_server

    server = pg_server.PostgresServer()
    server.start()
    try:
        conn = server.connect()
        conn.execute("CREATE TABLE src (id bigint PRIMARY KEY, name text, n int)")
        engine = make_engine()
        engine.register_table("t", schema=pa.schema([("id", pa.int64()), ("name", pa.string()),
                                                     ("n", pa.int32())]), primary_key="id")
        cdc = PostgresCDCConnector("t", server.dsn(), "src", "restart_slot")
        engine.add_connector(cdc)
        engine.start()
        rng = random.Random(5)
        next_id = 1
        for _ in range(30):
            next_id = random_transaction(conn, rng, next_id)
        conn.close()
        server.stop(mode="fast")
        server.start()
        conn = server.connect()
        for _ in range(30):
            next_id = random_transaction(conn, rng, next_id)
        wait_for(lambda: rill_rows(engine) == source_rows(conn), timeout=60, what="catch-up")
        wait_for(lambda: cdc.stats()["reconnects"] >= 1, what="a reconnect")
        engine.stop()
        engine.close()
        conn.close()
    finally:
        server.close()


def test_dropped_slot_is_an_alert_not_a_crash(pg):
    server, dsn, conn, slot = pg
    conn.execute("CREATE TABLE src (id int PRIMARY KEY)")
    engine = make_engine()
    engine.register_table("t", schema=pa.schema([("id", pa.int32())]), primary_key="id")
    cdc = PostgresCDCConnector("t", dsn, "src", slot)
    engine.add_connector(cdc)
    engine.start()
    try:
        conn.execute("INSERT INTO src VALUES (1)")
        wait_for(lambda: engine.get_table("t").num_rows == 1, what="row 1")
        import psycopg

        for _ in range(100):  # the connector reconnects at once: terminate and drop again
            conn.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                         "WHERE slot_name = %s AND active", (slot,))
            try:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                break
            except psycopg.errors.ObjectInUse:
                time.sleep(0.01)
        wait_for(lambda: cdc.stats()["errors"] >= 1, what="the error")
        wait_for(lambda: any(f"replication slot '{slot}'" in str(e) for e in engine.recent_events()),
                 what="the alert")
        assert engine.get_table("t").num_rows == 1
        time.sleep(0.5)
        # Still running: retried, one alert for the outage.
        assert cdc.stats()["errors"] >= 1
        slot_events = [e for e in engine.recent_events() if f"slot '{slot}'" in str(e)]
        assert len(slot_events) == 1, engine.recent_events()
    finally:
        engine.stop()
        engine.close()


# --- SIGKILL trials ------------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_sigkill_trials_lose_nothing_and_apply_nothing_twice(postgres_server, tmp_path):
    result = pg_cdc_kill.run_trials(postgres_server, tmp_path, trials=20, seed=20261225)
    print(result)
    assert result["trials"] == 20
    assert result["lost"] == 0 and result["duplicates"] == 0, result
    assert result["confirm_violations"] == 0, result
    assert result["confirmed_positions_seen"] > 10, result  # the slots did advance
    assert result["mirror_equal"], result


# --- progress, lag, telemetry ---------------------------------------------------------------


def http_get(engine, path, token):
    import http.client

    host, _, port = engine.quack_address[len("quack:"):].rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    assert resp.status == 200, body
    return body.decode()


def test_snapshot_progress_lag_and_alert_reach_stats_telemetry_and_metrics(pg, tmp_path):
    server, dsn, conn, slot = pg
    rows = 200_000
    conn.execute("CREATE TABLE src (id bigint PRIMARY KEY, name text)")
    conn.execute("INSERT INTO src SELECT g, 'n' || g FROM generate_series(1, %s) g", (rows,))
    conn.execute("ANALYZE src")
    token = "cdc-token"
    # A slow tick and a small buffer: the snapshot is applied batch by batch, slowly.
    engine = RillEngine(trigger_interval_ms=300, quack_address="quack:127.0.0.1:0",
                        quack_token=token, metrics_path=str(tmp_path / "m.db"))
    engine.register_table("t", schema=pa.schema([("id", pa.int64()), ("name", pa.string())]),
                          primary_key="id")
    cdc = PostgresCDCConnector("t", dsn, "src", slot, max_buffer_records=1000, lag_alert_bytes=1)
    engine.add_connector(cdc)
    engine.start()
    try:
        seen = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            s = cdc.stats()
            if s["snapshot_done"] == 0 and 0 < s["snapshot_rows"] < rows:
                seen.append(s)
            if s["snapshot_done"] == 1:
                break
            time.sleep(0.02)
        assert seen, "no progress seen while the snapshot ran"
        mid = seen[-1]
        assert mid["snapshot_rows_total"] == rows  # pg_class.reltuples after ANALYZE
        assert mid["snapshot_rows_per_s"] > 0 and mid["snapshot_eta_seconds"] >= 0
        telemetry = json.loads(http_get(engine, "/api/v1/telemetry/connectors", token))
        c = {x["connector"]: x for x in telemetry["connectors"]}[cdc.name]
        assert c["snapshot_rows_total"] == rows and "lag_bytes" in c
        wait_for(lambda: engine.get_table("t").num_rows == rows, what="the snapshot applied")
        # Changes to a table outside the publication: WAL the slot must not hold for ever.
        # Written continuously, so the slot lags when the connector samples it
        # (a keepalive soon confirms what one transaction wrote).
        conn.execute("CREATE TABLE other (x int)")

        def lag_alerted():
            conn.execute("INSERT INTO other SELECT generate_series(1, 2000)")
            return any("lags" in str(e) for e in engine.recent_events())

        wait_for(lag_alerted, what="the lag alert (lag_alert_bytes=1)")
        metrics = http_get(engine, "/metrics", token)
        assert f'rill_connector_lag_bytes{{connector="{cdc.name}"}}' in metrics, metrics[-2000:]
        assert f'rill_connector_snapshot_rows{{connector="{cdc.name}"}} {rows}' in metrics
        # Keepalives between transactions let the slot's position advance anyway.
        lsn_now = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        wait_for(lambda: conn.execute(
            "SELECT confirmed_flush_lsn >= %s FROM pg_replication_slots WHERE slot_name = %s",
            (lsn_now, slot)).fetchone()[0] is True, what="the slot to pass the idle WAL")
    finally:
        engine.stop()
        engine.close()
