// Sinks driven by an application instance's transactions (DrivenSinks,
// sink_set.h): the SinkRunner's driven half and the shared registry.
#include "rill/sink/sink_driven.h"

#include <arrow/record_batch.h>

#include "rill/engine/engine.h"
#include "rill/sink/coalesce.h"

namespace rill::sink_internal {

void SinkRunner::StartDriven() {
  Subscribe();
  std::lock_guard<std::mutex> lock(shared_->mu);
  driven_started_ = true;
}

void SinkRunner::StopDriven(double flush_seconds) {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (stop_ || !driven_started_) return;
  }
  if (flush_seconds > 0 && !failing_.load()) (void)Flush(flush_seconds);
  table_->Unsubscribe(subscription_);
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    stop_ = true;
    done_ = true;
    shared_->cv.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(engine_mu_);
    if (engine_ && backpressure_) engine_->SetTableBackpressure(table_->name(), name(), false);
    engine_ = nullptr;
  }
}

uint64_t SinkRunner::seen_version() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return std::max(shared_->table_version, feed_->current_version());
}

bool SinkRunner::HasChangesUpTo(uint64_t version) const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return !stop_ && version > committed_;
}

Status SinkRunner::WriteDriven(void* producer, uint64_t to_version) {
  uint64_t from;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (stop_) return Status::OK();
    from = committed_;
  }
  driven_reached_ = from;
  driven_rows_ = 0;
  driven_snapshot_ = false;
  if (to_version <= from) return Status::OK();
  bool snapshot = false;
  uint64_t reached = to_version;
  // Read in steps of max_batch_rows: each step is encoded and produced before
  // the next is read, so a large backlog is never materialized at once.
  ChangeReadOptions read;
  read.max_rows = options_.max_batch_rows;
  read.emit_retention_deletes = options_.emit_retention_deletes;
  read.snapshot_deletes = options_.mode == SinkMode::kUpsert;
  DrivenSinks::RowFilter filter;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    filter = row_filter_;
  }
  uint64_t cursor = from;
  while (cursor < to_version) {
    RILL_ASSIGN_OR_RAISE(ChangeSet changes, feed_->Read(cursor, read));
    BatchVector rows;
    if (changes.snapshot) {
      snapshot = true;
      reached = std::max(changes.to_version, to_version);
      rows = changes.batches;
      if (changes.snapshot_deletes_incomplete) {
        Alert(Severity::kWarning,
              "Sink '" + name() + "' fell behind its table's change log further than it "
              "keeps deleted keys",
              "its snapshot at version " + std::to_string(changes.to_version) +
                  " tombstones the " + std::to_string(changes.snapshot_delete_rows) +
                  " deleted keys the log kept; keys deleted before those may remain in "
                  "the target");
      }
    } else {
      if (changes.to_version <= cursor) break;
      RILL_ASSIGN_OR_RAISE(rows, KeepVersions(changes.batches, cursor, to_version));
    }
    RILL_ASSIGN_OR_RAISE(BatchVector out, ApplyMode(rows, snapshot));
    if (filter) {
      BatchVector kept;
      for (const auto& b : out) {
        RILL_ASSIGN_OR_RAISE(auto k, filter(b));
        if (k && k->num_rows() > 0) kept.push_back(std::move(k));
      }
      out = std::move(kept);
    }
    ChangeSet written;
    written.from_version = cursor;
    written.to_version = snapshot ? reached : std::min(changes.to_version, to_version);
    written.snapshot = snapshot;
    written.batches = std::move(out);
    written.num_rows = CountRows(written.batches);
    RILL_RETURN_NOT_OK(writer_->WriteInto(producer, written, options_.mode));
    driven_rows_ += written.num_rows;
    cursor = written.to_version;
    if (snapshot) break;
  }
  driven_reached_ = std::max(cursor, to_version);
  driven_snapshot_ = snapshot;
  return Status::OK();
}

void SinkRunner::DrivenCommitted(uint64_t to_version) {
  if (driven_snapshot_) {
    std::lock_guard<std::mutex> lock(shared_->mu);
    ++stats_.snapshots;
  }
  OnSuccess(std::max(to_version, driven_reached_), driven_rows_);
  driven_rows_ = 0;
  driven_snapshot_ = false;
}

void SinkRunner::DrivenAborted(const Status& why) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    ++stats_.errors;
    ++stats_.retries;
    stats_.last_error = why.ToString();
    first = !failing_;
    failing_ = true;
  }
  driven_rows_ = 0;
  driven_snapshot_ = false;
  if (first) {
    Alert(Severity::kError,
          "Sink '" + name() + "' failed to commit in the application's transaction",
          why.ToString());
  }
  UpdateBackpressure();
}

void SinkRunner::DrivenDiscard(uint64_t to_version, const Status& why) {
  DrivenAborted(why);
  OnSuccess(to_version, /*rows=*/-1);  // moves on without counting rows as written
}

// DrivenSinksImpl ------------------------------------------------------------

void DrivenSinksImpl::Add(std::shared_ptr<SinkRunner> sink) {
  std::lock_guard<std::mutex> lock(mu_);
  sinks_.push_back(std::move(sink));
}

void DrivenSinksImpl::Remove(const SinkRunner* sink) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = sinks_.begin(); it != sinks_.end(); ++it) {
    if (it->get() == sink) {
      sinks_.erase(it);
      return;
    }
  }
}

DrivenSinks::Cut DrivenSinksImpl::Capture() {
  Cut cut;
  std::lock_guard<std::mutex> lock(mu_);
  cut.versions.reserve(sinks_.size());
  for (const auto& s : sinks_) cut.versions.emplace_back(s, s->seen_version());
  return cut;
}

bool DrivenSinksImpl::HasChanges(const Cut& cut) const {
  for (const auto& [sink, version] : cut.versions) {
    if (static_cast<const SinkRunner&>(*sink).HasChangesUpTo(version)) return true;
  }
  return false;
}

Status DrivenSinksImpl::Write(const Cut& cut, void* producer) {
  for (const auto& [sink, version] : cut.versions) {
    auto& runner = static_cast<SinkRunner&>(*sink);
    Status st = runner.WriteDriven(producer, version);
    if (!st.ok()) return st.WithMessage("sink '", runner.name(), "': ", st.message());
  }
  return Status::OK();
}

void DrivenSinksImpl::Committed(const Cut& cut) {
  for (const auto& [sink, version] : cut.versions) {
    static_cast<SinkRunner&>(*sink).DrivenCommitted(version);
  }
}

void DrivenSinksImpl::Aborted(const Cut& cut, const Status& why) {
  for (const auto& [sink, version] : cut.versions) {
    static_cast<SinkRunner&>(*sink).DrivenAborted(why);
  }
}

void DrivenSinksImpl::Discard(const Cut& cut, const Status& why) {
  for (const auto& [sink, version] : cut.versions) {
    static_cast<SinkRunner&>(*sink).DrivenDiscard(version, why);
  }
}

void DrivenSinksImpl::Skip(const std::string& table) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : sinks_) {
    if (s->table()->name() == table) s->OnSuccess(s->seen_version(), /*rows=*/-1);
  }
}

bool DrivenSinksImpl::SkipSink(const std::string& sink_name) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : sinks_) {
    if (s->name() != sink_name) continue;
    s->OnSuccess(s->seen_version(), /*rows=*/-1);
    return true;
  }
  return false;
}

bool DrivenSinksImpl::SetRowFilter(const std::string& sink_name, RowFilter filter) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : sinks_) {
    if (s->name() == sink_name) {
      std::lock_guard<std::mutex> state(s->shared_->mu);
      s->row_filter_ = std::move(filter);
      return true;
    }
  }
  return false;
}

}  // namespace rill::sink_internal
