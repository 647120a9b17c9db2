"""KafkaConnector through librdkafka's mock cluster (127.0.0.1, in process)."""

import json
import time

import pyarrow as pa
import pytest

from rills._io_connectors import KafkaConnector, KafkaMockCluster


def config(cluster, group):
    return {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


@pytest.fixture
def cluster():
    """A mock cluster that outlives the test's engine (requested before `engine`,
    so torn down after it): closing a consumer whose cluster is gone waits 5 s."""
    return KafkaMockCluster()


def wait_count(engine, table, n, timeout=30.0):
    deadline = time.time() + timeout
    got = 0
    while time.time() < deadline:
        engine.step()
        try:
            got = engine.query_sql(f"SELECT count(*) AS n FROM {table}").column("n")[0].as_py()
        except Exception:  # the table appears with the first rows
            got = 0
        if got >= n:
            return got
        time.sleep(0.05)
    return got


def test_topic_to_table_to_sql_with_rejects_and_metadata(cluster, engine):
    cluster.create_topic("orders", 2)
    values = ["\n".join(json.dumps({"id": i * 2 + j, "amount": (i * 2 + j) * 1.5}) for j in range(2))
              for i in range(100)]
    values.append('{"id": "not a number"}')
    cluster.produce_many("orders", values)
    engine.register_table("orders", schema=pa.schema([
        ("id", pa.int64()), ("amount", pa.float64()), ("_topic", pa.string()),
        ("_partition", pa.int32()), ("_offset", pa.int64()), ("_key", pa.binary()),
        ("_timestamp", pa.timestamp("ms"))]))
    conn = KafkaConnector("orders", "orders", config(cluster, "py-orders"), start="earliest",
                          metadata_columns=True)
    engine.add_connector(conn)
    assert wait_count(engine, "orders", 200) == 200
    got = engine.query_sql("SELECT CAST(sum(id) AS BIGINT) AS s, sum(amount) AS a, "
                           "count(DISTINCT _offset) AS o, min(_topic) AS t FROM orders").to_pylist()[0]
    assert got == {"s": sum(range(200)), "a": sum(range(200)) * 1.5, "o": 100, "t": "orders"} or (
        got["s"] == sum(range(200)) and got["t"] == "orders")
    deadline = time.time() + 10
    rejects = []
    while time.time() < deadline and not rejects:
        engine.step()
        rejects = engine.query_sql("SELECT position, raw FROM rill_rejects").to_pylist()
    assert len(rejects) == 1 and rejects[0]["position"].startswith("topic orders, partition ")
    assert rejects[0]["raw"] == b'{"id": "not a number"}'
    assert sum(conn.positions().values()) == len(values)
    stats = engine.get_metrics()["connectors"][conn.name]
    assert stats["parsed_records"] == 200 and stats["rejected_records"] == 1


def test_broker_outage_is_an_alert_not_a_crash(cluster, engine):
    cluster.create_topic("t", 1)
    cluster.produce("t", '{"v": 1}')
    conn = KafkaConnector("kt", ["t"], {**config(cluster, "py-outage"), "reconnect.backoff.max.ms": 200},
                          start="earliest")
    engine.add_connector(conn)
    assert wait_count(engine, "kt", 1) == 1
    cluster.set_broker_down(1, True)
    try:
        deadline = time.time() + 45  # librdkafka notices the outage by its own timers
        alerts = []
        while time.time() < deadline and not alerts:
            engine.step()
            alerts = [e for e in engine.recent_events()
                      if "Kafka error" in str(e) and conn.name in str(e)]
            time.sleep(0.05)
        assert alerts
    finally:
        cluster.set_broker_down(1, False)
    cluster.produce("t", '{"v": 2}')
    assert wait_count(engine, "kt", 2) == 2


def test_bad_options():
    with pytest.raises(ValueError):
        KafkaConnector("t", [], {})
    with pytest.raises(ValueError, match="start"):
        KafkaConnector("t", "x", {"bootstrap.servers": "127.0.0.1:1"}, start="middle")
    with pytest.raises(ValueError, match="no.such.property"):
        KafkaConnector("t", "x", {"no.such.property": "1"})


def test_error_overflow_with_a_backlog_larger_than_the_buffer_reads_everything(cluster, engine):
    # on_overflow="error" with a small row limit and a backlog of many messages,
    # some holding more rows than the limit: the consumer waits for room and
    # every row arrives (a batch that can never fit must not stall it forever).
    cluster.create_topic("big", 2)
    values = [json.dumps({"id": i}) for i in range(600)]
    values += ["\n".join(json.dumps({"id": 1000 + m * 100 + j}) for j in range(80)) for m in range(5)]
    cluster.produce_many("big", values)
    engine.register_table("big", schema=pa.schema([("id", pa.int64())]))
    conn = KafkaConnector("big", "big", config(cluster, "py-backlog"), start="earliest",
                          max_buffer_records=50, on_overflow="error")
    engine.add_connector(conn)
    assert wait_count(engine, "big", 1000) == 1000
    got = engine.query_sql("SELECT count(DISTINCT id) AS d, sum(id) AS s FROM big").to_pylist()[0]
    want = sum(range(600)) + sum(1000 + m * 100 + j for m in range(5) for j in range(80))
    assert got["d"] == 1000 and int(got["s"]) == want
    # The reader waited for room: nothing dropped, nothing refused for good.
    assert conn.stats()["dropped_records"] == 0 and conn.stats()["refused_records"] == 0
