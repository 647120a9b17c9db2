"""Row operations from connectors (issue 25): format="debezium" (Debezium's JSON
change events), Kafka tombstones and message keys (key_columns, key_format),
and op_column, on the Kafka (a real broker), NDJSON stream, file, WebSocket and
HTTP ingest paths.

The fixtures in tests/data/debezium are written by hand from Debezium's
documented PostgreSQL change events (every op: r, c, u, d with the key only and
with the full row, t), bare and in the schema/payload wrapper. The oracle is a
dict applied in order (upsert, delete by key, truncate); the table must equal it.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import random
import socket
import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rills import (FileStreamConnector, JSONStreamConnector, KafkaConnector, RillEngine,
                   schema)
from conftest import require_module

pytestmark = pytest.mark.timeout(180)

DATA = Path(__file__).resolve().parent.parent / "data" / "debezium"
COLUMNS = ["id", "first_name", "last_name", "email"]
CUSTOMERS = [("id", pa.int64()), ("first_name", pa.string()), ("last_name", pa.string()),
             ("email", pa.string())]


def events(name="events.ndjson"):
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def lines(name):
    return (DATA / name).read_text()


def unwrap(event):
    return event["payload"] if "payload" in event and "op" not in event else event


def debezium_oracle(evs, ts_column=None):
    """{id: row} after applying the change events in order."""
    state = {}
    for e in map(unwrap, evs):
        op = e["op"]
        if op in ("c", "u", "r"):
            row = {c: e["after"].get(c) for c in COLUMNS}
            if ts_column:
                row[ts_column] = e["source"]["ts_ms"]
            state[row["id"]] = row
        elif op == "d":
            state.pop(e["before"]["id"], None)
        elif op == "t":
            state.clear()
    return state


def table_rows(engine, table, columns):
    cols = ", ".join(columns)
    return engine.query_sql(f"SELECT {cols} FROM {table} ORDER BY {columns[0]}").to_pylist()


def wait_equal(engine, table, expected, columns, timeout=60):
    """Wait until `table` holds exactly the rows of `expected` ({key: row})."""
    want = [expected[k] for k in sorted(expected)]
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        try:
            got = table_rows(engine, table, columns)
        except Exception:  # the table appears with its first rows
            got = None
        if got == want:
            return
        time.sleep(0.05)
    raise AssertionError(f"{table}: {got} != {want}")


def rejects(engine, source=None):
    where = f" WHERE source = '{source}'" if source else ""
    return engine.query_sql(f"SELECT source, position, reason, raw FROM rill_rejects{where}").to_pylist()


def wait_rejects(engine, n, source=None, timeout=30):
    deadline = time.monotonic() + timeout
    got = []
    while time.monotonic() < deadline:
        got = rejects(engine, source)
        if len(got) >= n:
            return got
        time.sleep(0.05)
    raise AssertionError(f"{len(got)} rejects, expected {n}: {got}")


def customers_engine(make_engine, table="customers", extra=()):
    engine = make_engine(trigger_interval_ms=20, metrics_path=None)
    engine.register_table(table, schema=schema(CUSTOMERS + list(extra), primary_key="id",
                                               mode="snapshot"))
    return engine


def random_events(rng, n, keys=12):
    """Random Debezium events over `keys` ids: creates, updates, deletes of
    live keys, a rare truncate."""
    live = {}
    out = []
    ts = 1_700_000_000_000
    for i in range(n):
        ts += rng.randint(1, 50)
        k = rng.randrange(keys)
        roll = rng.random()
        source = {"ts_ms": ts, "lsn": 1000 + i, "db": "postgres", "table": "customers"}
        if roll < 0.02:
            out.append({"before": None, "after": None, "op": "t", "source": source})
            live.clear()
        elif k in live and roll < 0.3:
            out.append({"before": {"id": k}, "after": None, "op": "d", "source": source})
            del live[k]
        else:
            row = {"id": k, "first_name": f"f{i}", "last_name": rng.choice(["a", "b", None]),
                   "email": f"{k}@{i}.org"}
            out.append({"before": live.get(k), "after": row,
                        "op": "u" if k in live else rng.choice("cr"), "source": source})
            live[k] = row
    return out


# ---- Kafka (a real broker) ---------------------------------------------------------------

def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consumer_config(broker):
    return {"bootstrap.servers": broker.bootstrap_servers, "group.id": unique("g"),
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            "reconnect.backoff.max.ms": 1000}


def debezium_messages(evs, wrap_keys=False):
    """(values, keys) as Debezium writes them: the key is the primary key (JSON,
    wrapped with its schema when `wrap_keys`), and each delete is followed by a
    tombstone of the same key (tombstones.on.delete)."""
    values, keys = [], []
    for e in evs:
        p = unwrap(e)
        row = p["after"] or p["before"]
        key = None
        if row is not None:
            key = {"id": row["id"]}
            if wrap_keys:
                key = {"schema": {"type": "struct", "optional": False,
                                  "fields": [{"type": "int32", "optional": False, "field": "id"}],
                                  "name": "PostgreSQL_server.public.customers.Key"},
                       "payload": key}
            key = json.dumps(key)
        values.append(json.dumps(e))
        keys.append(key)
        if p["op"] == "d":
            values.append(None)
            keys.append(key)
    return values, keys


@pytest.mark.parametrize("fixture,key_columns", [("events.ndjson", ["id"]),
                                                 ("events_wrapped.ndjson", None)])
def test_kafka_debezium_fixtures_and_random_changes_match_the_oracle(
        kafka_broker, make_engine, fixture, key_columns):
    evs = events(fixture) + random_events(random.Random(25), 400)
    topic = unique("cdc")
    kafka_broker.create_topic(topic, 1)  # one partition: Debezium keeps a table's order
    values, keys = debezium_messages(evs, wrap_keys=fixture.startswith("events_wrapped"))
    kafka_broker.produce(topic, [v.encode() if v else None for v in values],
                         keys=[k.encode() if k else None for k in keys], partition=0)
    engine = customers_engine(make_engine, extra=[("changed_at", pa.int64())])
    conn = KafkaConnector("customers", topic, consumer_config(kafka_broker), start="earliest",
                          format="debezium", ts_ms_column="changed_at", key_columns=key_columns)
    engine.add_connector(conn)
    engine.start()
    expected = debezium_oracle(evs, ts_column="changed_at")
    wait_equal(engine, "customers", expected, COLUMNS + ["changed_at"])
    stats = conn.stats()
    tombstones = sum(1 for v in values if v is None)
    assert stats["tombstones"] == tombstones
    assert stats["rejected_records"] == 0 and rejects(engine) == []


def test_kafka_tombstones_delete_by_json_and_string_keys(kafka_broker, make_engine):
    topic = unique("users")
    kafka_broker.create_topic(topic, 1)
    rng = random.Random(7)
    values, keys, state = [], [], {}
    for i in range(300):
        k = rng.randrange(20)
        key = json.dumps({"id": k}) if rng.random() < 0.5 else str(k)  # object or scalar
        if k in state and rng.random() < 0.35:
            values.append(None)
            state.pop(k)
        else:
            # The value lacks the key column half the time: the message key fills it.
            row = {"first_name": f"n{i}"} if rng.random() < 0.5 else {"id": k, "first_name": f"n{i}"}
            values.append(json.dumps(row))
            state[k] = {"id": k, "first_name": f"n{i}"}
        keys.append(key)
    kafka_broker.produce(topic, [v.encode() if v else None for v in values],
                         keys=[k.encode() for k in keys], partition=0)
    engine = customers_engine(make_engine)
    conn = KafkaConnector("customers", topic, consumer_config(kafka_broker), start="earliest",
                          key_columns=["id"])
    engine.add_connector(conn)

    # A string key: the key bytes are the one key column's value.
    names = unique("names")
    kafka_broker.create_topic(names, 1)
    kafka_broker.produce(names, [b'{"score": 1}', b'{"score": 2}', None, b'{"score": 3}', None],
                         keys=["Zoë".encode(), b"bo", "Zoë".encode(), b"q\"uote", b"bo"],
                         partition=0)
    engine.register_table("scores", schema=schema([("name", pa.string()), ("score", pa.int64())],
                                                  primary_key="name", mode="snapshot"))
    by_name = KafkaConnector("scores", names, consumer_config(kafka_broker), start="earliest",
                             key_format="string")  # the table's one-column primary key
    engine.add_connector(by_name)
    engine.start()
    wait_equal(engine, "customers", state, ["id", "first_name"])
    wait_equal(engine, "scores", {'q"uote': {"name": 'q"uote', "score": 3}}, ["name", "score"])
    assert conn.stats()["tombstones"] == sum(1 for v in values if v is None)
    assert rejects(engine) == []


def test_kafka_tombstone_without_key_columns_is_a_reject_naming_the_options(
        kafka_broker, make_engine):
    topic = unique("plain")
    kafka_broker.create_topic(topic, 1)
    kafka_broker.produce(topic, [b'{"id": 1, "first_name": "a"}', None, b'{"id": 2}'],
                         keys=[b'{"id": 1}', b'{"id": 1}', None], partition=0)
    engine = customers_engine(make_engine)
    conn = KafkaConnector("customers", topic, consumer_config(kafka_broker), start="earliest")
    engine.add_connector(conn)
    engine.start()
    got = wait_rejects(engine, 1, conn.name)
    assert "key_columns=[...]" in got[0]["reason"] and "key_format='string'" in got[0]["reason"]
    assert got[0]["position"] == f"topic {topic}, partition 0, offset 1"
    wait_equal(engine, "customers", {1: {"id": 1}, 2: {"id": 2}}, ["id"])
    assert conn.stats()["tombstones"] == 1


def test_kafka_op_column(kafka_broker, make_engine):
    topic = unique("ops")
    kafka_broker.create_topic(topic, 1)
    records, expected = op_records(random.Random(3), 300)
    kafka_broker.produce(topic, [json.dumps(r).encode() for r in records], partition=0)
    engine = customers_engine(make_engine)
    conn = KafkaConnector("customers", topic, consumer_config(kafka_broker), start="earliest",
                          op_column="_op")
    engine.add_connector(conn)
    engine.start()
    wait_equal(engine, "customers", expected, ["id", "first_name"])


# ---- op_column: records with their operation ----------------------------------------------

def op_records(rng, n, keys=15):
    """Records with an `_op` field (every spelling), and the oracle after them."""
    state, out = {}, []
    for i in range(n):
        k = rng.randrange(keys)
        roll = rng.random()
        if roll < 0.01:
            out.append({"_op": rng.choice(["truncate", "t"])})
            state.clear()
        elif roll < 0.3:
            out.append({"id": k, "_op": rng.choice(["delete", "d", "DELETE"])})
            state.pop(k, None)
        else:
            op = rng.choice(["insert", "upsert", "update", "c", "u", "r", None])
            rec = {"id": k, "first_name": f"v{i}"}
            if op is not None:
                rec["_op"] = op
            out.append(rec)
            state[k] = {"id": k, "first_name": f"v{i}"}
    return out, state


def test_ndjson_stream_op_column_applies_rows_in_order(make_engine):
    records, expected = op_records(random.Random(1), 500)
    engine = customers_engine(make_engine)
    conn = JSONStreamConnector("customers", op_column="_op")
    engine.add_connector(conn)
    engine.start()
    body = "\n".join(json.dumps(r) for r in records)
    conn.push_bytes(body[: len(body) // 2].rsplit("\n", 1)[0])
    conn.push_bytes(body[len(body[: len(body) // 2].rsplit("\n", 1)[0]):])
    conn.push_bytes('{"id": 1, "_op": "merge"}')
    wait_equal(engine, "customers", expected, ["id", "first_name"])
    got = wait_rejects(engine, 1, conn.name)
    assert "field '_op': unknown operation 'merge'" in got[0]["reason"]


def test_ndjson_stream_debezium_with_malformed_envelopes(make_engine):
    engine = customers_engine(make_engine, extra=[("changed_at", pa.timestamp("ms", tz="UTC"))])
    conn = JSONStreamConnector("customers", format="debezium", ts_ms_column="changed_at")
    engine.add_connector(conn)
    engine.start()
    good = lines("events.ndjson").splitlines()
    bad = lines("malformed.ndjson").splitlines()
    mixed = [x for pair in zip(good, bad) for x in pair] + good[len(bad):]
    conn.push_bytes("\n".join(mixed))
    expected = debezium_oracle(events())
    wait_equal(engine, "customers", expected, COLUMNS)
    got = wait_rejects(engine, len(bad), conn.name)
    assert sorted(r["raw"].decode() for r in got) == sorted(bad)
    assert any("unknown op 'x'" in r["reason"] for r in got)
    ts = {r["id"]: r["changed_at"] for r in table_rows(engine, "customers", ["id", "changed_at"])}
    want = debezium_oracle(events(), ts_column="ts")
    assert {k: int(v.timestamp() * 1000) for k, v in ts.items()} == {
        k: r["ts"] for k, r in want.items()}


def test_ndjson_stream_decodes_debezium_at_the_batch_level():
    conn = JSONStreamConnector("customers", parse_options={"explicit_schema": pa.schema(CUSTOMERS)},
                               format="debezium")
    conn.push_bytes(lines("events_wrapped.ndjson"))
    batch = conn.read_batch()
    assert batch.column_names == COLUMNS + ["_rill_op"]
    assert batch.column("_rill_op").to_pylist() == [
        {"c": 0, "u": 0, "r": 0, "d": 1, "t": 2}[unwrap(e)["op"]] for e in events()]
    with pytest.raises(ValueError, match="format='debezium'"):
        JSONStreamConnector("customers", ts_ms_column="changed_at")
    with pytest.raises(ValueError, match="unknown format"):
        JSONStreamConnector("customers", format="avro-ish")


# ---- files ----------------------------------------------------------------------------------

def test_file_connector_debezium_and_op_column(tmp_path, make_engine):
    cdc, ops = tmp_path / "cdc", tmp_path / "ops"
    cdc.mkdir()
    ops.mkdir()
    engine = customers_engine(make_engine)
    engine.register_table("other", schema=schema([("id", pa.int64()), ("first_name", pa.string())],
                                                 primary_key="id", mode="snapshot"))
    a = FileStreamConnector("customers", cdc, file_pattern="*.ndjson", format="debezium",
                            stable_seconds=0.1, poll_interval_seconds=0.05)
    b = FileStreamConnector("other", ops, op_column="_op", stable_seconds=0.1,
                            poll_interval_seconds=0.05)
    engine.add_connector(a)
    engine.add_connector(b)
    engine.start()
    (cdc / "1.ndjson").write_text(lines("events.ndjson"))
    records, expected = op_records(random.Random(9), 200)
    (ops / "1.ndjson").write_text("\n".join(json.dumps(r) for r in records[:100]) + "\n")
    # A Parquet file's op column: renamed, its names read by the table.
    rest = records[100:]
    pq.write_table(pa.Table.from_pylist(
        [{"id": r.get("id"), "first_name": r.get("first_name"), "_op": r.get("_op")} for r in rest],
        schema=pa.schema([("id", pa.int64()), ("first_name", pa.string()), ("_op", pa.string())])),
        ops / "2.parquet")
    wait_equal(engine, "customers", debezium_oracle(events()), COLUMNS)
    wait_equal(engine, "other", expected, ["id", "first_name"])


# ---- HTTP ingest ----------------------------------------------------------------------------

TOKEN = "dbz-token"


def post(engine, path, body, content_type="application/x-ndjson"):
    host, _, port = engine.quack_address[len("quack:"):].rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("POST", path, body=body, headers={"Content-Type": content_type,
                                                   "Authorization": f"Bearer {TOKEN}"})
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    return resp.status, json.loads(payload)


def test_http_ingest_format_debezium_and_op_column(tmp_path):
    eng = RillEngine(trigger_interval_ms=20, quack_address="quack:127.0.0.1:0", quack_token=TOKEN,
                     metrics_path=str(tmp_path / "m.db"))
    eng.register_table("customers", schema=schema(CUSTOMERS, primary_key="id", mode="snapshot"))
    eng.register_table("other", schema=schema([("id", pa.int64()), ("first_name", pa.string())],
                                              primary_key="id", mode="snapshot"))
    eng.start()
    try:
        status, reply = post(eng, "/api/v1/ingest/customers?format=debezium&wait=true",
                             lines("events_wrapped.ndjson") + lines("malformed.ndjson"))
        assert status == 200, reply
        assert reply["accepted"] == 16 and reply["rejected"] == 14
        wait_equal(eng, "customers", debezium_oracle(events()), COLUMNS)
        records, expected = op_records(random.Random(4), 300)
        status, reply = post(eng, "/api/v1/ingest/other?op_column=_op&wait=true",
                             "\n".join(json.dumps(r) for r in records))
        assert status == 200 and reply["rejected"] == 0, reply
        wait_equal(eng, "other", expected, ["id", "first_name"])
        status, reply = post(eng, "/api/v1/ingest/other?format=avro", "{}")
        assert status == 400 and "unknown format" in reply["message"]
        status, reply = post(eng, "/api/v1/ingest/other?format=debezium", "id\n1\n", "text/csv")
        assert status == 415
    finally:
        eng.close()


# ---- WebSocket ------------------------------------------------------------------------------

def test_websocket_op_column_and_debezium(make_engine):
    require_module("websockets")
    serve = require_module("websockets.asyncio.server").serve
    from rills.connectors.websocket import WebSocketConnector

    records, expected = op_records(random.Random(5), 200)
    frames = {"/ops": ["\n".join(json.dumps(r) for r in records[:120]),
                       "\n".join(json.dumps(r) for r in records[120:])],
              "/cdc": [lines("events.ndjson")]}
    loop = asyncio.new_event_loop()
    ready, stop = threading.Event(), None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def handler(ws):
        for frame in frames[ws.request.path]:
            await ws.send(frame)
        await ws.wait_closed()

    def run():
        nonlocal stop
        asyncio.set_event_loop(loop)

        async def main():
            nonlocal stop
            stop = asyncio.Event()
            async with serve(handler, "127.0.0.1", port):
                ready.set()
                await stop.wait()
        loop.run_until_complete(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    engine = customers_engine(make_engine)
    engine.register_table("other", schema=schema([("id", pa.int64()), ("first_name", pa.string())],
                                                 primary_key="id", mode="snapshot"))
    engine.add_connector(WebSocketConnector("other", f"ws://127.0.0.1:{port}/ops", op_column="_op"))
    engine.add_connector(WebSocketConnector("customers", f"ws://127.0.0.1:{port}/cdc",
                                            format="debezium"))
    engine.start()
    try:
        wait_equal(engine, "other", expected, ["id", "first_name"])
        wait_equal(engine, "customers", debezium_oracle(events()), COLUMNS)
    finally:
        engine.close()
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
