"""Shared fixtures for the rills tests."""

import pytest

import rills


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
    import os

    import kafka_broker as kb

    reason = kb.missing_requirements()
    if reason:
        message = f"real Kafka broker unavailable: {reason}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    broker = kb.KafkaBroker(tmp_path_factory.mktemp("kafka-broker"))
    try:
        broker.start()
    except Exception as error:
        broker.stop()
        pytest.fail(f"the Kafka broker did not start: {error}", pytrace=False)
    _kafka_users["broker"] = broker
    yield broker
    broker.stop(timeout=10)


_kafka_users = {}  # "last": the last collected test using the broker; "broker": it


def pytest_collection_modifyitems(session, config, items):
    users = [item for item in items if "kafka_broker" in getattr(item, "fixturenames", ())]
    if users:
        _kafka_users["last"] = users[-1]


def pytest_runtest_teardown(item, nextitem):
    """Stop the broker right after the last test that uses it (not at session
    end): the later tests do not share the machine with an idle JVM."""
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
