"""KafkaConnector against a real Apache Kafka broker (4.4, KRaft, 127.0.0.1).

The broker is the session fixture `kafka_broker` (conftest.py,
tests/python/kafka_broker.py); test data is produced with confluent-kafka,
whose delivery reports give each message's partition and offset, and the
tables are compared with what was produced through DuckDB (the oracle).
Without Java or the jars (scripts/fetch-kafka) these tests skip, or fail
under CI=true. Each test uses its own topic and consumer group.
"""

from __future__ import annotations

import json
import random
import time
import uuid

import duckdb
import pyarrow as pa
import pytest

from rills import KafkaConnector
from waiting import wait_rows

pytestmark = pytest.mark.timeout(180)

SCHEMA = pa.schema([("id", pa.int64()), ("user", pa.string()), ("amount", pa.float64()),
                    ("ok", pa.bool_())])
META = [("_topic", pa.string()), ("_partition", pa.int32()), ("_offset", pa.int64()),
        ("_key", pa.binary()), ("_timestamp", pa.timestamp("ms"))]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consumer_config(broker, group: str, **extra) -> dict:
    return {"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            "reconnect.backoff.max.ms": 1000, **extra}


def make_rows(rng: random.Random, first_id: int, n: int) -> list:
    users = ["ana", "bo", "çé", "Zoë 🚀", 'q"uote', "back\\slash", "日本"]
    out = []
    for i in range(first_id, first_id + n):
        out.append({"id": i, "user": rng.choice(users),
                    "amount": None if i % 17 == 0 else round(rng.uniform(-1e6, 1e6), 3),
                    "ok": i % 3 == 0})
    return out


def produce_rows(broker, topic: str, rows: list, rng: random.Random, max_per_message: int = 3):
    """Pack rows into messages of 1..max_per_message NDJSON lines, keyed by the
    first row's id modulo 11; return [(row, partition, offset, key)] as delivered."""
    messages, members = [], []
    i = 0
    while i < len(rows):
        k = rng.randint(1, max_per_message)
        chunk = rows[i:i + k]
        messages.append("\n".join(json.dumps(r, ensure_ascii=rng.random() < 0.5) for r in chunk))
        members.append(chunk)
        i += k
    keys = [f"k{chunk[0]['id'] % 11}".encode() for chunk in members]
    placed = broker.produce(topic, messages, keys=keys)
    return [(r, p, o, key) for chunk, (p, o), key in zip(members, placed, keys) for r in chunk]


def assert_same_rows(got: pa.Table, want: pa.Table, columns: list) -> None:
    """Multiset equality of `columns` of two tables, checked by DuckDB."""
    con = duckdb.connect()
    con.register("got", got.select(columns))
    con.register("want", want.select(columns))
    cols = ", ".join(f'"{c}"' for c in columns)
    missing = con.execute(f"SELECT {cols} FROM want EXCEPT ALL SELECT {cols} FROM got").fetchall()
    extra = con.execute(f"SELECT {cols} FROM got EXCEPT ALL SELECT {cols} FROM want").fetchall()
    assert not missing and not extra, f"missing {missing[:5]} (+{len(missing)}), extra {extra[:5]} (+{len(extra)})"


def test_multi_partition_topic_to_table_to_sql(kafka_broker, make_engine):
    rng = random.Random(12)
    topic = unique("orders")
    kafka_broker.create_topic(topic, 4)
    delivered = produce_rows(kafka_broker, topic, make_rows(rng, 0, 1500), rng)
    assert len({p for _, p, _, _ in delivered}) == 4  # every partition holds data

    engine = make_engine(trigger_interval_ms=20, metrics_path=None)
    engine.register_table("orders", schema=pa.schema(list(SCHEMA) + META))
    conn = KafkaConnector("orders", topic, consumer_config(kafka_broker, unique("g")),
                          start="earliest", metadata_columns=True)
    engine.add_connector(conn)
    engine.start()
    assert wait_rows(engine, "orders", len(delivered)) == len(delivered)

    want = pa.Table.from_pylist(
        [{**r, "_topic": topic, "_partition": p, "_offset": o, "_key": k} for r, p, o, k in delivered],
        schema=pa.schema(list(SCHEMA) + META[:4]))
    got = engine.get_table("orders").to_arrow()
    assert_same_rows(got, want, ["id", "user", "amount", "ok", "_topic", "_partition", "_offset", "_key"])
    assert got.column("_timestamp").null_count == 0  # the producer's create time

    # SQL over the live table against DuckDB over what was produced.
    sql = ("SELECT _partition, count(*) AS n, count(amount) AS a, sum(id) AS s, "
           "max(_offset) AS last FROM {} GROUP BY _partition ORDER BY _partition")
    mine = engine.query_sql(sql.format("orders")).to_pylist()
    oracle = duckdb.connect()
    oracle.register("produced", want)
    theirs = [dict(zip(["_partition", "n", "a", "s", "last"], r))
              for r in oracle.execute(sql.format("produced")).fetchall()]
    assert [{k: int(v) for k, v in r.items()} for r in mine] == theirs

    # Positions are the next offsets = the high watermarks; lag drains to 0.
    ends = kafka_broker.end_offsets(topic)
    assert conn.positions() == {(topic, p): o for p, o in ends.items()}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (len(conn.lags()) < 4 or any(conn.lags().values())):
        time.sleep(0.1)
    assert conn.lags() == {(topic, p): 0 for p in ends}
    stats = engine.get_metrics()["connectors"][conn.name]
    assert stats["parsed_records"] == len(delivered) and stats["rejected_records"] == 0


def test_bad_lines_go_to_rejects_with_partition_and_offset(kafka_broker, make_engine):
    rng = random.Random(5)
    topic = unique("rejects")
    kafka_broker.create_topic(topic, 3)
    bad_lines = [b'{"id": "not a number", "user": "x"}', b'{"id": 7, "user": ', b"[1, 2",
                 b'{"id": 1e999999}', b'{"id": 3, "ok": "yes"}', b"\xff\xfe invalid UTF-8"]
    values, expect_good, bad_at = [], [], []
    for i in range(60):
        good = {"id": i, "user": f"u{i}", "amount": i / 4, "ok": True}
        expect_good.append(good)
        if i % 10 == 3:  # a message of a good line and a bad one
            bad = bad_lines[(i // 10) % len(bad_lines)]
            values.append(json.dumps(good).encode() + b"\n" + bad)
            bad_at.append(len(values) - 1)
        else:
            values.append(json.dumps(good).encode())
    placed = kafka_broker.produce(topic, values, keys=[str(i % 7).encode() for i in range(len(values))])

    engine = make_engine(trigger_interval_ms=20, metrics_path=None)
    engine.register_table("clean", schema=SCHEMA)
    conn = KafkaConnector("clean", [topic], consumer_config(kafka_broker, unique("g")), start="earliest")
    engine.add_connector(conn)
    engine.start()
    wait_rows(engine, "clean", len(expect_good))
    deadline = time.monotonic() + 20
    rejects = []
    while time.monotonic() < deadline and len(rejects) < len(bad_at):
        rejects = engine.query_sql(
            f"SELECT source, position, reason, raw FROM rill_rejects WHERE source = '{conn.name}'"
        ).to_pylist()
        time.sleep(0.05)
    want_positions = {f"topic {topic}, partition {placed[i][0]}, offset {placed[i][1]}" for i in bad_at}
    assert {r["position"] for r in rejects} == want_positions
    for r in rejects:
        i = next(i for i in bad_at
                 if r["position"] == f"topic {topic}, partition {placed[i][0]}, offset {placed[i][1]}")
        assert r["raw"] == values[i].split(b"\n", 1)[1] and r["reason"] and r["source"] == conn.name
    # Every good line is kept, the good line of a message with a bad one too.
    assert_same_rows(engine.get_table("clean").to_arrow(), pa.Table.from_pylist(expect_good, schema=SCHEMA),
                     ["id", "user", "amount", "ok"])
    stats = engine.get_metrics()["connectors"][conn.name]
    assert (stats["parsed_records"], stats["rejected_records"]) == (len(expect_good), len(bad_at))


def test_committed_offsets_resume_without_loss_or_duplicates(kafka_broker, make_engine):
    rng = random.Random(9)
    topic, group = unique("resume"), unique("g")
    kafka_broker.create_topic(topic, 3)
    first = produce_rows(kafka_broker, topic, make_rows(rng, 0, 400), rng)

    def run_until(n):
        engine = make_engine(trigger_interval_ms=20, metrics_path=None)
        engine.register_table("t", schema=SCHEMA)
        # Default start: the group's committed offsets (earliest for a new group).
        conn = KafkaConnector("t", topic, consumer_config(kafka_broker, group), name="orders_in")
        engine.add_connector(conn)
        engine.start()
        wait_rows(engine, "t", n)
        time.sleep(1.0)  # anything beyond n (a duplicate) would arrive now
        rows = engine.get_table("t").to_arrow()
        engine.close()  # stops the connector: commits its positions, leaves the group
        return rows

    before = run_until(len(first))
    assert len({p for _, p, _, _ in first}) == 3
    assert kafka_broker.committed(group, topic) == kafka_broker.end_offsets(topic)
    second = produce_rows(kafka_broker, topic, make_rows(rng, 400, 300), rng)
    after = run_until(len(second))
    # The restarted connector read exactly the new records: none lost, none twice.
    want_after = pa.Table.from_pylist([r for r, *_ in second], schema=SCHEMA)
    assert_same_rows(after, want_after, ["id", "user", "amount", "ok"])
    assert_same_rows(pa.concat_tables([before.select(SCHEMA.names), after.select(SCHEMA.names)]),
                     pa.Table.from_pylist([r for r, *_ in first + second], schema=SCHEMA),
                     ["id", "user", "amount", "ok"])
    assert kafka_broker.committed(group, topic) == kafka_broker.end_offsets(topic)


def test_broker_restart_reconnects_and_continues(kafka_broker, make_engine, tmp_path):
    rng = random.Random(3)
    topic = unique("restart")
    kafka_broker.create_topic(topic, 2)
    first = produce_rows(kafka_broker, topic, make_rows(rng, 0, 200), rng)
    engine = make_engine(trigger_interval_ms=20, metrics_path=str(tmp_path / "m.db"))
    engine.register_table("t", schema=SCHEMA, primary_key="id")
    conn = KafkaConnector("t", topic, consumer_config(kafka_broker, unique("g")), start="earliest")
    engine.add_connector(conn)
    engine.start()
    wait_rows(engine, "t", len(first))
    assert conn.stats()["errors"] == 0

    kafka_broker.restart(down_seconds=2.0)  # same ports, same log dir
    second = produce_rows(kafka_broker, topic, make_rows(rng, 200, 300), rng)
    wait_rows(engine, "t", len(first) + len(second))

    # The outage is counted and reported once as an alert; the connector went on.
    stats = conn.stats()
    assert stats["errors"] >= 1
    events = [e for e in engine.recent_events() if "Kafka" in str(e) and conn.name in str(e)]
    assert events, engine.recent_events()
    # Every record once (keyed by id: a duplicate would not show in the count,
    # so the append of parsed records is checked too).
    assert_same_rows(engine.get_table("t").to_arrow(),
                     pa.Table.from_pylist([r for r, *_ in first + second], schema=SCHEMA),
                     ["id", "user", "amount", "ok"])
    assert stats["parsed_records"] == len(first) + len(second)
    assert conn.positions() == {(topic, p): o for p, o in kafka_broker.end_offsets(topic).items()}
    # The counters reach the metrics store's telemetry.
    deadline = time.monotonic() + 20
    rows = []
    while time.monotonic() < deadline and not rows:
        rows = engine.query_metrics(
            "SELECT errors, parsed_records FROM rill_connector_stats "
            f"WHERE connector = '{conn.name}' AND errors >= 1 AND parsed_records = {len(first) + len(second)}"
        ).to_pylist()
        time.sleep(0.2)
    assert rows


def test_start_at_timestamp_and_latest(kafka_broker, make_engine):
    from confluent_kafka import Producer

    topic = unique("starts")
    kafka_broker.create_topic(topic, 2)
    base = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for i in range(40):  # message i has create time base + i s, spread over both partitions
        producer.produce(topic, json.dumps({"id": i}).encode(), partition=i % 2, timestamp=base + i * 1000)
    assert producer.flush(30) == 0

    engine = make_engine(trigger_interval_ms=20, metrics_path=None)
    engine.register_table("from_ts", schema=pa.schema([("id", pa.int64())]))
    engine.register_table("from_end", schema=pa.schema([("id", pa.int64())]))
    by_time = KafkaConnector("from_ts", topic, consumer_config(kafka_broker, unique("g")),
                             start="timestamp", start_timestamp_ms=base + 25_000)
    latest = KafkaConnector("from_end", topic, consumer_config(kafka_broker, unique("g")), start="latest")
    engine.add_connector(by_time)
    engine.add_connector(latest)
    engine.start()
    wait_rows(engine, "from_ts", 15)
    # "latest" is resolved once the partitions are assigned and fetched.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(latest.lags()) < 2:
        time.sleep(0.1)
    assert len(latest.lags()) == 2
    time.sleep(1.0)
    for i in range(40, 50):
        producer.produce(topic, json.dumps({"id": i}).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    wait_rows(engine, "from_end", 10)
    time.sleep(0.5)
    assert sorted(engine.get_table("from_ts").to_arrow().column("id").to_pylist()) == \
        list(range(25, 50))
    assert sorted(engine.get_table("from_end").to_arrow().column("id").to_pylist()) == \
        list(range(40, 50))


def test_partition_lag_in_telemetry_prometheus_and_the_metrics_store(kafka_broker, make_engine, tmp_path):
    import http.client

    from prometheus_client.parser import text_string_to_metric_families

    topic = unique("lag")
    kafka_broker.create_topic(topic, 2)
    kafka_broker.produce(topic, [json.dumps({"id": i}) for i in range(2000)],
                         keys=[str(i % 5) for i in range(2000)])
    ends = kafka_broker.end_offsets(topic)
    token = "lag-token"
    engine = make_engine(trigger_interval_ms=250, quack_address="quack:127.0.0.1:0", quack_token=token,
                         metrics_path=str(tmp_path / "m.db"))
    engine.register_table("t", schema=pa.schema([("id", pa.int64())]))
    # A small buffer that refuses (the consumer waits): each tick takes <= 100 rows,
    # so the backlog drains over several seconds and the lag is seen shrinking.
    conn = KafkaConnector("t", topic, consumer_config(kafka_broker, unique("g")), start="earliest",
                          max_buffer_records=100, on_overflow="error", name="lagging")
    engine.add_connector(conn)
    engine.start()
    host, _, port = engine.quack_address[len("quack:"):].rpartition(":")

    def get(path):
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        c.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        r = c.getresponse()
        body = r.read()
        c.close()
        assert r.status == 200, body
        return body

    def prometheus_lags():
        out = {}
        for family in text_string_to_metric_families(get("/metrics").decode()):
            for s in family.samples:
                if s.name == "rill_kafka_partition_lag" and s.labels.get("connector") == "lagging":
                    assert s.labels["topic"] == topic
                    out[int(s.labels["partition"])] = s.value
        return out

    seen_backlog = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lags = prometheus_lags()
        telemetry = {c["connector"]: c for c in json.loads(get("/api/v1/telemetry/connectors"))["connectors"]}
        if len(lags) == 2 and sum(lags.values()) > 0 and seen_backlog is None:
            # Lag = high watermark - position, per partition.
            positions = conn.positions()
            seen_backlog = lags
            assert all(0 < lag + positions.get((topic, p), 0) <= ends[p] for p, lag in lags.items()
                       if lag > 0), (lags, positions, ends)
            parts = {p["partition"]: p["lag"] for p in telemetry["lagging"]["partitions"]}
            assert set(parts) == {0, 1} and sum(parts.values()) > 0
        if seen_backlog is not None and len(lags) == 2 and sum(lags.values()) == 0 \
                and engine.get_table("t").num_rows == 2000:
            break
        time.sleep(0.1)
    assert seen_backlog is not None, "no lag was ever reported while 2000 records waited"
    assert prometheus_lags() == {0: 0, 1: 0} and engine.get_table("t").num_rows == 2000
    # The metrics store recorded the lag (its connector stats rows).
    deadline = time.monotonic() + 20
    peak = 0
    while time.monotonic() < deadline and not peak:
        peak = engine.query_metrics(
            "SELECT coalesce(max(lag), 0) AS m FROM rill_connector_stats WHERE connector = 'lagging'"
        ).column("m")[0].as_py()
        time.sleep(0.2)
    assert 0 < peak <= 2000
