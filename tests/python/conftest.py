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
