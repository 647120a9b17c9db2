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
