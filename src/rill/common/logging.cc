#include "rill/common/logging.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>

#include <spdlog/details/os.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace rill {

namespace {

// The queue the sink appends to and TakeLogRecords drains.
struct LogQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<LogRecord> records;  // guarded by mu
  size_t capacity = 0;            // guarded by mu
  int64_t dropped = 0;            // guarded by mu
  uint64_t wakeups = 0;           // guarded by mu; bumped by WakeLogWaiters
};

LogQueue& Queue() {
  static LogQueue* queue = new LogQueue();  // leaked: loggers may log during exit
  return *queue;
}

class QueueSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    LogRecord record;
    record.logger.assign(msg.logger_name.data(), msg.logger_name.size());
    record.level = msg.level;
    record.message.assign(msg.payload.data(), msg.payload.size());
    record.time = std::chrono::duration<double>(msg.time.time_since_epoch()).count();
    record.thread = msg.thread_id;
    LogQueue& q = Queue();
    {
      std::lock_guard<std::mutex> lock(q.mu);
      if (q.capacity == 0) return;
      while (q.records.size() >= q.capacity) {
        q.records.pop_front();
        ++q.dropped;
      }
      q.records.push_back(std::move(record));
    }
    q.cv.notify_all();
  }
  void flush_() override {}
};

// The one sink of every rill logger: forwards each record to stderr or to the
// queue. Switching the target is an atomic pointer store, so loggers in use on
// other threads never see their sink vector change.
class RouterSink final : public spdlog::sinks::sink {
 public:
  RouterSink()
      : stderr_(std::make_shared<spdlog::sinks::stderr_color_sink_mt>()), target_(stderr_) {}
  void log(const spdlog::details::log_msg& msg) override { target_.load()->log(msg); }
  void flush() override { target_.load()->flush(); }
  void set_pattern(const std::string& pattern) override { stderr_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    stderr_->set_formatter(std::move(formatter));
  }
  void RouteToQueue(bool queue) {
    if (queue && !queue_) queue_ = std::make_shared<QueueSink>();
    target_.store(queue ? queue_ : stderr_);
  }

 private:
  std::shared_ptr<spdlog::sinks::sink> stderr_;
  std::shared_ptr<spdlog::sinks::sink> queue_;  // guarded by the Registry's mu
  std::atomic<std::shared_ptr<spdlog::sinks::sink>> target_;
};

struct Registry {
  std::mutex mu;
  std::shared_ptr<RouterSink> router = std::make_shared<RouterSink>();
  std::optional<spdlog::level::level_enum> level;  // guarded by mu; set by SetLogLevel
};

Registry& Loggers() {
  static Registry* registry = new Registry();  // leaked: loggers may log during exit
  return *registry;
}

bool IsRillLogger(const std::string& name) { return name.rfind("rill.", 0) == 0; }

}  // namespace

std::shared_ptr<spdlog::logger> Logger(const std::string& component) {
  Registry& r = Loggers();
  std::string name = "rill." + component;
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto existing = spdlog::get(name)) {
    return existing;
  }
  auto logger = std::make_shared<spdlog::logger>(name, r.router);
  if (r.level) {
    logger->set_level(*r.level);
  } else if (const char* level = std::getenv("RILL_LOG_LEVEL")) {
    logger->set_level(spdlog::level::from_str(level));
  }
  spdlog::register_logger(logger);
  return logger;
}

void EnableLogQueue(size_t capacity) {
  {
    LogQueue& q = Queue();
    std::lock_guard<std::mutex> lock(q.mu);
    q.capacity = capacity == 0 ? 1 : capacity;
  }
  Registry& r = Loggers();
  std::lock_guard<std::mutex> lock(r.mu);
  r.router->RouteToQueue(true);
}

void DisableLogQueue() {
  {
    Registry& r = Loggers();
    std::lock_guard<std::mutex> lock(r.mu);
    r.router->RouteToQueue(false);
  }
  WakeLogWaiters();
}

namespace {

/// Wait (holding `lock` on q.mu) until a record is queued, a wake-up, or the timeout.
void WaitLocked(LogQueue& q, std::unique_lock<std::mutex>& lock, double wait_seconds) {
  if (q.records.empty() && wait_seconds > 0) {
    const uint64_t wakeups = q.wakeups;
    q.cv.wait_for(lock, std::chrono::duration<double>(wait_seconds),
                  [&] { return !q.records.empty() || q.wakeups != wakeups; });
  }
}

}  // namespace

bool WaitForLogRecords(double wait_seconds) {
  LogQueue& q = Queue();
  std::unique_lock<std::mutex> lock(q.mu);
  WaitLocked(q, lock, wait_seconds);
  return !q.records.empty();
}

std::vector<LogRecord> TakeLogRecords(double wait_seconds) {
  LogQueue& q = Queue();
  std::unique_lock<std::mutex> lock(q.mu);
  WaitLocked(q, lock, wait_seconds);
  std::vector<LogRecord> out(std::make_move_iterator(q.records.begin()),
                             std::make_move_iterator(q.records.end()));
  q.records.clear();
  return out;
}

void WakeLogWaiters() {
  LogQueue& q = Queue();
  {
    std::lock_guard<std::mutex> lock(q.mu);
    ++q.wakeups;
  }
  q.cv.notify_all();
}

int64_t DroppedLogRecords() {
  LogQueue& q = Queue();
  std::lock_guard<std::mutex> lock(q.mu);
  return q.dropped;
}

void SetLogLevel(spdlog::level::level_enum level) {
  Registry& r = Loggers();
  std::lock_guard<std::mutex> lock(r.mu);
  r.level = level;
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& logger) {
    if (IsRillLogger(logger->name())) logger->set_level(level);
  });
}

}  // namespace rill
