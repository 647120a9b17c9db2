"""Shared fixtures for the rills tests."""

import importlib
import os
import sys

import pytest

import rills


# ---- Missing dependencies: skipped locally, failed under CI=true -----------------------
# .ci/run exports CI=true: on the CI machine every dependency (Kafka, psql, pgjdbc,
# chromium + Playwright, websockets, pandas, the built `rill` binary, ...) must be
# there, so a test that would skip for lack of one fails instead.


def under_ci():
    """True when the environment says CI=true (.ci/run sets it)."""
    return os.environ.get("CI", "").strip().lower() == "true"


def require(reason):
    """A dependency of the calling test is missing (`reason` says which): skip the
    test (or the module, at import time), or fail it under CI=true."""
    if under_ci():
        pytest.fail(f"missing dependency under CI=true: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


class _MissingModule:
    """Stands for a module that could not be imported, so that a test module still
    imports under CI=true and each of its tests fails (rather than the whole run
    stopping at a collection error)."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        return _MissingModule(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise ImportError(f"{self._name} is not installed")


def require_module(name, reason=None):
    """Import and return module `name`; require(...) when it cannot be imported.
    At a test module's top level under CI=true, return a stand-in and make every
    test of that module fail instead."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        reason = reason or f"the Python module {name} is not installed ({error})"
        caller = sys._getframe(1)
        if under_ci() and caller.f_code.co_name == "<module>":
            caller.f_globals.setdefault("_rill_missing", []).append(reason)
            return _MissingModule(name)
        require(reason)


def requires(missing, reason):
    """A mark for a test or module: when `missing` is true, require(reason) before
    the test runs (skip, or fail under CI=true)."""
    return pytest.mark.rill_requires(missing=bool(missing), reason=reason)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "rill_requires(missing, reason): a dependency check (conftest.requires)")


def pytest_runtest_setup(item):
    for reason in getattr(item.module, "_rill_missing", ()):
        require(reason)
    for mark in item.iter_markers("rill_requires"):
        if mark.kwargs.get("missing"):
            require(mark.kwargs.get("reason", "a dependency is missing"))


@pytest.fixture
def engine():
    """An engine (not started) that is closed after the test."""
    eng = rills.RillEngine(trigger_interval_ms=50)
    yield eng
    eng.close()


@pytest.fixture
def make_engine():
    """make_engine(**kwargs) builds a RillEngine; every engine it built is stopped
    and closed after the test, also when the test fails, so no loop thread outlives it."""
    engines = []

    def make(**kwargs):
        eng = rills.RillEngine(**kwargs)
        engines.append(eng)
        return eng

    yield make
    for eng in engines:
        eng.close()  # stops the loop first; closing twice is fine


@pytest.fixture
def running_engine(make_engine):
    """A started engine (10 ms ticks), stopped and closed after the test."""
    eng = make_engine(trigger_interval_ms=10, metrics_path=None)
    eng.start()
    return eng


def wait_until(predicate, timeout=10.0, what="condition"):
    """Poll `predicate` until it is true; fail the test after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def rows_by(table, key):
    """Return {row[key]: row} of a pyarrow Table."""
    return {row[key]: row for row in table.to_pylist()}


@pytest.fixture(autouse=True)
def _quack_on_loopback(monkeypatch):
    """Engines that serve (quack_address / quack_port) listen on 127.0.0.1 with a
    free port during tests, whatever address the code under test asks for."""
    if "RILLS_QUACK_LISTEN" not in __import__("os").environ:
        monkeypatch.setenv("RILLS_QUACK_LISTEN", "127.0.0.1:0")


# ---- A real Kafka broker (tests/python/kafka_broker.py) -------------------------------
# One Kafka 4.4 KRaft broker on 127.0.0.1 for the whole session, started by the
# first test that asks for `kafka_broker`. Without Java, the jars
# (scripts/fetch-kafka) or confluent-kafka: skipped, or failed under CI=true.


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    import kafka_broker as kb

    reason = kb.missing_requirements()
    if reason:
        require(f"real Kafka broker unavailable: {reason}")
    broker = kb.KafkaBroker(tmp_path_factory.mktemp("kafka-broker"))
    try:
        broker.start()
    except Exception as error:
        broker.stop()
        pytest.fail(f"the Kafka broker did not start: {error}", pytrace=False)
    _kafka_users["broker"] = broker
    yield broker
    broker.stop(timeout=10)


# ---- A real PostgreSQL server (tests/python/pg_server.py) ---------------------------------
# One PostgreSQL 15 on 127.0.0.1 (initdb into a temporary directory, wal_level=logical) for
# the whole session, started by the first test that asks for `postgres_server`, stopped at
# session end. Without Debian's postgresql or psycopg: skipped, or failed under CI=true.


@pytest.fixture(scope="session")
def postgres_server():
    import pg_server

    reason = pg_server.missing_requirements()
    if reason:
        require(f"PostgreSQL server unavailable: {reason}")
    server = pg_server.PostgresServer()
    try:
        server.start()
    except Exception as error:
        server.close()
        pytest.fail(f"the PostgreSQL server did not start: {error}", pytrace=False)
    yield server
    server.close()


_kafka_users = {}  # "last": the last collected test using the broker; "broker": it


def pytest_collection_modifyitems(session, config, items):
    users = [item for item in items if "kafka_broker" in getattr(item, "fixturenames", ())]
    if users:
        _kafka_users["last"] = users[-1]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Stop the broker right after the last test that uses it (not at session
    end): the later tests do not share the machine with an idle JVM. After that
    test's own fixtures are torn down (the wrapper's second half): a `rill serve`
    still consuming from the broker waited ~36 s in its Kafka close when the
    broker went first (46 s of teardown in CI)."""
    yield
    broker = _kafka_users.get("broker")
    if broker is not None and item is _kafka_users.get("last"):
        broker.stop(timeout=10)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that used the broker shows the broker's log tail."""
    outcome = yield
    report = outcome.get_result()
    broker = getattr(item, "funcargs", {}).get("kafka_broker")
    if report.failed and broker is not None:
        report.sections.append(("Kafka broker log (tail)", broker.log_tail()))
