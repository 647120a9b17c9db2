// Logging: one spdlog logger per component ("rill.engine", "rill.connector.orders", …).
//
// By default every logger writes to stderr. A host that has its own logging
// (the Python package) can switch all of them, existing and future, to a
// bounded in-memory queue with EnableLogQueue() and drain it with
// TakeLogRecords() on a thread of its own: a logging call then only formats
// the message and appends it under a short lock, so it never waits for the
// host (e.g. for Python's GIL) and never calls back into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

namespace rill {

/// Return the logger named `rill.<component>`, creating it on first use. Any thread.
std::shared_ptr<spdlog::logger> Logger(const std::string& component);

/// One log line, as queued by the log queue.
struct LogRecord {
  std::string logger;  ///< "rill.<component>"
  spdlog::level::level_enum level = spdlog::level::info;
  std::string message;
  double time = 0;      ///< unix seconds
  uint64_t thread = 0;  ///< OS thread id of the caller
};

/// Send the records of every rill logger to the log queue instead of stderr,
/// keeping at most `capacity` records (the oldest are dropped beyond that and
/// counted by DroppedLogRecords()). Idempotent (the capacity is updated). Any thread.
void EnableLogQueue(size_t capacity);

/// Send the records of every rill logger to stderr again and wake the threads
/// waiting in TakeLogRecords(). Queued records stay until taken. Any thread.
void DisableLogQueue();

/// Return the queued records, oldest first, and remove them. Waits up to
/// `wait_seconds` for the first record when the queue is empty (0: don't
/// wait); returns early, possibly empty, after WakeLogWaiters() or
/// DisableLogQueue(). Any thread; call it without holding locks others need.
std::vector<LogRecord> TakeLogRecords(double wait_seconds);

/// Wait up to `wait_seconds` for a queued record without taking it, as
/// TakeLogRecords waits; return whether one is queued. Any thread.
bool WaitForLogRecords(double wait_seconds);

/// Wake the threads waiting in TakeLogRecords() or WaitForLogRecords(). Any thread.
void WakeLogWaiters();

/// Number of records dropped because the queue was full, since start.
int64_t DroppedLogRecords();

/// Set the level of every rill logger, existing and future (records below
/// it are not formatted at all). Any thread.
void SetLogLevel(spdlog::level::level_enum level);

}  // namespace rill
