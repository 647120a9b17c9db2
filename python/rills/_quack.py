"""The engine's network server (the seed's "Quack server"): start, stop, address.

RillEngine calls start_server() from start() and stop_server() from stop().
The server itself is C++ (rill::server::Server, owned by the engine core).
"""

import logging
import os
import threading
from typing import Any, Optional

from . import _core

_log = logging.getLogger("rills.server")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9494

#: When set, this listen address ("HOST:PORT") replaces the one the code asks
#: for (e.g. to keep a test suite on 127.0.0.1 with free ports).
LISTEN_OVERRIDE_ENV = "RILLS_QUACK_LISTEN"


def _split(address: str):
    text = address[len("quack:"):] if address.startswith("quack:") else address
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(
            f"quack_address must be 'quack:HOST:PORT' or 'HOST:PORT', got {address!r}")
    return host, port


def listen_address(quack_address: Optional[str], quack_port: Optional[int]) -> str:
    """Return the HOST:PORT to listen on: the port from quack_port (if given), the
    host from quack_address (else 127.0.0.1)."""
    override = os.environ.get(LISTEN_OVERRIDE_ENV)
    if override:
        return override
    host, port = DEFAULT_HOST, str(DEFAULT_PORT)
    if quack_address:
        host, port = _split(quack_address)
    if quack_port is not None:
        port = str(int(quack_port))
    return f"{host}:{port}"


def wants_server(engine: Any) -> bool:
    return (engine._quack_listen is not None or engine._quack_port is not None
            or engine._quack_token_arg is not None)


def toolkit(engine: Any) -> Any:
    """The engine's toolkit (_core.Toolkit: queues and analytics), made on first
    use; its server serves it, and engine.queue_manager is over it."""
    kit = getattr(engine, "_toolkit", None)
    if kit is None:
        kit = engine._toolkit = _core.Toolkit()
    return kit


def start_server(engine: Any) -> None:
    """Serve `engine` if it was given a quack address, port or token; print the
    address, the token and the dashboard URL once."""
    if not wants_server(engine) or engine._core.closed:
        return
    if _core.server_info(engine._core) is not None:
        return
    # A restart reuses the bound address (port 0 picks a port once).
    listen = engine._quack_bound or listen_address(engine._quack_listen, engine._quack_port)
    info = _core.serve(engine._core, listen, engine._quack_token_arg,
                       getattr(engine, "_allow_private_webhooks", False),
                       toolkit=toolkit(engine))
    engine._quack_bound = info["address"]
    engine.quack_address = "quack:" + info["address"]
    engine.quack_token = info["token"]
    engine.dashboard_url = info["dashboard_url"]
    if not engine._quack_announced:
        engine._quack_announced = True
        auth = f"token: {info['token']}" if info["token"] else "no authentication (loopback only)"
        print(f"Rill server on quack:{info['address']}  {auth}  dashboard: "
              f"{info['dashboard_url']}", flush=True)
    _log.info("serving on %s", info["address"])
    _start_watch(engine)


def _start_watch(engine: Any) -> None:
    """Start engine._quack_thread: a Python thread that lives as long as the
    server (the seed's attribute) and logs once if the server stops on its own
    (the C++ server runs on its own threads)."""
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(1.0):
            if engine._core.closed or _core.server_info(engine._core) is None:
                _log.warning("the server on %s is no longer running", engine._quack_bound)
                return

    engine._quack_stop = stop
    engine._quack_thread = threading.Thread(target=watch, name="rill-quack-watch", daemon=True)
    engine._quack_thread.start()


def stop_server(engine: Any) -> None:
    """Stop the engine's server, closing its connections (no-op if none)."""
    thread = engine._quack_thread
    if thread is not None:
        engine._quack_stop.set()
        if thread is not threading.current_thread():
            thread.join()
        engine._quack_thread = None
    if not engine._core.closed:
        _core.stop_serving(engine._core)


def init(engine: Any, quack_address: Optional[str], quack_token: Optional[str]) -> None:
    """Record the constructor's arguments (checked here, used by start())."""
    if quack_address is not None:
        _split(quack_address)
    engine.quack_address = quack_address
    engine.quack_token = quack_token
    engine.dashboard_url = None
    engine._quack_listen = quack_address
    engine._quack_port = None
    engine._quack_token_arg = quack_token
    engine._quack_announced = False
    engine._quack_bound = None
    engine._quack_thread = None  # while serving: see _start_watch
    engine._quack_stop = None


def on_start(engine: Any, quack_port: Optional[int], quack_token: Optional[str]) -> None:
    """Apply engine.start()'s quack_port / quack_token."""
    if quack_port is not None:
        if not 0 <= int(quack_port) <= 65535:
            raise ValueError(f"quack_port must be 0-65535, got {quack_port!r}")
        if engine._quack_port != int(quack_port):
            engine._quack_bound = None  # a new port was asked for
        engine._quack_port = int(quack_port)
    if quack_token is not None:
        engine._quack_token_arg = quack_token
