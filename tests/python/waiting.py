"""Waiting helpers shared by the connector tests."""
import time


def wait_rows(engine, table: str, n: int, timeout: float = 60.0) -> int:
    """Wait until `table` holds at least n rows; return the count (fails on timeout)."""
    deadline = time.monotonic() + timeout
    got = 0
    while time.monotonic() < deadline:
        try:
            got = engine.get_table(table).num_rows
        except Exception:  # a table without schema appears with its first rows
            got = 0
        if got >= n:
            return got
        time.sleep(0.02)
    raise AssertionError(f"{table}: {got} rows after {timeout} s, expected {n}")
