"""Seed calls that reach into a connector without an engine, the metrics row's
seed column names, and the seed's private attributes that its own tests read
(engine._quack_thread, TableJoinTask._last_processed_rows)."""
import threading
import time

import pyarrow as pa

from rills import FileStreamConnector, MemoryConnector, RetentionPolicy, RillEngine, TableJoinTask


def test_file_connector_read_batch_without_an_engine(tmp_path):
    data = tmp_path / "stream_data"
    data.mkdir()
    conn = FileStreamConnector(target_table="file_tbl", watch_path=data, file_pattern="*.json",
                               delete_after_process=False)
    assert conn.read_batch() is None
    (data / "event1.json").write_text('{"event": "login", "user": "alice"}\n'
                                      '{"event": "logout", "user": "alice"}\n')
    table = conn.read_batch()
    assert table is not None and table.num_rows == 2
    assert table.column("event").to_pylist() == ["login", "logout"]
    assert conn.read_batch() is None  # event1.json is remembered as read
    (data / "event2.json").write_text('{"event": "buy", "user": "bob"}\n')
    (data / "skip.txt").write_text('{"event": "not matched", "user": "x"}\n')
    table = conn.read_batch()
    assert table.column("user").to_pylist() == ["bob"]
    assert sorted(conn.processed_files()) == ["event1.json", "event2.json"]
    assert (data / "event1.json").exists()  # delete_after_process=False


def test_file_connector_read_batch_can_delete_what_it_read(tmp_path):
    (tmp_path / "a.ndjson").write_text('{"x": 1}\n{"x": 2}\n')
    conn = FileStreamConnector(target_table="t", watch_path=tmp_path, file_pattern="*.ndjson",
                               delete_after_process=True)
    assert conn.read_batch().column("x").to_pylist() == [1, 2]
    assert not (tmp_path / "a.ndjson").exists()


def test_metrics_row_carries_the_seed_pyarrow_columns():
    engine = RillEngine(trigger_interval_ms=50, metrics_path=None)
    keep = pa.array(range(100_000))  # some Arrow memory in use
    engine.step()
    row = engine.query_sql("SELECT * FROM rill_metrics").to_pylist()
    assert len(row) == 1
    row = row[0]
    for name in ("timestamp", "cpu_usage", "total_memory", "pyarrow_allocated_bytes",
                 "pyarrow_max_memory", "business_metrics"):
        assert name in row
    assert row["pyarrow_allocated_bytes"] == row["arrow_allocated_bytes"]
    assert row["pyarrow_max_memory"] == row["arrow_peak_allocated_bytes"]
    # pyarrow's own allocations show: the array kept above is counted.
    assert row["pyarrow_max_memory"] >= row["pyarrow_allocated_bytes"] >= keep.nbytes


def test_quack_thread_lives_as_long_as_the_server():
    engine = RillEngine(quack_address="quack:127.0.0.1:0", metrics_path=None)
    assert engine._quack_thread is None
    engine.start()
    try:
        time.sleep(0.2)
        assert isinstance(engine._quack_thread, threading.Thread)
        assert engine._quack_thread.is_alive()
        thread = engine._quack_thread
    finally:
        engine.stop()
    assert engine._quack_thread is None
    assert not thread.is_alive()
    engine.close()


def test_incremental_join_task_counts_the_left_rows_it_covered():
    engine = RillEngine(trigger_interval_ms=10.0, metrics_path=None)
    engine.register_table("orders", mode="append", retention_policy=RetentionPolicy(max_rows=1000))
    engine.register_table("profiles", mode="snapshot", primary_key="user_id")
    orders, profiles = MemoryConnector("orders"), MemoryConnector("profiles")
    engine.add_connector(orders)
    engine.add_connector(profiles)
    task = TableJoinTask(name="join_profiles", left_table="orders", right_table="profiles",
                         keys="user_id", output_table="enriched_orders", join_type="inner",
                         incremental=True)
    engine.join_tasks.append(task)
    assert task._last_processed_rows == 0
    profiles.push({"user_id": [101, 102], "country": ["USA", "UK"]})
    orders.push({"order_id": [1, 2], "user_id": [101, 102], "amount": [100.0, 200.0]})
    engine.step()
    assert engine.get_table("enriched_orders").to_arrow().num_rows == 2
    assert task._last_processed_rows == 2
    orders.push({"order_id": [3, 4], "user_id": [101, 999], "amount": [300.0, 1.0]})
    engine.step()
    enriched = engine.get_table("enriched_orders").to_arrow()
    assert [r["country"] for r in enriched.to_pylist()] == ["USA", "UK", "USA"]
    assert task._last_processed_rows == 4  # the unmatched order 4 was covered too
    full = TableJoinTask(name="full", left_table="orders", right_table="profiles",
                         keys="user_id", output_table="full_out")
    engine.join_tasks.append(full)
    engine.step()
    assert full._last_processed_rows == 0  # not incremental: the seed keeps no counter
