// Helpers of the sink tests: a SinkWriter that records what it was given and
// fails or blocks on demand, and a keyed table to write.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <arrow/api.h>

#include "rill/sink/sink.h"
#include "rill/table/change_feed.h"

namespace rill::test {

/// One change row as a target holds it.
struct Row {
  std::string op;
  int64_t id = 0;
  int64_t v = 0;
  uint64_t version = 0;
  bool operator==(const Row& o) const {
    return op == o.op && id == o.id && v == o.v && version == o.version;
  }
};

/// What a RecordingWriter's target holds; shared by the test and the writer
/// (which the sink owns), so it outlives both and can be handed to a new
/// writer (a restarted engine).
struct Target {
  std::mutex mu;
  std::condition_variable cv;
  // Committed:
  std::vector<Row> rows;                 // every committed change row, in order
  std::map<int64_t, int64_t> state;      // upsert view: id -> v
  std::vector<CommitPoint> commits;
  std::optional<SinkProgress> progress;
  int64_t snapshots = 0;
  // The open unit:
  std::vector<Row> unit;
  bool unit_snapshot = false;
  // Calls:
  std::vector<int64_t> write_sizes;      // rows per Write call
  int64_t opens = 0;
  int64_t aborts = 0;
  // Behaviour:
  std::atomic<bool> fail_writes{false};
  std::atomic<bool> fail_commits{false};
  std::atomic<bool> block{false};        // Write waits while set
  std::atomic<bool> fail_progress{false};  // LoadProgress fails while set

  void Release() {
    block = false;
    cv.notify_all();
  }
  std::vector<Row> Rows() {
    std::lock_guard<std::mutex> lock(mu);
    return rows;
  }
  size_t NumCommits() {
    std::lock_guard<std::mutex> lock(mu);
    return commits.size();
  }
};

inline std::vector<Row> RowsOf(const ChangeSet& changes) {
  std::vector<Row> out;
  for (const auto& b : changes.batches) {
    auto id = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("id"));
    auto v = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("v"));
    auto op = std::static_pointer_cast<arrow::StringArray>(b->GetColumnByName(kChangeOpColumn));
    auto ver =
        std::static_pointer_cast<arrow::UInt64Array>(b->GetColumnByName(kChangeVersionColumn));
    for (int64_t i = 0; i < b->num_rows(); ++i) {
      out.push_back({std::string(op->GetView(i)), id->Value(i), v->IsNull(i) ? 0 : v->Value(i),
                     ver->Value(i)});
    }
  }
  return out;
}

class RecordingWriter : public SinkWriter {
 public:
  explicit RecordingWriter(std::shared_ptr<Target> target) : target_(std::move(target)) {}

  Status Open(const std::shared_ptr<arrow::Schema>&, const std::vector<std::string>&) override {
    std::lock_guard<std::mutex> lock(target_->mu);
    ++target_->opens;
    return Status::OK();
  }
  Result<std::optional<SinkProgress>> LoadProgress() override {
    std::lock_guard<std::mutex> lock(target_->mu);
    if (target_->fail_progress) return Status::IOError("target unreachable (test)");
    return target_->progress;
  }
  Status Write(const ChangeSet& changes, SinkMode) override {
    std::unique_lock<std::mutex> lock(target_->mu);
    target_->cv.wait(lock, [&] { return !target_->block.load(); });
    if (target_->fail_writes) return Status::IOError("target down (test)");
    target_->write_sizes.push_back(changes.num_rows);
    if (changes.snapshot) {
      target_->unit.clear();
      target_->unit_snapshot = true;
    }
    for (auto& r : RowsOf(changes)) target_->unit.push_back(r);
    bytes_ += changes.num_rows * 16;
    return Status::OK();
  }
  Status Commit(const CommitPoint& point) override {
    std::lock_guard<std::mutex> lock(target_->mu);
    if (target_->fail_commits || target_->fail_writes) return Status::IOError("commit failed (test)");
    if (target_->unit_snapshot) {
      target_->state.clear();
      ++target_->snapshots;
    }
    for (const auto& r : target_->unit) {
      target_->rows.push_back(r);
      if (r.op == "delete") {
        target_->state.erase(r.id);
      } else if (r.op != "update_before") {
        target_->state[r.id] = r.v;
      }
    }
    target_->unit.clear();
    target_->unit_snapshot = false;
    target_->commits.push_back(point);
    target_->progress = SinkProgress{point.version, point.epoch};
    target_->cv.notify_all();
    return Status::OK();
  }
  void Abort() override {
    std::lock_guard<std::mutex> lock(target_->mu);
    ++target_->aborts;
    target_->unit.clear();
    target_->unit_snapshot = false;
  }
  void Close() override {}
  int64_t bytes_written() const override { return bytes_; }
  const char* type() const override { return "test"; }

 private:
  std::shared_ptr<Target> target_;
  std::atomic<int64_t> bytes_{0};
};

inline std::shared_ptr<arrow::Schema> KeyedSchema() {
  return arrow::schema({arrow::field("id", arrow::int64(), /*nullable=*/false),
                        arrow::field("v", arrow::int64())});
}

/// A batch of (id, v) rows.
inline std::shared_ptr<arrow::RecordBatch> Batch(const std::vector<std::pair<int64_t, int64_t>>& rows) {
  arrow::Int64Builder id, v;
  for (auto [i, x] : rows) {
    (void)id.Append(i);
    (void)v.Append(x);
  }
  return arrow::RecordBatch::Make(KeyedSchema(), static_cast<int64_t>(rows.size()),
                                  {id.Finish().ValueOrDie(), v.Finish().ValueOrDie()});
}

}  // namespace rill::test
