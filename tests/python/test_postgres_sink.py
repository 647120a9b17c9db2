"""rills.sinks.PostgresSink against a real PostgreSQL 15 (the session's
`postgres_server` fixture, tests/python/pg_server.py), read back with psycopg:

- random upserts and deletes into a keyed table -> the PostgreSQL table equals
  Rill's table (and the writer's own C++ tests: tests/cpp/sink/postgres_sink_test.cc);
- SIGKILL trials of a file -> table -> PostgresSink pipeline (bench/faults/postgres_sink.py,
  10 here, >= 500 with bench/fault_trials): 0 lost, 0 duplicated;
- PostgreSQL stopped for 30 s mid-stream -> the sink retries, alerts once, catches
  up, nothing lost.
"""

import itertools
import pathlib
import random
import sys
import time

import pyarrow as pa
import pytest

from conftest import require, wait_until

ROOT = pathlib.Path(__file__).resolve().parents[2]

_names = itertools.count()


def unique(stem):
    return f"{stem}_{next(_names)}_{int(time.time() * 1000) % 100000}"


def postgres_sink_class():
    try:
        from rills.sinks import PostgresSink
    except ImportError as error:
        require(f"rills.sinks.PostgresSink is not built ({error})")
    return PostgresSink


def pg_rows(server, sql):
    with server.connect() as conn:
        return conn.execute(sql).fetchall()


def keyed_engine(make_engine, table_name="accounts", **kwargs):
    engine = make_engine(trigger_interval_ms=20, **kwargs)
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])
    table = engine.register_table(table_name, schema=schema, mode="snapshot", primary_key="id")
    return engine, table


def random_batch(rng, names, keys=200, most=60):
    ids = [rng.randrange(keys) for _ in range(rng.randint(1, most))]
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([rng.choice(names) for _ in ids]),
        "amount": pa.array([None if rng.random() < 0.1 else round(rng.uniform(-1e3, 1e3), 3)
                            for _ in ids], pa.float64())})


def assert_pg_equals_table(server, target, table):
    current = table.to_arrow().select(["id", "name", "amount"])
    rill = sorted(zip(*(current.column(c).to_pylist() for c in ("id", "name", "amount"))))
    pg = sorted(tuple(r) for r in pg_rows(server, f'SELECT id, name, amount FROM "{target}"'))
    assert len(pg) == len(rill)
    assert pg == rill, [r for r in pg if r not in set(rill)][:5]


def test_the_session_server_is_postgres_15_with_logical_wal(postgres_server):
    """The fixture's server: what issue 25's CDC connector needs, and a stop/start keeps
    the data (the outage test relies on it)."""
    with postgres_server.connect() as conn:
        assert conn.execute("SHOW wal_level").fetchone()[0] == "logical"
        assert conn.execute("SHOW server_version_num").fetchone()[0] >= "150000"
        conn.execute("CREATE TABLE IF NOT EXISTS fixture_probe (v int)")
        conn.execute("INSERT INTO fixture_probe VALUES (1)")
    postgres_server.stop()
    postgres_server.start()
    assert pg_rows(postgres_server, "SELECT count(*) FROM fixture_probe")[0][0] >= 1


def test_table_equals_rills_after_random_upserts_and_deletes(postgres_server, make_engine):
    PostgresSink = postgres_sink_class()
    rng = random.Random(24)
    target = unique("accounts")
    engine, table = keyed_engine(make_engine, metrics_path=None)
    sink = PostgresSink("accounts_pg", "accounts", postgres_server.dsn(), target,
                        mode="upsert", create_table=True, interval_seconds=0.05,
                        max_batch_rows=500)
    engine.add_sink(sink)
    names = ["ana", "bo", 'q"uote', "Zoë 🚀", "back\\slash", "tab\tnew\nline", ""]
    for step in range(40):
        if step % 7 == 6:  # deletes: the table's state without a random third of its keys
            state = table.to_arrow().select(["id", "name", "amount"])
            keep = [rng.random() > 0.33 for _ in range(state.num_rows)]
            table.replace_state(state.filter(pa.array(keep)))
        else:
            table.upsert(random_batch(rng, names))
        if step % 10 == 9:
            sink.flush(60)
            assert_pg_equals_table(postgres_server, target, table)
    sink.flush(60)
    stats = sink.stats()
    assert stats["errors"] == 0, stats
    assert stats["rows_written"] > 0 and stats["bytes"] > 0, stats
    assert_pg_equals_table(postgres_server, target, table)
    (version,) = pg_rows(postgres_server,
                         "SELECT version FROM rill_sink_progress WHERE sink = 'accounts_pg'")[0]
    assert version == stats["committed_version"]


def test_sigkilled_pipeline_writes_every_row_exactly_once(postgres_server, tmp_path):
    """File -> append table -> PostgresSink, SIGKILLed at random moments in 10 trials."""
    postgres_sink_class()
    sys.path.insert(0, str(ROOT / "bench" / "faults"))
    import postgres_sink as harness

    result = harness.run_trials(postgres_server, tmp_path, trials=10, seed=24)
    assert result["lost"] == 0 and result["duplicates"] == 0, result
    assert result["unexpected"] == 0, result


def test_sink_retries_while_postgres_is_down_and_catches_up(postgres_server, make_engine,
                                                            tmp_path):
    """PostgreSQL stopped for 30 s while rows keep coming: the sink counts errors and
    retries, alerts once, and after the restart writes everything; nothing is lost."""
    PostgresSink = postgres_sink_class()
    rng = random.Random(7)
    target = unique("outage")
    engine, table = keyed_engine(make_engine, table_name="outage",
                                 metrics_path=str(tmp_path / "metrics.db"))
    sink = PostgresSink("outage_pg", "outage", postgres_server.dsn(), target, mode="upsert",
                        create_table=True, interval_seconds=0.05, retry_initial_seconds=0.1,
                        retry_max_seconds=1.0, connect_timeout_seconds=2)
    engine.add_sink(sink)
    engine.start()
    names = ["a", "b", "c"]
    table.upsert(random_batch(rng, names))
    sink.flush(30)
    postgres_server.stop()
    try:
        down_until = time.monotonic() + 30
        while time.monotonic() < down_until:
            table.upsert(random_batch(rng, names))
            time.sleep(0.25)
        stats = sink.stats()
        assert stats["errors"] > 0 and stats["retries"] > 0, stats
        assert stats["lag_versions"] > 0, stats
        assert "127.0.0.1" in stats["last_error"], stats
    finally:
        postgres_server.start()
    wait_until(lambda: sink.stats()["lag_versions"] == 0, timeout=60, what="the sink to catch up")
    sink.flush(30)
    assert_pg_equals_table(postgres_server, target, table)
    alerts = engine.query_metrics(
        "SELECT severity, source, message FROM rill_alerts WHERE "
        "(source LIKE '%outage_pg%' OR message LIKE '%outage_pg%') "
        "AND severity IN ('warning', 'error', 'critical')").to_pylist()
    assert len(alerts) == 1, alerts  # one error alert when it started failing
    recovered = engine.query_metrics(
        "SELECT message FROM rill_alerts WHERE message LIKE '%outage_pg%' "
        "AND severity = 'info'").to_pylist()
    assert len(recovered) == 1, recovered  # and one when it wrote again
