// The exactly-once half of a sink (sink/sink.h, "Commits and exactly-once"):
// with a Checkpointer attached the sink writes only the versions a complete
// checkpoint holds and commits once per checkpoint; the checkpoint keeps the
// rows after the sink's last commit (CaptureSection), and a restore writes
// exactly those the target lacks (HandleRestore).
#include <algorithm>
#include <chrono>

#include "rill/engine/engine.h"
#include "rill/sink/coalesce.h"
#include "rill/sink/sink_internal.h"

namespace rill::sink_internal {

Result<BatchVector> SinkRunner::ReadRange(uint64_t from_version, uint64_t to_version,
                                          int64_t offset, bool* snapshot, uint64_t* reached) {
  ChangeReadOptions read;
  read.max_rows = options_.max_batch_rows;
  read.emit_retention_deletes = options_.emit_retention_deletes;
  BatchVector out;
  uint64_t cursor = from_version;
  *snapshot = false;
  while (cursor < to_version) {
    RILL_ASSIGN_OR_RAISE(ChangeSet changes, feed_->Read(cursor, read));
    if (changes.snapshot) {
      // The log no longer reaches back to the cursor: the full state, as of a
      // version that may be past `to_version` (docs/sinks.md says what that means).
      *snapshot = true;
      *reached = std::max(changes.to_version, to_version);
      return ShiftVersions(changes.batches, offset);
    }
    if (changes.to_version <= cursor) break;
    RILL_ASSIGN_OR_RAISE(auto kept, KeepVersions(changes.batches, cursor, to_version));
    RILL_ASSIGN_OR_RAISE(kept, DropMoves(kept));
    RILL_ASSIGN_OR_RAISE(kept, ShiftVersions(kept, offset));
    out.insert(out.end(), kept.begin(), kept.end());
    cursor = std::min(changes.to_version, to_version);
  }
  *reached = std::max(cursor, to_version);
  return out;
}

CheckpointFileWriter SinkRunner::CaptureSection(uint64_t id, uint64_t table_version) {
  if (driven_) return nullptr;  // committed by the application instance
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (done_ || stop_) return nullptr;
  const uint64_t base_table = committed_;
  const int64_t offset = offset_;
  SinkSection header;
  header.epoch = id;
  header.version = table_version + offset;
  header.base = has_carry_ ? carry_base_ : committed_ + offset;
  header.needs_snapshot = has_carry_ && carry_snapshot_;
  BatchVector carry = has_carry_ && !carry_snapshot_ ? carry_ : BatchVector{};
  // The feed must keep (base_table, table_version] until the file is written.
  pinned_.insert(base_table);
  auto self = shared_from_this();
  return [self, base_table, table_version, offset, header,
          carry](const std::string& dir, bool sync) -> Result<int64_t> {
    struct Unpin {
      SinkRunner* runner;
      uint64_t base;
      ~Unpin() {
        std::lock_guard<std::mutex> lock(runner->shared_->mu);
        auto it = runner->pinned_.find(base);
        if (it != runner->pinned_.end()) runner->pinned_.erase(it);
      }
    } unpin{self.get(), base_table};
    SinkSection section = header;
    if (!section.needs_snapshot) {
      section.rows = carry;
      bool snapshot = false;
      uint64_t reached = 0;
      RILL_ASSIGN_OR_RAISE(auto rows,
                           self->ReadRange(base_table, table_version, offset, &snapshot, &reached));
      if (snapshot) {
        section.needs_snapshot = true;
        section.rows.clear();
      } else {
        section.rows.insert(section.rows.end(), rows.begin(), rows.end());
      }
    }
    return WriteSinkSection(dir, self->name(), ChangeSchema(self->table_->schema()), section,
                            sync);
  };
}

void SinkRunner::OnCheckpointComplete(const CompletedCheckpoint& done) {
  if (driven_) return;
  auto it = done.table_versions.find(table_->name());
  if (it == done.table_versions.end()) return;
  Epoch epoch;
  epoch.id = done.id;
  epoch.table_version = it->second;
  // One consumer group per transaction: the first Kafka-shaped input's group.
  for (const auto& p : done.positions) {
    if (p.offsets.empty()) continue;
    if (epoch.source_group.empty()) epoch.source_group = p.group;
    if (p.group != epoch.source_group) continue;
    for (const auto& [topic, partitions] : p.offsets) {
      for (const auto& [partition, offset] : partitions) {
        epoch.source_offsets[topic][partition] = offset;
      }
    }
  }
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (!completed_ || completed_->id < epoch.id) completed_ = std::move(epoch);
  newest_checkpoint_version_ = std::max(newest_checkpoint_version_, it->second);
  shared_->cv.notify_all();
}

void SinkRunner::SetRestore(std::shared_ptr<SinkRestore> restore) {
  if (driven_) {
    // The application's transactions hold its progress, and the restored
    // rows are a move (the instance's tables back), not changes to write.
    OnSuccess(restore->restored_version, /*rows=*/-1);
    return;
  }
  std::lock_guard<std::mutex> lock(shared_->mu);
  restore_ = restore;
  if (restore->section) {
    // The restored numbering, the committed version and what the checkpoint
    // held after the sink's last commit are known now; the target's progress
    // (read on the sink's thread, HandleRestore) only trims the carry. Setting
    // them here, not on the sink's thread, keeps a checkpoint captured in
    // between (the tick goes on) from holding the pre-restore state: a second
    // crash would restore numbering and rows that lost the checkpoint's changes.
    const SinkSection& sec = *restore->section;
    const uint64_t now_version = restore->state->version();
    offset_ = static_cast<int64_t>(sec.version) - static_cast<int64_t>(restore->restored_version);
    committed_ = now_version;
    newest_checkpoint_version_ = std::max(newest_checkpoint_version_, now_version);
    // The section's rows are after its base; when the table moved since the
    // restore (a sink added later) only a snapshot of the current state is exact.
    carry_snapshot_ = sec.needs_snapshot || now_version != restore->restored_version;
    carry_ = carry_snapshot_ ? BatchVector{} : sec.rows;
    carry_base_ = sec.base;
    has_carry_ = true;
    Epoch epoch;
    epoch.id = sec.epoch;
    epoch.table_version = now_version;
    for (const auto& pos : restore->checkpoint.positions) {
      if (pos.offsets.empty()) continue;
      if (epoch.source_group.empty()) epoch.source_group = pos.group;
      if (pos.group != epoch.source_group) continue;
      for (const auto& [topic, parts] : pos.offsets) {
        for (const auto& [partition, next] : parts) epoch.source_offsets[topic][partition] = next;
      }
    }
    if (!completed_ || completed_->id < epoch.id) completed_ = std::move(epoch);
    restored_ = true;
  }
  shared_->cv.notify_all();
}

void SinkRunner::HandleRestore() {
  std::shared_ptr<SinkRestore> r;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    r = std::move(restore_);
  }
  backlog_.clear();
  backlog_rows_ = 0;
  force_snapshot_ = false;
  if (!r->section) {
    Resume(/*after_restore=*/true);  // not in the checkpoint: start as on a fresh engine
    return;
  }
  std::optional<SinkProgress> progress;
  for (;;) {
    auto loaded = writer_->LoadProgress();
    if (loaded.ok()) {
      progress = *loaded;
      break;
    }
    OnFailure(loaded.status(), 0, /*abort=*/false);
    std::unique_lock<std::mutex> lock(shared_->mu);
    shared_->cv.wait_for(lock,
                         std::chrono::duration<double>(std::max(0.0, retry_at_ - WallNow())),
                         [&] { return stop_ || restore_ != nullptr; });
    if (stop_ || restore_) return;  // a newer restore replaces this one
  }
  const SinkSection& sec = *r->section;
  const uint64_t p = progress ? progress->version : 0;
  BatchVector carry;
  bool snapshot;
  bool keep = true;
  int64_t offset;
  uint64_t committed;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (restore_) return;  // a newer restore replaces this one
    // Nothing was committed since SetRestore (RunEpoch waits for this).
    carry = carry_;
    snapshot = carry_snapshot_;
    offset = offset_;
    committed = committed_;
    read_cursor_ = committed_;
  }
  if (!snapshot && progress && p >= sec.version) {
    keep = false;  // the target committed this checkpoint before the crash
  } else if (!snapshot && (progress ? p >= sec.base : sec.base == 0)) {
    auto rows = KeepVersions(carry, p, UINT64_MAX);  // exactly what the target lacks
    if (rows.ok()) {
      carry = std::move(*rows);
    } else {
      snapshot = true;
    }
  } else {
    snapshot = true;  // the target is behind the section's rows
  }
  if (snapshot) {
    auto rows = SnapshotChangeBatches(*r->state, committed + offset);
    carry = rows.ok() ? std::move(*rows) : BatchVector{};
  }
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (restore_) return;
  carry_ = std::move(carry);
  carry_base_ = keep && !snapshot ? std::max(p, sec.base) : carry_base_;
  carry_snapshot_ = snapshot;
  has_carry_ = keep;
  shared_->cv.notify_all();
}

void SinkRunner::RunEpoch() {
  Epoch epoch;
  BatchVector rows;
  bool snapshot = false;
  bool had_carry;
  uint64_t from;
  int64_t offset;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (!completed_) return;
    epoch = *completed_;
    from = committed_;
    offset = offset_;
    had_carry = has_carry_;
    if (has_carry_) {
      rows = carry_;
      snapshot = carry_snapshot_;
    }
  }
  const uint64_t target = epoch.table_version;
  if (target <= from && !had_carry && !force_snapshot_) {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (completed_ && completed_->id == epoch.id) completed_.reset();  // nothing new
    shared_->cv.notify_all();
    return;
  }
  uint64_t to = std::max(target, from);
  if (force_snapshot_ && !had_carry) {
    // The target is ahead of this table and no restore says how they relate
    // (sink_runner.cc, Resume): its state is replaced by the current one.
    auto state = table_->snapshot();
    auto full = SnapshotChangeBatches(*state, state->version() + offset);
    if (!full.ok()) {
      OnFailure(full.status(), 0);
      return;
    }
    rows = std::move(*full);
    snapshot = true;
    to = std::max(to, state->version());
  } else if (target > from) {
    bool read_snapshot = false;
    uint64_t reached = 0;
    auto more = ReadRange(from, target, offset, &read_snapshot, &reached);
    if (!more.ok()) {
      OnFailure(more.status(), 0);
      return;
    }
    if (read_snapshot) {
      rows = std::move(*more);
      snapshot = true;
      to = reached;
    } else {
      rows.insert(rows.end(), more->begin(), more->end());
    }
  }
  const int64_t in_rows = CountRows(rows);
  backlog_rows_ = in_rows;  // what waits for the target (backpressure past max_backlog_rows)
  Result<BatchVector> out = ApplyMode(rows, snapshot);
  CommitPoint point;
  point.version = to + offset;
  point.epoch = epoch.id;
  point.source_offsets = epoch.source_offsets;
  point.source_group = epoch.source_group;
  Status st = out.ok() ? WriteAndCommit(*out, snapshot, point) : out.status();
  const bool dropped = !st.ok() && OnFailure(st, in_rows);
  if (!st.ok() && !dropped) return;  // retried after the backoff
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (completed_ && completed_->id == epoch.id) completed_.reset();
    has_carry_ = false;
    carry_.clear();
    if (st.ok() && snapshot) ++stats_.snapshots;
  }
  force_snapshot_ = false;
  backlog_rows_ = 0;
  OnSuccess(to, st.ok() ? CountRows(*out) : -1);
}

}  // namespace rill::sink_internal
