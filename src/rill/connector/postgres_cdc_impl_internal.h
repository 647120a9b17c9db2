// PostgresCDCConnector's state, shared by its two files:
// postgres_cdc_connector.cc (the engine's side: Poll, positions, commits,
// stats) and postgres_cdc_reader.cc (the reader thread: libpq, snapshot,
// replication stream).
//
// Threads: the reader thread owns everything under "reader only"; `mu`
// guards the queue, the alerts, the stats and the target schema; the atomics
// are read and written by both sides.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/connector/postgres_cdc_connector.h"
#include "rill/connector/postgres_cdc_internal.h"

namespace rill {

/// Where a connector stands: a SavePosition document's content.
struct PgCdcPosition {
  bool snapshot_done = false;
  uint64_t lsn = 0;  ///< meaningful when snapshot_done
};

struct PostgresCDCConnector::Impl {
  /// One push of the reader: a whole transaction (or a snapshot chunk, or a
  /// position-only marker between transactions when `batches` is empty).
  struct Item {
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
    std::vector<RejectedRecord> rejects;
    int64_t rows = 0;
    PgCdcPosition position;  ///< where the connector stands after this item
  };

  PostgresCDCOptions options;
  std::string name;
  std::string publication;
  pgcdc_internal::NumericAs numeric_as = pgcdc_internal::NumericAs::kDecimal;

  // Guarded by mu ----------------------------------------------------------------
  mutable std::mutex mu;
  std::condition_variable room;  ///< signalled when Poll drains the queue
  std::deque<Item> queue;
  int64_t buffered_rows = 0;
  std::vector<Status> alerts;  ///< reported one per Poll
  ConnectorStats stats;
  std::shared_ptr<arrow::Schema> target_schema;
  std::optional<PgCdcPosition> restored;  ///< taken by the reader at its start

  // Tick thread --------------------------------------------------------------------
  PgCdcPosition polled;  ///< as of the last Poll
  std::vector<RejectedRecord> polled_rejects;

  // Reader only (kept across Stop/Start: a restart goes on from there) --------------
  std::optional<PgCdcPosition> reader_state;  ///< the end of what was queued
  /// The target may hold rows of this connector (restored from a checkpoint, or
  /// rows pushed): a new snapshot starts with a truncate row then.
  bool target_may_hold_rows = false;
  bool reader_failed = false;  ///< a session failed; the next stream is a reconnect

  // Both sides ---------------------------------------------------------------------
  std::atomic<uint64_t> confirm_target{0};  ///< what the slot may confirm
  std::atomic<bool> stop{false};
  std::atomic<bool> polled_once{false};
  std::thread thread;
  bool running = false;  // Start/Stop/RestorePosition only

  /// The reader thread's body (postgres_cdc_reader.cc).
  void Run();
  /// Queue `item`, waiting while the buffer is full (unless it is empty);
  /// false when stopping. `idle` runs every 100 ms while waiting. Reader.
  bool Push(Item item, const std::function<void()>& idle);
  /// Record `status` for the next Poll to report (the engine writes an alert).
  void Alert(Status status);
  void Count(int64_t ConnectorStats::*field, int64_t delta) {
    std::lock_guard<std::mutex> lock(mu);
    stats.*field += delta;
  }
  void Set(int64_t ConnectorStats::*field, int64_t value) {
    std::lock_guard<std::mutex> lock(mu);
    stats.*field = value;
  }
};

/// Encode / decode a position document ({"slot", "snapshot_done", "lsn"}).
std::string EncodePgCdcPosition(const std::string& slot, const PgCdcPosition& position);
Result<PgCdcPosition> DecodePgCdcPosition(std::string_view document, const std::string& slot);

}  // namespace rill
