"""WebSocketConnector against a Python `websockets` server on 127.0.0.1 that
sends NDJSON text frames and Arrow IPC binary frames, then goes away and comes
back on the same port: the C++ client reconnects (backoff from 1 s) and counts it."""

import asyncio
import io
import json
import socket
import threading
import time

import pyarrow as pa
import pyarrow.ipc
import pytest

from rills import RillEngine, schema
from rills.connectors.websocket import WebSocketConnector
from conftest import require, require_module

websockets = require_module("websockets")
serve = require_module("websockets.asyncio.server").serve

SCHEMA = [("id", pa.int64()), ("name", pa.string()), ("v", pa.float64())]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A websockets server in its own thread; each connection gets `frames`."""

    def __init__(self, port, frames, headers_seen=None, ssl_context=None):
        self.port, self.frames, self.headers_seen = port, frames, headers_seen
        self.ssl_context = ssl_context
        self.connections = 0
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    async def _handler(self, ws):
        self.connections += 1
        if self.headers_seen is not None:
            self.headers_seen.append(ws.request.headers.get("X-Token"))
        for frame in self.frames:
            await ws.send(frame)
        await ws.wait_closed()  # keep the connection open until stopped

    def _run(self):
        asyncio.set_event_loop(self.loop)

        async def main():
            self.stop_event = asyncio.Event()
            async with serve(self._handler, "127.0.0.1", self.port, ssl=self.ssl_context):
                self.ready.set()
                await self.stop_event.wait()

        self.loop.run_until_complete(main())

    def stop(self):
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(10)


def ndjson(begin, end):
    return "\n".join(json.dumps({"id": i, "name": f"w{i}", "v": i / 2}) for i in range(begin, end))


def ipc(begin, end):
    table = pa.table({"id": pa.array(range(begin, end), pa.int64()),
                      "name": [f"b{i}" for i in range(begin, end)],
                      "v": [float(i) for i in range(begin, end)]})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


def wait_for(cond, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_text_and_binary_frames_reconnect_after_the_server_drops():
    port = free_port()
    seen = []
    first = Server(port, [ndjson(0, 10), ipc(10, 20), '{"id": "bad"}\n' + ndjson(20, 21)],
                   headers_seen=seen)
    eng = RillEngine(trigger_interval_ms=50)
    eng.register_table("ws", schema=schema(SCHEMA, primary_key="id", mode="snapshot"))
    conn = WebSocketConnector("ws", f"ws://127.0.0.1:{port}/feed", headers={"X-Token": "abc"})
    eng.add_connector(conn)
    eng.start()
    try:
        assert wait_for(lambda: eng.get_table("ws").num_rows == 21)
        assert conn.connected and seen == ["abc"]
        first.stop()  # the server goes away
        assert wait_for(lambda: not conn.connected)
        time.sleep(1.5)  # the client retries (1 s, then 2 s) while nobody listens
        second = Server(port, [ndjson(21, 40)])
        try:
            assert wait_for(lambda: eng.get_table("ws").num_rows == 40, timeout=30)
            stats = conn.stats()
            assert stats["reconnects"] >= 1 and stats["errors"] >= 1
            assert stats["rejected_records"] == 1 and stats["parsed_records"] == 40
            assert second.connections == 1
        finally:
            second.stop()
        rows = eng.query_sql("SELECT id, name, v FROM ws ORDER BY id").to_pylist()
        assert [r["id"] for r in rows] == list(range(40))
        assert rows[15] == {"id": 15, "name": "b15", "v": 15.0}
        assert rows[30] == {"id": 30, "name": "w30", "v": 15.0}
        assert wait_for(lambda: len(eng.query_sql("SELECT * FROM rill_rejects")) >= 1)
        reject = eng.query_sql("SELECT * FROM rill_rejects").to_pylist()[0]
        assert "message 3" in json.dumps(reject, default=str)
    finally:
        eng.close()


def test_wss_verifies_the_server_certificate(tmp_path):
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        require("the openssl command is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    port = free_port()
    server = Server(port, [ndjson(0, 5)], ssl_context=context)
    eng = RillEngine(trigger_interval_ms=50)
    eng.register_table("ws", schema=schema(SCHEMA, primary_key="id", mode="snapshot"))
    trusted = WebSocketConnector("ws", f"wss://localhost:{port}/", ca_file=str(cert), name="ok")
    untrusted = WebSocketConnector("ws", f"wss://localhost:{port}/", name="no_ca",
                                   reconnect_initial_seconds=0.2)
    eng.add_connector(trusted)
    eng.add_connector(untrusted)
    eng.start()
    try:
        assert wait_for(lambda: eng.get_table("ws").num_rows == 5)
        assert trusted.connected
        # Without the CA the handshake fails verification and is retried, never accepted.
        assert wait_for(lambda: untrusted.stats()["errors"] >= 2)
        assert not untrusted.connected and "certificate" in untrusted.last_error.lower()
        assert untrusted.stats()["parsed_records"] == 0
    finally:
        eng.close()
        server.stop()


def test_bad_uri_is_a_clear_error():
    with pytest.raises(ValueError, match="ws:// or wss://"):
        WebSocketConnector("t", "http://127.0.0.1:1/")
