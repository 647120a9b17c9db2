"""HTTP and WebSocket ingest (POST /api/v1/ingest/{table}, the `ingest` message
of /api/v1/stream) over real sockets on 127.0.0.1. The bodies are written by
pyarrow (IPC, CSV) and the stdlib (json, gzip); pyarrow's JSON reader decodes the
same NDJSON as the oracle for what lands in the table."""

import asyncio
import gzip
import http.client
import io
import json
import socket
import time

import pyarrow as pa
import pyarrow.csv
import pyarrow.ipc
import pyarrow.json
import pytest

from rills import JSONStreamConnector, RillEngine, schema
from conftest import require_module, wait_until

TOKEN = "ingest-token"
SCHEMA = [("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()),
          ("ok", pa.bool_())]


def host_port(engine):
    host, _, port = engine.quack_address[len("quack:"):].rpartition(":")
    return host, int(port)


def post(engine, path, body, content_type="application/x-ndjson", token=TOKEN, headers=None):
    host, port = host_port(engine)
    conn = http.client.HTTPConnection(host, port, timeout=60)
    hdrs = {"Content-Type": content_type, **(headers or {})}
    if token:
        hdrs["Authorization"] = f"Bearer {token}"
    conn.request("POST", path, body=body, headers=hdrs)
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload


def rows_ndjson(begin, end):
    return "".join(json.dumps({"id": i, "name": f"n{i}\u00e9\"q", "amount": i * 0.25,
                               "ok": i % 2 == 0}) + "\n" for i in range(begin, end))


def table_rows(engine, table="events"):
    return engine.query_sql(f"SELECT id, name, amount, ok FROM {table} ORDER BY id")


@pytest.fixture
def served(tmp_path):
    eng = RillEngine(trigger_interval_ms=50, quack_address="quack:127.0.0.1:0",
                     quack_token=TOKEN, metrics_path=str(tmp_path / "m.db"))
    eng.register_table("events", schema=schema(SCHEMA, primary_key="id", mode="snapshot"))
    eng.start()
    yield eng
    eng.close()


def wait_rows(engine, n, table="events", timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if engine.get_table(table).num_rows >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"{table} has {engine.get_table(table).num_rows} rows, expected {n}")


def test_ndjson_is_buffered_with_202_and_matches_pyarrows_reader(served):
    body = rows_ndjson(0, 500)
    status, _, payload = post(served, "/api/v1/ingest/events", body)
    reply = json.loads(payload)
    assert status == 202, payload
    assert reply["accepted"] == 500 and reply["rejected"] == 0 and reply["records"] == 500
    assert reply["connector"] == "http:events" and reply["published"] is False
    wait_rows(served, 500)
    expected = pa.json.read_json(io.BytesIO(body.encode()))
    got = table_rows(served)
    assert got.to_pylist() == expected.select(["id", "name", "amount", "ok"]).to_pylist()


def test_wait_true_answers_200_after_the_tick_published(served):
    status, _, payload = post(served, "/api/v1/ingest/events?wait=true", rows_ndjson(0, 300))
    reply = json.loads(payload)
    assert status == 200, payload
    assert reply["published"] is True and reply["accepted"] == 300
    # Published: visible to SQL at once, without waiting.
    assert served.query_sql("SELECT count(*) AS n FROM events").column("n")[0].as_py() == 300


def test_bad_lines_are_rejected_and_good_lines_kept(served):
    lines = [json.dumps({"id": 1, "name": "a", "amount": 1.0, "ok": True}),
             '{"id": 2, "name": "b", "amount": ',            # truncated
             json.dumps({"id": 3, "name": "c", "amount": 3.5, "ok": False}),
             json.dumps({"id": "not a number", "name": "d"}),  # wrong type
             json.dumps({"id": 5, "name": "e", "amount": 5.0, "ok": True})]
    status, _, payload = post(served, "/api/v1/ingest/events?wait=true", "\n".join(lines))
    reply = json.loads(payload)
    assert status == 200, payload
    assert (reply["records"], reply["accepted"], reply["rejected"]) == (5, 3, 2)
    assert len(reply["errors"]) == 2
    assert "line 2" in reply["errors"][0]["position"]
    assert "line 4" in reply["errors"][1]["position"]
    assert [r["id"] for r in table_rows(served).to_pylist()] == [1, 3, 5]
    deadline = time.time() + 10
    while time.time() < deadline:
        rejects = served.query_sql("SELECT * FROM rill_rejects").to_pylist()
        if len(rejects) >= 2:
            break
        time.sleep(0.05)
    text = json.dumps(rejects, default=str)
    assert "http:events" in text and "not a number" in text


def test_json_array_arrow_ipc_csv_and_gzip_bodies(served):
    array = json.dumps([{"id": i, "name": f"a{i}", "amount": i * 1.0, "ok": True}
                        for i in range(0, 10)])
    assert post(served, "/api/v1/ingest/events?wait=true", array,
                content_type="application/json")[0] == 200

    ipc_table = pa.table({"id": pa.array(range(10, 20), pa.int64()),
                          "name": [f"i{i}" for i in range(10, 20)],
                          "amount": [i * 2.0 for i in range(10, 20)],
                          "ok": [False] * 10})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, ipc_table.schema) as writer:
        writer.write_table(ipc_table, max_chunksize=3)
    status, _, payload = post(served, "/api/v1/ingest/events?wait=true", sink.getvalue(),
                              content_type="application/vnd.apache.arrow.stream")
    assert status == 200 and json.loads(payload)["accepted"] == 10, payload

    csv_table = pa.table({"id": list(range(20, 30)), "name": [f"c{i}" for i in range(20, 30)],
                          "amount": [i + 0.5 for i in range(20, 30)], "ok": [True] * 10})
    csv_sink = io.BytesIO()
    pa.csv.write_csv(csv_table, csv_sink)
    status, _, payload = post(served, "/api/v1/ingest/events?wait=true", csv_sink.getvalue(),
                              content_type="text/csv")
    assert status == 200 and json.loads(payload)["accepted"] == 10, payload

    gz = gzip.compress(rows_ndjson(30, 2030).encode())
    status, _, payload = post(served, "/api/v1/ingest/events?wait=true", gz,
                              headers={"Content-Encoding": "gzip"})
    assert status == 200 and json.loads(payload)["accepted"] == 2000, payload

    got = table_rows(served).to_pylist()
    assert [r["id"] for r in got] == list(range(2030))
    assert got[15] == {"id": 15, "name": "i15", "amount": 30.0, "ok": False}
    assert got[25] == {"id": 25, "name": "c25", "amount": 25.5, "ok": True}


def test_error_statuses(served):
    assert post(served, "/api/v1/ingest/nope", rows_ndjson(0, 1))[0] == 404
    assert post(served, "/api/v1/ingest/events", rows_ndjson(0, 1), token=None)[0] == 401
    assert post(served, "/api/v1/ingest/events", rows_ndjson(0, 1), token="wrong")[0] == 401
    assert post(served, "/api/v1/ingest/events", "x", content_type="image/png")[0] == 415
    status, _, payload = post(served, "/api/v1/ingest/events", b"\x1f\x8b not gzip",
                              headers={"Content-Encoding": "gzip"})
    assert status == 400 and "gzip" in json.loads(payload)["message"]
    # Beyond max_body_bytes (16 MiB by default): refused from the headers on.
    host, port = host_port(served)
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /api/v1/ingest/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                  TOKEN.encode() + b"\r\nContent-Type: application/x-ndjson\r\n"
                  b"Content-Length: " + str(17 * 1024 * 1024).encode() + b"\r\n\r\n{\"id\": 1}")
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413") and b"max_body_bytes" in reply
    assert served.get_table("events").num_rows == 0


def test_full_buffer_under_on_overflow_error_answers_429_with_retry_after(tmp_path):
    eng = RillEngine(trigger_interval_ms=60000, quack_address="quack:127.0.0.1:0",
                     quack_token=TOKEN)
    eng.register_table("events", schema=schema(SCHEMA, primary_key="id", mode="snapshot"))
    conn = JSONStreamConnector(target_table="events", max_buffer_records=100,
                               on_overflow="error")
    eng.add_connector(conn)
    eng.start()
    try:
        # The loop's first tick runs at start; the next one is a minute away, so
        # nothing drains the buffer between the two pushes below.
        wait_until(lambda: eng.get_metrics()["ticks"] >= 1, what="the first tick")
        status, _, payload = post(eng, "/api/v1/ingest/events", rows_ndjson(0, 80))
        assert status == 202 and json.loads(payload)["accepted"] == 80
        status, headers, payload = post(eng, "/api/v1/ingest/events", rows_ndjson(80, 130))
        assert status == 429, payload
        assert int(headers["retry-after"]) >= 1
        assert "Buffer full" in json.loads(payload)["message"]
        stats = {c["connector"]: c for c in json.loads(
            get(eng, "/api/v1/telemetry/connectors"))["connectors"]}
        # The application's connector took the rows; the refusal is counted.
        assert stats[conn.name]["refused_records"] == 50
        assert stats[conn.name]["buffered_records"] == 80
    finally:
        eng.close()


def get(engine, path):
    host, port = host_port(engine)
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    assert resp.status == 200, body
    return body


def test_four_concurrent_clients_lose_nothing(served):
    import concurrent.futures

    def client(k):
        for j in range(10):
            begin = (k * 10 + j) * 100
            status, _, payload = post(served, "/api/v1/ingest/events", rows_ndjson(begin, begin + 100))
            assert status == 202, payload

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(client, range(4)))
    wait_rows(served, 4000)
    got = served.query_sql("SELECT count(*) AS n, count(DISTINCT id) AS d, sum(id) AS s "
                           "FROM events").to_pylist()[0]
    assert got == {"n": 4000, "d": 4000, "s": sum(range(4000))}


def test_websocket_ingest_messages_are_acknowledged_per_batch(served):
    websockets = require_module("websockets")
    host, port = host_port(served)

    async def run():
        uri = f"ws://{host}:{port}/api/v1/stream"
        async with websockets.connect(
                uri, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            hello = json.loads(await ws.recv())
            assert hello["type"] == "hello"
            await ws.send(json.dumps({"type": "ingest", "table": "events", "id": 1,
                                      "data": rows_ndjson(0, 50)}))
            await ws.send(json.dumps({"type": "ingest", "table": "events", "id": 2, "wait": True,
                                      "rows": [{"id": 50, "name": "r", "amount": 1.5, "ok": True},
                                               {"id": "bad"}]}))
            await ws.send(json.dumps({"type": "ingest", "table": "missing", "id": 3,
                                      "data": "{}"}))
            acks = {}
            while len(acks) < 3:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 20))
                if frame["type"] == "ingest_ack":
                    acks[frame["id"]] = frame
            return acks

    acks = asyncio.run(run())
    assert acks[1]["status"] == 202 and acks[1]["accepted"] == 50
    assert acks[2]["status"] == 200 and acks[2]["published"] is True
    assert (acks[2]["accepted"], acks[2]["rejected"]) == (1, 1)
    assert acks[3]["status"] == 404
    wait_rows(served, 51)  # ack 1 (202) may have been handled after ack 2 published
    assert served.query_sql("SELECT count(*) AS n FROM events").column("n")[0].as_py() == 51


def test_connector_counters_in_telemetry_prometheus_and_the_metrics_store(served):
    from prometheus_client.parser import text_string_to_metric_families

    body = rows_ndjson(0, 40) + '{"id": 41, "amount": [1,\n{"id": "x"}\n'
    status, _, payload = post(served, "/api/v1/ingest/events?wait=true", body)
    assert status == 200, payload
    stats = {c["connector"]: c for c in json.loads(
        get(served, "/api/v1/telemetry/connectors"))["connectors"]}["http:events"]
    assert (stats["received_records"], stats["parsed_records"], stats["rejected_records"]) == \
        (42, 40, 2)
    assert stats["received_bytes"] == len(body.encode()) and stats["drained_records"] == 40
    samples = {}
    for family in text_string_to_metric_families(get(served, "/metrics").decode()):
        for s in family.samples:
            if s.labels.get("connector") == "http:events":
                samples[s.name] = s.value
    assert samples["rill_connector_parsed_records_total"] == 40
    assert samples["rill_connector_rejected_records_total"] == 2
    assert samples["rill_connector_received_records_total"] == 42
    assert samples["rill_connector_buffered_rows"] == 0
    deadline = time.time() + 20
    rows = []
    while time.time() < deadline and not rows:
        rows = served.query_metrics(
            "SELECT parsed_records, rejected_records FROM rill_connector_stats "
            "WHERE connector = 'http:events' AND parsed_records = 40").to_pylist()
        time.sleep(0.1)
    assert rows and rows[-1] == {"parsed_records": 40, "rejected_records": 2}


def test_wait_true_counts_rows_drop_oldest_dropped_from_the_same_push(tmp_path):
    # Issue 23: a body larger than a drop_oldest buffer loses its oldest rows;
    # the reply used to say published with every row accepted.
    eng = RillEngine(trigger_interval_ms=20, quack_address="quack:127.0.0.1:0",
                     quack_token=TOKEN)
    eng.register_table("events", schema=schema(SCHEMA, primary_key="id", mode="snapshot"))
    conn = JSONStreamConnector(target_table="events", max_buffer_records=5,
                               on_overflow="drop_oldest", name="http:events")
    eng.add_connector(conn)
    eng.start()
    try:
        status, _, payload = post(eng, "/api/v1/ingest/events?wait=true", rows_ndjson(0, 8))
        reply = json.loads(payload)
        assert status == 200, reply
        assert (reply["records"], reply["accepted"], reply["dropped"]) == (8, 5, 3), reply
        assert reply["published"] is True  # every accepted row is in the table
        ids = [r["id"] for r in table_rows(eng).to_pylist()]
        assert ids == [3, 4, 5, 6, 7]
    finally:
        eng.close()


def test_ingest_into_system_tables_is_refused(served):
    forged = json.dumps({"connector": "kafka", "position": "p", "error": "forged",
                         "raw": "x"}) + "\n"
    for table in ("rill_rejects", "rill_alerts"):
        status, _, payload = post(served, f"/api/v1/ingest/{table}?wait=true", forged)
        reply = json.loads(payload)
        assert status == 403, reply
        assert reply["code"] == "Forbidden" and "system table" in reply["message"]
    assert served.query_sql("SELECT count(*) AS n FROM rill_rejects").column("n")[0].as_py() == 0
