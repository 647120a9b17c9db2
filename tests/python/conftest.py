"""Shared fixtures for the rills tests."""

import pytest

import rills


@pytest.fixture
def engine():
    """An engine (not started) that is closed after the test."""
    eng = rills.RillEngine(trigger_interval_ms=50)
    yield eng
    eng.close()


def rows_by(table, key):
    """Return {row[key]: row} of a pyarrow Table."""
    return {row[key]: row for row in table.to_pylist()}


@pytest.fixture(autouse=True)
def _quack_on_loopback(monkeypatch):
    """Engines that serve (quack_address / quack_port) listen on 127.0.0.1 with a
    free port during tests, whatever address the code under test asks for."""
    if "RILLS_QUACK_LISTEN" not in __import__("os").environ:
        monkeypatch.setenv("RILLS_QUACK_LISTEN", "127.0.0.1:0")
