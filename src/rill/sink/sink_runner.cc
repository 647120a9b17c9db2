// A sink's thread: read the change feed, batch, write, commit, retry
// (at-least-once; the exactly-once half is sink_epochs.cc).
#include <algorithm>
#include <chrono>
#include <cmath>

#include <arrow/record_batch.h>

#include "rill/common/thread_priority.h"
#include "rill/engine/engine.h"
#include "rill/sink/coalesce.h"
#include "rill/sink/sink_internal.h"

namespace rill::sink_internal {

namespace {

// How long Stop waits for the thread after its flush before leaving a thread
// stuck in its writer to finish on its own.
constexpr double kStopGraceSeconds = 2.0;

}  // namespace

SinkRunner::SinkRunner(Engine* engine, SinkOptions options, std::unique_ptr<SinkWriter> writer,
                       std::shared_ptr<LiveTable> table, std::shared_ptr<ChangeFeed> feed)
    : engine_(engine),
      options_(std::move(options)),
      writer_(std::move(writer)),
      writer_type_(writer_->type()),
      table_(std::move(table)),
      feed_(std::move(feed)),
      shared_(std::make_shared<Shared>()) {}

SinkRunner::~SinkRunner() {
  if (thread_.joinable()) {
    // The last reference can be the thread's own (after an abandoning Stop).
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }
}

double SinkRunner::WallNow() const {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

bool SinkRunner::checkpoint_mode() const {
  if (driven_) return false;  // the instance's transactions, not checkpoints
  std::lock_guard<std::mutex> lock(engine_mu_);
  if (engine_ && engine_->commits_follow_checkpoints()) epochs_seen_ = true;
  return epochs_seen_;
}

void SinkRunner::Start() {
  Subscribe();
  auto self = shared_from_this();
  thread_ = std::thread([self] { self->Run(); });
}

void SinkRunner::Subscribe() {
  std::weak_ptr<Shared> weak = shared_;
  subscription_ = table_->Subscribe([weak](const std::shared_ptr<const TableVersion>& v) {
    // Tick thread: note the version and wake the sink; nothing else.
    auto shared = weak.lock();
    if (!shared) return;
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->table_version = std::max(shared->table_version, v->version());
      shared->published.emplace_back(v->version(), v->published_at());
      if (shared->published.size() > 65536) shared->published.pop_front();
    }
    shared->cv.notify_all();
  });
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->table_version = std::max(shared_->table_version, feed_->current_version());
  }
}

void SinkRunner::Stop(double flush_seconds) {
  if (driven_) {
    StopDriven(flush_seconds);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (stop_ || !thread_.joinable()) return;
  }
  // A failing target would only make the flush wait out its bound.
  if (flush_seconds > 0 && !failing_.load()) (void)Flush(flush_seconds);
  table_->Unsubscribe(subscription_);
  bool finished;
  {
    std::unique_lock<std::mutex> lock(shared_->mu);
    stop_ = true;
    shared_->cv.notify_all();
    finished = shared_->cv.wait_for(lock, std::chrono::duration<double>(kStopGraceSeconds),
                                    [&] { return done_; });
  }
  if (finished) {
    thread_.join();
    return;
  }
  // Stuck in the writer: let it finish alone, away from the engine.
  {
    std::lock_guard<std::mutex> lock(engine_mu_);
    if (engine_ && backpressure_) engine_->SetTableBackpressure(table_->name(), name(), false);
    if (engine_) {
      engine_->RecordEvent(EngineEvent::Engine(
          Severity::kError, "sink:" + name(),
          "Sink '" + name() + "' did not stop: its writer is blocked; left running detached"));
    }
    engine_ = nullptr;
  }
  thread_.detach();
}

SinkStats SinkRunner::stats() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  SinkStats s = stats_;
  s.committed_version = committed_ + offset_;
  const uint64_t current = shared_->table_version;
  s.lag_versions = current > committed_ ? static_cast<int64_t>(current - committed_) : 0;
  s.lag_seconds = 0;
  for (const auto& [version, published_at] : shared_->published) {
    if (version > committed_) {
      s.lag_seconds = std::max(0.0, WallNow() - published_at);
      break;
    }
  }
  s.backpressure = backpressure_;
  return s;
}

Status SinkRunner::Flush(double timeout_seconds) {
  std::unique_lock<std::mutex> lock(shared_->mu);
  if (done_ || stop_) return Status::Cancelled("sink '", name(), "' is stopped");
  lock.unlock();
  const bool epochs = checkpoint_mode();
  lock.lock();
  const uint64_t target =
      epochs ? newest_checkpoint_version_ : std::max(shared_->table_version, feed_->current_version());
  ++flush_requests_;
  shared_->cv.notify_all();
  const bool flushed = shared_->cv.wait_for(
      lock, std::chrono::duration<double>(std::max(0.0, timeout_seconds)),
      [&] { return (committed_ >= target && !has_carry_) || done_; });
  --flush_requests_;
  if (flushed) return Status::OK();
  return Status::IOError("deadline exceeded: sink '", name(), "' did not flush within ",
                         timeout_seconds, " s (committed version ", committed_, " of ", target,
                         stats_.last_error.empty() ? "" : "; last error: " + stats_.last_error,
                         ")");
}

void SinkRunner::Alert(Severity severity, const std::string& message,
                       const std::string& detail) {
  std::lock_guard<std::mutex> lock(engine_mu_);
  if (!engine_) return;
  engine_->RecordEvent(EngineEvent::Engine(severity, "sink:" + name(), message, detail));
}

void SinkRunner::Acknowledge() {
  uint64_t floor;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    floor = committed_;
    if (!pinned_.empty()) floor = std::min(floor, *pinned_.begin());
  }
  feed_->Acknowledge(floor);
}

void SinkRunner::Run() {
  // A background job, like the checkpoint writer: on a busy machine the tick
  // thread goes first (an idle CPU still runs the sink at full speed).
  LowerThisThreadPriority();
  if (OpenWriter()) {
    Resume();
    while (WaitForWork()) {
      bool restore;
      {
        std::lock_guard<std::mutex> lock(shared_->mu);
        restore = restore_ != nullptr;
      }
      if (restore) {
        HandleRestore();
        continue;
      }
      if (checkpoint_mode()) {
        RunEpoch();
        continue;
      }
      ReadBacklog();
      bool due;
      {
        std::lock_guard<std::mutex> lock(shared_->mu);
        due = BatchDue(WallNow()) && WallNow() >= retry_at_;
      }
      if (due) WriteRound();
    }
    writer_->Close();
  }
  {
    std::lock_guard<std::mutex> lock(engine_mu_);
    if (engine_ && backpressure_) engine_->SetTableBackpressure(table_->name(), name(), false);
  }
  std::lock_guard<std::mutex> lock(shared_->mu);
  backpressure_ = false;
  done_ = true;
  shared_->cv.notify_all();
}

bool SinkRunner::OpenWriter() {
  for (;;) {
    Status st = writer_->Open(table_->schema(), table_->primary_key());
    if (st.ok()) {
      reopen_ = false;
      return true;
    }
    writer_->Close();
    OnFailure(st, 0, /*abort=*/false);
    std::unique_lock<std::mutex> lock(shared_->mu);
    shared_->cv.wait_for(lock, std::chrono::duration<double>(std::max(0.0, retry_at_ - WallNow())),
                         [&] { return stop_; });
    if (stop_) return false;
  }
}

void SinkRunner::Resume(bool after_restore) {
  std::optional<SinkProgress> progress;
  for (;;) {
    auto loaded = writer_->LoadProgress();
    if (loaded.ok()) {
      progress = *loaded;
      break;
    }
    OnFailure(loaded.status(), 0, /*abort=*/false);
    std::unique_lock<std::mutex> lock(shared_->mu);
    shared_->cv.wait_for(lock, std::chrono::duration<double>(std::max(0.0, retry_at_ - WallNow())),
                         [&] { return stop_; });
    if (stop_) return;
  }
  if (reopen_) {
    writer_->Close();
    (void)OpenWriter();
  }
  const uint64_t current = feed_->current_version();
  std::lock_guard<std::mutex> lock(shared_->mu);
  // A restore arrived while the target was read: its state wins (HandleRestore
  // reads the progress again).
  if (restored_ && !after_restore) return;
  if (!progress) {
    // Nothing of this sink at the target: reading from 0 gives the current
    // state as a snapshot (or the changes from the empty table), then changes.
    committed_ = read_cursor_ = 0;
  } else if (progress->version <= current) {
    committed_ = read_cursor_ = progress->version;
  } else {
    // The target is ahead of this table (a new engine, no checkpoint): write
    // the current state as a snapshot, numbered after the target's progress.
    offset_ = static_cast<int64_t>(progress->version + 1 - current);
    committed_ = read_cursor_ = current;
    force_snapshot_ = true;
  }
}

bool SinkRunner::BatchDue(double now) const {
  if (force_snapshot_) return true;
  if (backlog_.empty()) return false;
  if (flush_requests_ > 0) return true;
  if (options_.max_batch_rows > 0 && backlog_rows_ >= options_.max_batch_rows) return true;
  return now - backlog_since_ >= options_.interval_seconds;
}

bool SinkRunner::WaitForWork() {
  std::unique_lock<std::mutex> lock(shared_->mu);
  for (;;) {
    if (stop_) return false;
    if (restore_) return true;
    const double now = WallNow();
    const bool waiting_retry = now < retry_at_;
    double wake_at = waiting_retry ? retry_at_ : 0;
    const bool epochs = checkpoint_mode();
    if (epochs) {
      // Work comes with a completed checkpoint (OnCheckpointComplete notifies).
      if (completed_ && !waiting_retry) return true;
      if (!completed_) wake_at = 0;
    } else {
      const int64_t limit = failing_ ? options_.max_backlog_rows
                            : options_.max_batch_rows > 0 ? options_.max_batch_rows
                                                          : INT64_MAX;
      if (shared_->table_version > read_cursor_ && backlog_rows_ < limit) return true;
      if (BatchDue(now) && !waiting_retry) return true;
      if (!backlog_.empty()) {
        const double due = backlog_since_ + options_.interval_seconds;
        wake_at = wake_at > 0 ? std::min(wake_at, due) : due;
        if (waiting_retry) wake_at = retry_at_;
      }
    }
    if (wake_at > 0) {
      shared_->cv.wait_for(lock, std::chrono::duration<double>(std::max(0.0, wake_at - now)));
    } else {
      shared_->cv.wait(lock);
    }
  }
}

void SinkRunner::ReadBacklog() {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    target = shared_->table_version;
  }
  ChangeReadOptions read;
  read.max_rows = options_.max_batch_rows;
  read.emit_retention_deletes = options_.emit_retention_deletes;
  const int64_t limit = failing_ ? options_.max_backlog_rows
                        : options_.max_batch_rows > 0 ? options_.max_batch_rows
                                                      : INT64_MAX;
  while (read_cursor_ < target && backlog_rows_ < limit) {
    auto changes = feed_->Read(read_cursor_, read);
    if (!changes.ok()) {
      std::lock_guard<std::mutex> lock(shared_->mu);
      ++stats_.errors;
      stats_.last_error = changes.status().ToString();
      break;
    }
    if (changes->to_version <= read_cursor_ && !changes->snapshot) {
      // The feed has nothing after the cursor yet (the version seen is not in
      // its log): take the table's version as read.
      read_cursor_ = std::max(read_cursor_, target);
      break;
    }
    if (changes->snapshot) {
      backlog_.clear();  // the snapshot replaces what came before it
      backlog_rows_ = 0;
    }
    if (!changes->snapshot) {
      auto kept = DropMoves(changes->batches);
      if (kept.ok()) {
        changes->batches = std::move(*kept);
        changes->num_rows = 0;
        for (const auto& b : changes->batches) changes->num_rows += b->num_rows();
      }
    }
    if (backlog_.empty()) backlog_since_ = WallNow();
    read_cursor_ = changes->to_version;
    backlog_rows_ += changes->num_rows;
    backlog_.push_back(Pending{std::move(*changes)});
    std::lock_guard<std::mutex> lock(shared_->mu);
    target = std::max(target, shared_->table_version);
  }
  UpdateBackpressure();
}

void SinkRunner::BeginMoves(uint64_t after) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  moves_.emplace_back(after, UINT64_MAX);
}

void SinkRunner::EndMoves(uint64_t through) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (!moves_.empty() && moves_.back().second == UINT64_MAX) moves_.back().second = through;
}

Result<BatchVector> SinkRunner::DropMoves(const BatchVector& batches) const {
  std::vector<std::pair<uint64_t, uint64_t>> moves;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    moves = moves_;
  }
  return DropVersions(batches, moves);
}

Result<BatchVector> SinkRunner::ApplyMode(const BatchVector& rows, bool snapshot) const {
  switch (options_.mode) {
    case SinkMode::kChangelog:
      return rows;
    case SinkMode::kUpsert:
      if (snapshot) return rows;
      return CoalesceByKey(rows, table_->primary_key());
    case SinkMode::kAppend:
      // Appended rows only: a keyed table's updates and deletes are left out.
      return KeepOps(rows, {ChangeOp::kInsert});
  }
  return rows;
}

Status SinkRunner::WriteAndCommit(const BatchVector& rows, bool snapshot,
                                  const CommitPoint& point) {
  if (reopen_) {
    writer_->Close();
    RILL_RETURN_NOT_OK(writer_->Open(table_->schema(), table_->primary_key()));
    reopen_ = false;
  }
  uint64_t from;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    from = committed_ + offset_;
  }
  auto groups = SplitRows(rows, options_.max_batch_rows);
  if (groups.empty() && snapshot) groups.emplace_back();  // an empty state replaces too
  bool first = true;
  for (auto& group : groups) {
    ChangeSet part;
    part.from_version = from;
    part.to_version = point.version;
    part.snapshot = snapshot && first;
    part.num_rows = CountRows(group);
    part.batches = std::move(group);
    part.published_at = WallNow();
    RILL_RETURN_NOT_OK(writer_->Write(part, options_.mode));
    first = false;
  }
  return writer_->Commit(point);
}

void SinkRunner::WriteRound() {
  BatchVector rows;
  bool snapshot = false;
  uint64_t to = 0;
  int64_t in_rows = 0;
  size_t taken = 0;
  if (force_snapshot_) {
    auto state = table_->snapshot();
    auto batches = SnapshotChangeBatches(*state, state->version());
    if (!batches.ok()) {
      OnFailure(batches.status(), 0);
      return;
    }
    rows = std::move(*batches);
    snapshot = true;
    to = state->version();
    in_rows = CountRows(rows);
    backlog_.clear();
    backlog_rows_ = 0;
    read_cursor_ = std::max(read_cursor_, to);
  } else {
    for (const auto& p : backlog_) {
      const auto& c = p.changes;
      if (taken > 0 && (c.snapshot || (options_.max_batch_rows > 0 &&
                                       in_rows + c.num_rows > options_.max_batch_rows))) {
        break;
      }
      snapshot = snapshot || c.snapshot;
      rows.insert(rows.end(), c.batches.begin(), c.batches.end());
      in_rows += c.num_rows;
      to = c.to_version;
      ++taken;
    }
  }
  auto pop = [&] {
    if (force_snapshot_) {
      force_snapshot_ = false;
      return;
    }
    for (size_t i = 0; i < taken; ++i) {
      backlog_rows_ -= backlog_.front().changes.num_rows;
      backlog_.pop_front();
    }
    if (!backlog_.empty()) backlog_since_ = WallNow();
  };
  if (in_rows == 0 && !snapshot) {
    pop();  // versions without changes for this sink: nothing to write
    OnSuccess(to, -1);
    return;
  }
  int64_t offset;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    offset = offset_;
  }
  Result<BatchVector> out = ApplyMode(rows, snapshot);
  if (out.ok()) out = ShiftVersions(*out, offset);
  CommitPoint point;
  point.version = to + offset;
  Status st = out.ok() ? WriteAndCommit(*out, snapshot, point) : out.status();
  if (st.ok()) {
    pop();
    if (snapshot) {
      std::lock_guard<std::mutex> lock(shared_->mu);
      ++stats_.snapshots;
    }
    OnSuccess(to, CountRows(*out));
    return;
  }
  if (OnFailure(st, in_rows)) {
    pop();  // dropped
    OnSuccess(to, -1);
  }
}

bool SinkRunner::OnFailure(const Status& status, int64_t rows, bool abort) {
  if (abort) writer_->Abort();
  reopen_ = true;
  bool drop = options_.on_error == SinkErrorPolicy::kDrop && rows > 0;
  bool first;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    ++stats_.errors;
    stats_.last_error = status.ToString();
    if (drop) stats_.dropped_rows += rows;
    first = !failing_;
    failing_ = true;
    if (drop) {
      dropped_in_stretch_ += rows;
      retry_at_ = 0;
    } else {
      const double backoff =
          std::min(options_.retry_initial_seconds * std::pow(2.0, attempts_),
                   options_.retry_max_seconds);
      ++attempts_;
      ++stats_.retries;  // the same rows are written again after the backoff
      retry_at_ = WallNow() + backoff;
    }
  }
  if (first) {
    Alert(Severity::kError,
          "Sink '" + name() + "' cannot write to its target (" + writer_type_ + "); " +
              (options_.on_error == SinkErrorPolicy::kDrop ? "dropping failed batches"
                                                           : "retrying with backoff"),
          status.ToString());
  }
  if (!drop) UpdateBackpressure();
  return drop;
}

void SinkRunner::OnSuccess(uint64_t table_version, int64_t rows) {
  bool recovered = false;
  int64_t dropped = 0;
  if (rows >= 0) {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (failing_) {
      recovered = true;
      dropped = dropped_in_stretch_;
      failing_ = false;
      attempts_ = 0;
      dropped_in_stretch_ = 0;
    }
    retry_at_ = 0;
  }
  // The alert goes first: whoever sees the commit (Flush) sees the alert too.
  if (recovered) {
    Alert(Severity::kInfo, "Sink '" + name() + "' writes to its target again",
          dropped > 0 ? std::to_string(dropped) + " rows were dropped meanwhile" : "");
  }
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    committed_ = std::max(committed_, table_version);
    if (rows >= 0) {
      stats_.rows_written += rows;
      ++stats_.batches;
      stats_.bytes = writer_->bytes_written();
    }
    while (!shared_->published.empty() && shared_->published.front().first <= committed_) {
      shared_->published.pop_front();
    }
    shared_->cv.notify_all();
  }
  Acknowledge();
  UpdateBackpressure();
}

void SinkRunner::UpdateBackpressure() {
  bool want;
  uint64_t current;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    want = backpressure_;
    current = shared_->table_version;
  }
  const int64_t one_batch = std::max<int64_t>(1, options_.max_batch_rows);
  if (!backpressure_ && failing_ && options_.on_error == SinkErrorPolicy::kRetry &&
      backlog_rows_ >= options_.max_backlog_rows) {
    want = true;
  } else if (backpressure_ && !failing_ && backlog_rows_ < one_batch &&
             (read_cursor_ >= current || checkpoint_mode())) {
    want = false;  // caught up (exactly-once: the epoch is committed)
  }
  if (want == backpressure_) return;
  {
    std::lock_guard<std::mutex> lock(engine_mu_);
    if (engine_) engine_->SetTableBackpressure(table_->name(), name(), want);
  }
  std::lock_guard<std::mutex> lock(shared_->mu);
  backpressure_ = want;
}

}  // namespace rill::sink_internal
