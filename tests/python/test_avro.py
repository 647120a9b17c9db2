"""Avro with a schema registry (issue 25): KafkaConnector(format="avro") on the
real broker of the test suite (conftest.py's `kafka_broker`), a schema registry
stand-in on 127.0.0.1 (a small http.server answering as Confluent's does:
GET /schemas/ids/{id}, POST /subjects/{subject}/versions), records written by
`fastavro` in the Confluent framing, and fastavro's own decoding of the same
bytes as the oracle. The Kafka sink's Avro is read back by fastavro.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import random
import struct
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow as pa
import pytest

from conftest import require_module
from rills import KafkaConnector
from waiting import wait_rows

fastavro = require_module("fastavro", "the oracle of the Avro tests (requirements-dev.txt)")

pytestmark = pytest.mark.timeout(180)


# ---- a schema registry stand-in -------------------------------------------------------


class Registry:
    """A Confluent-compatible schema registry on 127.0.0.1 (ids from 1, one per
    distinct schema text; optional basic auth)."""

    def __init__(self, user: str | None = None, password: str | None = None):
        self.schemas: dict[int, str] = {}
        self.subjects: dict[str, list[int]] = {}
        self.gets: list[int] = []
        self.auth = None
        if user is not None:
            self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body: dict):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                if registry.auth and self.headers.get("Authorization") != registry.auth:
                    self._send(401, {"error_code": 401, "message": "Unauthorized"})
                    return False
                return True

            def do_GET(self):
                if not self._authorized():
                    return
                parts = self.path.strip("/").split("/")
                if len(parts) == 3 and parts[:2] == ["schemas", "ids"] and parts[2].isdigit():
                    sid = int(parts[2])
                    registry.gets.append(sid)
                    if sid in registry.schemas:
                        return self._send(200, {"schema": registry.schemas[sid]})
                    return self._send(404, {"error_code": 40403, "message": "Schema not found"})
                self._send(404, {"error_code": 404, "message": "no route"})

            def do_POST(self):
                if not self._authorized():
                    return
                parts = self.path.strip("/").split("/")
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if len(parts) == 3 and parts[0] == "subjects" and parts[2] == "versions":
                    sid = registry.register(parts[1], body["schema"])
                    return self._send(200, {"id": sid})
                self._send(404, {"error_code": 404, "message": "no route"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def register(self, subject: str, schema) -> int:
        text = schema if isinstance(schema, str) else json.dumps(schema)
        canonical = json.dumps(json.loads(text), sort_keys=True)
        for sid, known in self.schemas.items():
            if json.dumps(json.loads(known), sort_keys=True) == canonical:
                break
        else:
            sid = len(self.schemas) + 1
            self.schemas[sid] = text
        self.subjects.setdefault(subject, []).append(sid)
        return sid

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def registry():
    r = Registry()
    yield r
    r.close()


def framed(schema_id: int, schema, record) -> bytes:
    out = io.BytesIO()
    out.write(b"\0" + struct.pack(">I", schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def unframe(value: bytes, schemas: dict) -> dict:
    assert value[0] == 0
    sid = struct.unpack(">I", value[1:5])[0]
    return fastavro.schemaless_reader(io.BytesIO(value[5:]), fastavro.parse_schema(json.loads(schemas[sid])))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consumer_config(broker, group: str) -> dict:
    return {"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


def read_into_table(make_engine, broker, topic, table_schema, n, **options):
    engine = make_engine(trigger_interval_ms=20, metrics_path=None)
    engine.register_table("t", schema=table_schema)
    conn = KafkaConnector("t", topic, consumer_config(broker, unique("g")), start="earliest",
                          format="avro", **options)
    engine.add_connector(conn)
    engine.start()
    wait_rows(engine, "t", n)
    return engine, conn


def wait_rejects(engine, conn, n, timeout=20.0):
    deadline = time.monotonic() + timeout
    rejects = []
    while time.monotonic() < deadline:
        rejects = engine.query_sql(
            f"SELECT position, reason, raw FROM rill_rejects WHERE source = '{conn.name}'").to_pylist()
        if len(rejects) >= n:
            break
        time.sleep(0.05)
    return rejects


# ---- randomized records against fastavro ----------------------------------------------

ORDER = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "user", "type": "string"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": ["null", "double"]},
        {"name": "ratio", "type": "float"},
        {"name": "ok", "type": "boolean"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "addr", "type": {"type": "record", "name": "Addr", "fields": [
            {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}]}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "blob", "type": "bytes"},
    ],
}

ORDER_ARROW = pa.schema([
    ("id", pa.int64()), ("qty", pa.int32()), ("user", pa.string()), ("note", pa.string()),
    ("amount", pa.float64()), ("ratio", pa.float32()), ("ok", pa.bool_()), ("status", pa.string()),
    ("tags", pa.list_(pa.string())), ("attrs", pa.map_(pa.string(), pa.int64())),
    ("addr", pa.struct([("city", pa.string()), ("zip", pa.int32())])),
    ("price", pa.decimal128(12, 2)), ("day", pa.date32()),
    ("at_ms", pa.timestamp("ms", tz="UTC")), ("at_us", pa.timestamp("us", tz="UTC")),
    ("ref", pa.string()), ("blob", pa.binary()),
])

WORDS = ["ana", "bo", "çé", "Zoë 🚀", 'q"uote', "back\\slash", "日本", ""]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def random_order(rng: random.Random, i: int) -> dict:
    return {
        "id": i if rng.random() < 0.9 else -rng.randint(0, 2**63 - 1),
        "qty": rng.randint(-2**31, 2**31 - 1),
        "user": rng.choice(WORDS),
        "note": None if rng.random() < 0.3 else rng.choice(WORDS) * rng.randint(0, 40),
        "amount": None if rng.random() < 0.2 else rng.uniform(-1e9, 1e9),
        "ratio": struct.unpack("f", struct.pack("f", rng.uniform(-1, 1)))[0],
        "ok": rng.random() < 0.5,
        "status": rng.choice(["NEW", "PAID", "SHIPPED"]),
        "tags": [rng.choice(WORDS) for _ in range(rng.randint(0, 5))],
        "attrs": {f"k{j}": rng.randint(-10**12, 10**12) for j in range(rng.randint(0, 4))},
        "addr": {"city": rng.choice(WORDS), "zip": None if rng.random() < 0.4 else rng.randint(0, 99999)},
        "price": decimal.Decimal(rng.randint(-10**11, 10**11)).scaleb(-2),
        "day": dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-30000, 30000)),
        "at_ms": EPOCH + dt.timedelta(milliseconds=rng.randint(-10**12, 4 * 10**12)),
        "at_us": EPOCH + dt.timedelta(microseconds=rng.randint(-10**15, 4 * 10**15)),
        "ref": str(uuid.UUID(int=rng.getrandbits(128))),
        "blob": rng.randbytes(rng.randint(0, 20)),
    }


def normalize(row: dict) -> dict:
    """A row as Python values comparable between fastavro's and Arrow's."""
    out = dict(row)
    if isinstance(out.get("attrs"), list):  # Arrow maps come back as (key, value) pairs
        out["attrs"] = dict(out["attrs"])
    if isinstance(out.get("ref"), uuid.UUID):
        out["ref"] = str(out["ref"])
    return out


def test_randomized_records_match_fastavros_decoding(kafka_broker, make_engine, registry):
    rng = random.Random(25)
    topic = unique("avro-orders")
    kafka_broker.create_topic(topic, 3)
    sid = registry.register(f"{topic}-value", ORDER)
    values = [framed(sid, ORDER, random_order(rng, i)) for i in range(400)]
    kafka_broker.produce(topic, values, keys=[str(i).encode() for i in range(len(values))])
    engine, conn = read_into_table(make_engine, kafka_broker, topic, ORDER_ARROW, len(values),
                                   schema_registry_url=registry.url)

    want = sorted((normalize(unframe(v, registry.schemas)) for v in values), key=lambda r: r["id"])
    got = sorted((normalize(r) for r in engine.get_table("t").to_arrow().select(ORDER_ARROW.names).to_pylist()),
                 key=lambda r: r["id"])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g == w
    stats = engine.get_metrics()["connectors"][conn.name]
    assert stats["parsed_records"] == len(values) and stats["rejected_records"] == 0
    assert registry.gets == [sid]  # fetched once, then cached by id


def test_schema_evolution_by_the_resolution_rules(kafka_broker, make_engine, registry):
    """Writers v1..v3 of one subject into one reader (the table): a field the
    writer lacks is null, a field the reader lacks is skipped, int -> long,
    float -> double, string -> bytes, bytes -> string."""
    v1 = {"type": "record", "name": "User", "fields": [
        {"name": "id", "type": "int"}, {"name": "name", "type": "string"},
        {"name": "score", "type": "float"}, {"name": "legacy", "type": {"type": "array", "items": "long"}}]}
    v2 = {"type": "record", "name": "User", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "bytes"},
        {"name": "score", "type": "double"}, {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "raw", "type": "string"}]}
    v3 = {"type": "record", "name": "User", "fields": [
        {"name": "email", "type": "string"}, {"name": "id", "type": "long"},
        {"name": "raw", "type": "bytes"}, {"name": "level", "type": "int"}]}
    reader = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()),
                        ("email", pa.string()), ("raw", pa.binary()), ("level", pa.int64())])
    topic = unique("avro-evolve")
    kafka_broker.create_topic(topic, 1)
    ids = [registry.register(f"{topic}-value", s) for s in (v1, v2, v3)]
    assert ids == [1, 2, 3]
    values, want = [], []
    for i in range(30):
        if i % 3 == 0:
            values.append(framed(1, v1, {"id": i, "name": f"n{i}", "score": 0.5, "legacy": [1, 2]}))
            want.append({"id": i, "name": f"n{i}", "score": 0.5, "email": None, "raw": None, "level": None})
        elif i % 3 == 1:
            values.append(framed(2, v2, {"id": 2**40 + i, "name": f"b{i}".encode(), "score": 1e300,
                                         "email": None if i % 2 else f"u{i}@x", "raw": "é"}))
            want.append({"id": 2**40 + i, "name": f"b{i}", "score": 1e300,
                         "email": None if i % 2 else f"u{i}@x", "raw": "é".encode(), "level": None})
        else:
            values.append(framed(3, v3, {"email": "z@x", "id": i, "raw": b"\x00\xff", "level": -i}))
            want.append({"id": i, "name": None, "score": None, "email": "z@x", "raw": b"\x00\xff",
                         "level": -i})
    kafka_broker.produce(topic, values)
    engine, conn = read_into_table(make_engine, kafka_broker, topic, reader, len(values),
                                   schema_registry_url=registry.url)
    got = engine.get_table("t").to_arrow().select(reader.names).to_pylist()
    assert sorted(got, key=lambda r: r["id"]) == sorted(want, key=lambda r: r["id"])
    assert sorted(set(registry.gets)) == [1, 2, 3]


def test_malformed_records_go_to_rejects_with_their_reason(kafka_broker, make_engine, registry):
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"},
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
        {"name": "v", "type": ["null", "string"]}]}
    sid = registry.register("bad-value", schema)
    good = [framed(sid, schema, {"id": i, "kind": "B", "v": f"s{i}"}) for i in range(20)]
    body = good[0][5:]
    bad = {
        b"\x01" + good[0][1:]: "magic byte 1, expected 0",
        b"\0\0\0": "fewer than the 5-byte header",
        b"\0" + struct.pack(">I", 999) + body: "schema id 999 is not in the schema registry",
        good[0][:-2]: "field 'v'",                                        # truncated
        good[0] + b"\x00": "1 bytes left after the record",
        b"\0" + struct.pack(">I", sid) + b"\x02\x08\x00": "field 'kind': enum index 4 out of range",
        b"\0" + struct.pack(">I", sid) + b"\x02\x00\x06": "field 'v': union branch 3 out of range",
        b"\0" + struct.pack(">I", sid) + b"\x02\x00\x02\x04\xff\xfe": "field 'v': invalid UTF-8",
        b"\0" + struct.pack(">I", sid) + b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01":
            "field 'id': varint longer than 10 bytes",
    }
    topic = unique("avro-bad")
    kafka_broker.create_topic(topic, 1)
    values = []
    for i, b in enumerate(bad):
        values += [good[i], b]
    values += good[len(bad):]
    values.append(None)  # a tombstone
    placed = kafka_broker.produce(topic, values)
    reader = pa.schema([("id", pa.int64()), ("kind", pa.string()), ("v", pa.string())])
    engine, conn = read_into_table(make_engine, kafka_broker, topic, reader, len(good),
                                   schema_registry_url=registry.url)
    rejects = wait_rejects(engine, conn, len(bad) + 1)
    assert len(rejects) == len(bad) + 1, [(r['position'], r['reason']) for r in rejects]
    by_position = {r["position"]: r for r in rejects}
    for i, v in enumerate(values):
        if v in bad:
            r = by_position[f"topic {topic}, partition 0, offset {placed[i][1]}"]
            assert bad[v] in r["reason"], (r["reason"], bad[v])
            assert r["raw"] == v
    assert "tombstone" in by_position[f"topic {topic}, partition 0, offset {placed[-1][1]}"]["reason"]
    got = engine.get_table("t").to_arrow().to_pylist()
    assert sorted(r["id"] for r in got) == list(range(20))
    assert registry.gets.count(999) == 1  # the unknown id is asked once


def test_plain_avro_with_a_given_schema_into_an_inferred_table(kafka_broker, make_engine):
    schema = {"type": "record", "name": "P", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}
    topic = unique("avro-plain")
    kafka_broker.create_topic(topic, 2)
    rows = [{"id": i, "name": f"p{i}", "at": EPOCH + dt.timedelta(microseconds=i * 1001)} for i in range(50)]
    values = []
    for r in rows:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, fastavro.parse_schema(schema), r)
        values.append(out.getvalue())
    kafka_broker.produce(topic, values)
    engine = make_engine(trigger_interval_ms=20, metrics_path=None)
    conn = KafkaConnector("p", topic, consumer_config(kafka_broker, unique("g")), start="earliest",
                          format="avro", avro_schema=schema)
    engine.add_connector(conn)  # no table: created from the decoded schema
    engine.start()
    wait_rows(engine, "p", len(rows))
    table = engine.get_table("p").to_arrow()
    assert table.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert sorted(table.select(["id", "name", "at"]).to_pylist(), key=lambda r: r["id"]) == rows


def test_registry_basic_auth_from_options_or_url(kafka_broker, make_engine):
    secured = Registry(user="svc", password="s3cr:t")
    try:
        schema = {"type": "record", "name": "A", "fields": [{"name": "id", "type": "long"}]}
        sid = secured.register("a-value", schema)
        topic = unique("avro-auth")
        kafka_broker.create_topic(topic, 1)
        kafka_broker.produce(topic, [framed(sid, schema, {"id": i}) for i in range(5)])
        reader = pa.schema([("id", pa.int64())])
        engine, _ = read_into_table(make_engine, kafka_broker, topic, reader, 5,
                                    schema_registry_url=secured.url, schema_registry_user="svc",
                                    schema_registry_password="s3cr:t")
        assert engine.get_table("t").num_rows == 5
        url = secured.url.replace("http://", "http://svc:s3cr%3At@")
        engine2, _ = read_into_table(make_engine, kafka_broker, topic, reader, 5, schema_registry_url=url)
        assert engine2.get_table("t").num_rows == 5
        # Wrong credentials: the registry answers 401, a transient error (the
        # messages are retried, nothing is rejected or lost).
        engine3 = make_engine(trigger_interval_ms=20, metrics_path=None)
        engine3.register_table("t", schema=reader)
        conn3 = KafkaConnector("t", topic, consumer_config(kafka_broker, unique("g")), start="earliest",
                               format="avro", schema_registry_url=secured.url,
                               schema_registry_user="svc", schema_registry_password="wrong")
        engine3.add_connector(conn3)
        engine3.start()
        time.sleep(1.5)
        assert engine3.get_table("t").num_rows == 0
        assert conn3.stats()["rejected_records"] == 0 and conn3.stats()["errors"] > 0
    finally:
        secured.close()


def test_avro_options_are_checked():
    with pytest.raises(ValueError, match="exactly one of schema_registry_url"):
        KafkaConnector("t", "x", {"bootstrap.servers": "127.0.0.1:1"}, format="avro")
    with pytest.raises(ValueError, match="avro_schema"):
        KafkaConnector("t", "x", {"bootstrap.servers": "127.0.0.1:1"}, format="avro",
                       avro_schema='{"type": "nope"}')
    with pytest.raises(ValueError, match="format"):
        KafkaConnector("t", "x", {"bootstrap.servers": "127.0.0.1:1"}, format="xml")


# ---- the Kafka sink writes Avro -------------------------------------------------------


def read_topic(broker, topic: str, partitions: int, timeout: float = 60.0) -> list:
    """[(key, value)] of every message of `topic`, read to the end of each partition."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": unique("reader"),
                         "enable.auto.commit": False, "enable.partition.eof": True, "log_level": 0})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out, eof = [], set()
    deadline = time.monotonic() + timeout
    while len(eof) < partitions and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
            continue
        out.append((m.key(), m.value()))
    consumer.close()
    assert len(eof) == partitions
    return out


def test_kafka_sink_writes_avro_that_fastavro_reads_back(kafka_broker, make_engine, registry):
    from rills.sinks import KafkaSink

    rng = random.Random(7)
    topic = unique("avro-sink")
    kafka_broker.create_topic(topic, 2)
    schema = pa.schema([
        ("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()), ("n", pa.int32()),
        ("ok", pa.bool_()), ("price", pa.decimal128(10, 3)), ("day", pa.date32()),
        ("at", pa.timestamp("us", tz="UTC")), ("tags", pa.list_(pa.string())),
        ("attrs", pa.map_(pa.string(), pa.int64())), ("pos", pa.struct([("x", pa.float32())])),
        ("blob", pa.binary())])
    engine = make_engine(trigger_interval_ms=20, metrics_path=None)
    table = engine.register_table("acct", schema=schema, mode="snapshot", primary_key="id")
    sink = KafkaSink("acct_out", "acct", topic, {"bootstrap.servers": kafka_broker.bootstrap_servers},
                     format="avro", mode="upsert", schema_registry_url=registry.url,
                     interval_seconds=0.05)
    engine.add_sink(sink)
    rows = []
    for i in range(200):
        rows.append({
            "id": i, "name": rng.choice(WORDS) if rng.random() < 0.9 else None,
            "amount": None if rng.random() < 0.2 else rng.uniform(-1e6, 1e6),
            "n": rng.randint(-2**31, 2**31 - 1), "ok": rng.random() < 0.5,
            "price": decimal.Decimal(rng.randint(-10**9, 10**9)).scaleb(-3),
            "day": dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-20000, 20000)),
            "at": EPOCH + dt.timedelta(microseconds=rng.randint(-10**15, 4 * 10**15)),
            "tags": [rng.choice(WORDS) for _ in range(rng.randint(0, 3))],
            "attrs": [(f"k{j}", rng.randint(-5, 5)) for j in range(rng.randint(0, 3))],
            "pos": None if rng.random() < 0.2 else
            {"x": struct.unpack("f", struct.pack("f", rng.uniform(-1, 1)))[0]},
            "blob": rng.randbytes(rng.randint(0, 8)),
        })
    table.upsert(pa.Table.from_pylist(rows, schema=schema))
    sink.flush(60)
    assert sink.stats()["errors"] == 0, sink.stats()
    assert list(registry.subjects) == [f"{topic}-value"]
    messages = read_topic(kafka_broker, topic, 2)
    assert len(messages) == len(rows)
    got = []
    for key, value in messages:
        record = unframe(value, registry.schemas)
        assert json.loads(key) == {"id": record["id"]}
        assert isinstance(record.pop("z_insert_ts"), float)  # the table's own columns too
        assert isinstance(record.pop("z_update_ts"), float)
        got.append(record)
    want = []
    for r in rows:
        w = dict(r)
        w["attrs"] = dict(r["attrs"])
        want.append(w)
    got = sorted(got, key=lambda r: r["id"])
    for g, w in zip(got, want):
        assert g == w
    # Rill reads its own Avro back through the registry.
    engine2, _ = read_into_table(make_engine, kafka_broker, topic, schema, len(rows),
                                 schema_registry_url=registry.url)
    back = sorted(engine2.get_table("t").to_arrow().select(schema.names).to_pylist(), key=lambda r: r["id"])
    assert back == sorted(rows, key=lambda r: r["id"])


# ---- HTTP ingest of Avro object container files ---------------------------------------


def test_http_ingest_of_avro_container_files(tmp_path):
    import http.client

    from rills import RillEngine

    token = "avro-token"
    engine = RillEngine(trigger_interval_ms=50, quack_address="quack:127.0.0.1:0", quack_token=token,
                        metrics_path=str(tmp_path / "m.db"))
    reader = pa.schema([("id", pa.int64()), ("user", pa.string()), ("amount", pa.float64()),
                        ("missing", pa.string())])
    engine.register_table("ev", schema=reader)
    engine.start()
    try:
        host, _, port = engine.quack_address[len("quack:"):].rpartition(":")

        def post(body, content_type="application/vnd.apache.avro+binary"):
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            conn.request("POST", "/api/v1/ingest/ev?wait=true", body=body,
                         headers={"Content-Type": content_type, "Authorization": f"Bearer {token}"})
            resp = conn.getresponse()
            payload = json.loads(resp.read() or b"{}")
            conn.close()
            return resp.status, payload

        schema = {"type": "record", "name": "E", "fields": [
            {"name": "id", "type": "int"}, {"name": "user", "type": "string"},
            {"name": "amount", "type": ["null", "float"]}, {"name": "extra", "type": "bytes"}]}
        rng = random.Random(3)
        rows = [{"id": i, "user": rng.choice(WORDS), "amount": None if i % 5 == 0 else i / 8,
                 "extra": b"x"} for i in range(300)]
        for codec in ("null", "deflate"):
            out = io.BytesIO()
            fastavro.writer(out, fastavro.parse_schema(schema), rows[:150] if codec == "null" else rows[150:],
                            codec=codec, sync_interval=1000)
            status, payload = post(out.getvalue())
            assert status == 200, payload
            assert payload["accepted"] == 150 and payload["rejected"] == 0, payload
        got = engine.query_sql("SELECT id, \"user\", amount, missing FROM ev ORDER BY id").to_pylist()
        assert got == [{"id": r["id"], "user": r["user"], "amount": r["amount"], "missing": None}
                       for r in rows]
        # Confluent-framed records need the server's schema_registry_url.
        status, payload = post(framed(1, schema, rows[0]))
        assert status == 400 and "schema_registry_url" in payload["message"]
        # A corrupt block: its records are rejected (rill_rejects), the others kept.
        out = io.BytesIO()
        fastavro.writer(out, fastavro.parse_schema(schema),
                        [{**r, "id": r["id"] + 1000} for r in rows[:40]], codec="null", sync_interval=200)
        data = bytearray(out.getvalue())
        assert data[-18:-16] == b"\x02x"  # the last record's `extra`: length 1, "x"; then the sync
        data[-18] = 0x7F  # a negative length
        status, payload = post(bytes(data))
        assert status == 200 and (payload["accepted"], payload["rejected"]) == (39, 1), payload
        assert payload["errors"][0]["error"].startswith("field 'extra': negative length at byte ")
        rejects = engine.query_sql("SELECT position, reason FROM rill_rejects").to_pylist()
        assert [r["position"] for r in rejects] == [payload["errors"][0]["position"]]
    finally:
        engine.close()
