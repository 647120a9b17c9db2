// KafkaConnector::Impl: the reader, positions, commits and partition ownership
// (kafka_consumer_internal.h).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <arrow/record_batch.h>

#include "rill/connector/kafka_avro_internal.h"
#include "rill/connector/kafka_client.h"
#include "rill/connector/json_stream_connector.h"
#include "rill/connector/kafka_consumer_internal.h"

namespace rill {

using kafka_internal::DecodedMessages;
using kafka_internal::ListPtr;
using kafka_internal::MessagePtr;
using kafka_internal::Offsets;

namespace {

constexpr int64_t kMaxPendingRejects = 10000;
constexpr double kLagRefreshS = 0.5;
/// How long a revoke waits for the engine to apply the rows it polled.
constexpr auto kAppliedWait = std::chrono::seconds(5);
/// How long an assign waits for the group's committed offsets.
constexpr int kCommittedTimeoutMs = 5000;

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

namespace kafka_internal {

ListPtr ToList(const Offsets& offsets) {
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size())));
  for (const auto& [tp, offset] : offsets) {
    rd_kafka_topic_partition_list_add(list.get(), tp.first.c_str(), tp.second)->offset = offset;
  }
  return list;
}

bool Cooperative(rd_kafka_t* rk) {
  return std::strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
}

void Assign(rd_kafka_t* rk, rd_kafka_topic_partition_list_t* parts) {
  if (Cooperative(rk)) {
    if (rd_kafka_error_t* e = rd_kafka_incremental_assign(rk, parts)) rd_kafka_error_destroy(e);
  } else {
    rd_kafka_assign(rk, parts);
  }
}

void Unassign(rd_kafka_t* rk, rd_kafka_topic_partition_list_t* parts) {
  if (Cooperative(rk)) {
    if (rd_kafka_error_t* e = rd_kafka_incremental_unassign(rk, parts)) {
      rd_kafka_error_destroy(e);
    }
  } else {
    rd_kafka_assign(rk, nullptr);
  }
}

void CloseAndDestroy(rd_kafka_t* rk, int seconds) {
  // Leave the group, but never hang: rd_kafka_consumer_close() waits for the
  // group coordinator forever when the broker is down or gone. Close through a
  // queue for at most `seconds`, then destroy without a consumer close.
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  if (rd_kafka_error_t* error = rd_kafka_consumer_close_queue(rk, queue)) {
    rd_kafka_error_destroy(error);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (!rd_kafka_consumer_closed(rk) && std::chrono::steady_clock::now() < deadline) {
      rd_kafka_event_t* event = rd_kafka_queue_poll(queue, 100);
      if (event == nullptr) continue;
      if (rd_kafka_event_type(event) == RD_KAFKA_EVENT_REBALANCE) {
        // Closing revokes everything: give the partitions up.
        Unassign(rk, rd_kafka_event_topic_partition_list(event));
      }
      rd_kafka_event_destroy(event);
    }
  }
  rd_kafka_queue_destroy(queue);
  rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

}  // namespace kafka_internal

using Impl = KafkaConnector::Impl;

bool Impl::Reads(const char* topic) const {
  return std::find(options.topics.begin(), options.topics.end(), topic) != options.topics.end();
}

void Impl::ReportError(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu);
  ++counters.errors;
  if (!in_outage) {  // once per outage; cleared by the next good message
    in_outage = true;
    pending_error = what;
  }
}

void Impl::OnError(rd_kafka_t*, int err, const char* reason, void* opaque) {
  static_cast<Impl*>(opaque)->ReportError(
      std::string("Kafka error: ") + rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err)) +
      ": " + reason + " (retrying)");
}

void Impl::OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                       rd_kafka_topic_partition_list_t* parts, void* opaque) {
  auto* impl = static_cast<Impl*>(opaque);
  if (err != RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    impl->OnRevoke(parts);
    kafka_internal::Unassign(rk, parts);
    return;
  }
  impl->OnAssign(parts);
  kafka_internal::Assign(rk, parts);
}

void Impl::OnRevoke(const rd_kafka_topic_partition_list_t* parts) {
  std::set<TopicPartition> revoked;
  for (int i = 0; i < parts->cnt; ++i) {
    if (Reads(parts->elems[i].topic)) {
      revoked.emplace(parts->elems[i].topic, parts->elems[i].partition);
    }
  }
  if (revoked.empty()) return;
  // 1. Nothing buffered is handed out any more: rows of revoked partitions
  //    belong to the next owner; partitions kept are read again from their
  //    polled offsets.
  Offsets seek_back;
  {
    std::lock_guard<std::mutex> deliver(deliver_mu);
    std::vector<std::shared_ptr<arrow::RecordBatch>> dropped = buffer.Drain();
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& b : dropped) group.discarded_records += b->num_rows();
    for (const auto& [tp, first] : buffered_from) {
      if (revoked.count(tp)) continue;
      auto at = polled.find(tp);
      seek_back[tp] = at != polled.end() ? at->second : first;
    }
    buffered_from.clear();
    for (auto it = positions.begin(); it != positions.end();) {
      auto at = polled.find(it->first);
      if (at != polled.end()) {
        it->second = at->second;
        ++it;
      } else {
        it = positions.erase(it);
      }
    }
    rejects.clear();
    ++group.revokes;
    group.partitions_revoked += static_cast<int64_t>(revoked.size());
    group.last_rebalance_at = NowSeconds();
  }
  room_cv.notify_all();
  // 2. The rows of the last Poll are in their tables before the hand-back.
  WaitForApplied();
  // 3. Commit what the engine allowed for the revoked partitions, now, and
  //    forget them: nothing later commits them again.
  Offsets handing;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& tp : revoked) {
      auto target = commit_target.find(tp);
      const int64_t committed = target != commit_target.end() ? target->second : -1;
      auto pos = polled.find(tp);
      if (committed >= 0) handing[tp] = committed;
      handed_back[tp] = {committed, pos != polled.end() ? pos->second : committed};
      auto first = first_offset.find(tp);
      handed_back_held[tp] = {first != first_offset.end() ? first->second : -1,
                              rewound.count(tp) > 0, restored_whole.count(tp) > 0};
      positions.erase(tp);
      polled.erase(tp);
      commit_target.erase(tp);
      commit_sent.erase(tp);
      lags.erase(tp);
      check_start.erase(tp);
      resume_at.erase(tp);
      assigned.erase(tp);
      first_offset.erase(tp);
      rewound.erase(tp);
      restored_whole.erase(tp);
    }
  }
  auto committer = options.consumer ? options.consumer->impl()->Committer() : nullptr;
  if (!handing.empty() && committer) {
    Status st = committer(handing);  // the application's transaction
    if (!st.ok()) ReportError("Kafka: committing revoked partitions failed: " + st.ToString());
  } else if (!handing.empty()) {
    rd_kafka_resp_err_t err = rd_kafka_commit(rk, kafka_internal::ToList(handing).get(), 0);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__NO_OFFSET) {
      ReportError(std::string("Kafka: committing revoked partitions failed: ") +
                  rd_kafka_err2str(err));
    }
  }
  if (!seek_back.empty()) {
    Status st = Seek(kafka_internal::ToList(seek_back).get());
    if (!st.ok()) ReportError(st.ToString());
  }
}

bool Impl::Halted() const {
  return stop || (options.consumer && options.consumer->impl()->abort_restores);
}

void Impl::WaitForApplied() {
  std::unique_lock<std::mutex> lock(mu);
  applied_cv.wait_for(lock, kAppliedWait, [this] { return !unapplied || stop.load(); });
}

void Impl::Rewind() {
  ListPtr owned(rd_kafka_topic_partition_list_new(0));
  {
    std::lock_guard<std::mutex> deliver(deliver_mu);
    std::vector<std::shared_ptr<arrow::RecordBatch>> dropped = buffer.Drain();
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& b : dropped) group.discarded_records += b->num_rows();
    buffered_from.clear();
    rejects.clear();
    for (const auto& tp : assigned) {
      rd_kafka_topic_partition_list_add(owned.get(), tp.first.c_str(), tp.second);
      if (first_offset.count(tp)) rewound.insert(tp);
    }
    ++group.rewinds;
  }
  room_cv.notify_all();
  WaitForApplied();
  if (owned->cnt == 0) return;
  if (rd_kafka_committed(rk, owned.get(), kCommittedTimeoutMs) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    for (int i = 0; i < owned->cnt; ++i) owned->elems[i].offset = RD_KAFKA_OFFSET_INVALID;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < owned->cnt; ++i) {
      auto& p = owned->elems[i];
      const TopicPartition tp(p.topic, p.partition);
      if (p.err == RD_KAFKA_RESP_ERR_NO_ERROR && p.offset >= 0) {
        positions[tp] = p.offset;
        polled[tp] = p.offset;
        commit_target[tp] = p.offset;
        commit_sent[tp] = p.offset;
      } else {
        // Nothing committed yet: where the source starts.
        p.offset = options.start == KafkaStart::kLatest ? RD_KAFKA_OFFSET_END
                                                        : RD_KAFKA_OFFSET_BEGINNING;
        positions.erase(tp);
        polled.erase(tp);
        commit_target.erase(tp);
        commit_sent.erase(tp);
      }
      p.err = RD_KAFKA_RESP_ERR_NO_ERROR;
    }
  }
  Status st = Seek(owned.get());
  if (!st.ok()) ReportError("Kafka: rewinding to the committed offsets failed: " + st.ToString());
}

void Impl::OnAssign(rd_kafka_topic_partition_list_t* parts) {
  SetStartOffsets(parts);
  {
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < parts->cnt; ++i) {
      if (Reads(parts->elems[i].topic)) {
        assigned.emplace(parts->elems[i].topic, parts->elems[i].partition);
      }
    }
    ++group.assigns;
    const double now = NowSeconds();
    if (group.last_rebalance_at > 0) group.last_rebalance_seconds = now - group.last_rebalance_at;
    group.last_rebalance_at = now;
  }
  RestoreShards(parts);
}

void Impl::RestoreShards(const rd_kafka_topic_partition_list_t* parts) {
  auto hook = options.consumer ? options.consumer->impl()->ShardHook() : nullptr;
  const std::string& table = self->target_table();
  if (!hook || !options.metadata_columns || !hook->Sharded(table)) {
    std::lock_guard<std::mutex> lock(mu);
    checkpointed.clear();  // the table started empty (RestoresTableFromCheckpoint)
    checkpoint_pending = false;
    return;
  }
  // Keyed tables on topics that are not compacted are restored from their
  // changelog (the input may have lost old records to retention).
  const std::string changelog = hook->Changelog(table, options.topics);
  std::vector<int32_t> drop;
  int64_t moved_away = 0;  // of `drop`: partitions gone to another member
  ListPtr missing(rd_kafka_topic_partition_list_new(0));
  Offsets held;  // of `missing`: held up to this offset by a restored checkpoint
  {
    std::lock_guard<std::mutex> lock(mu);
    std::set<TopicPartition> now;
    for (int i = 0; i < parts->cnt; ++i) {
      const auto& p = parts->elems[i];
      if (!Reads(p.topic)) continue;
      const TopicPartition tp(p.topic, p.partition);
      now.insert(tp);
      if (positions.count(tp)) continue;  // held (resumed)
      rd_kafka_topic_partition_list_add(missing.get(), p.topic, p.partition);
      auto c = checkpoint_pending ? checkpointed.find(tp) : checkpointed.end();
      if (c != checkpointed.end()) {
        held.insert(*c);  // kept if the group's offset is not behind it (below)
      } else {
        // Not held: whatever rows of it the table has are stale (it moved
        // away and back); dropped, then restored.
        drop.push_back(p.partition);
      }
    }
    for (auto it = handed_back.begin(); it != handed_back.end();) {
      if (now.count(it->first)) {
        ++it;
        continue;
      }
      drop.push_back(it->first.second);  // went to another member
      ++moved_away;
      handed_back_held.erase(it->first);
      it = handed_back.erase(it);
    }
    if (checkpoint_pending) {
      // The checkpoint's partitions another member owns now.
      for (const auto& [tp, offset] : checkpointed) {
        if (!now.count(tp)) {
          drop.push_back(tp.second);
          ++moved_away;
        }
      }
      checkpointed.clear();
      checkpoint_pending = false;
    }
  }
  if (missing->cnt == 0 && drop.empty()) return;
  const double t0 = NowSeconds();
  // Each missing partition is replayed from `from` (its start, or the
  // checkpoint's offset) up to the group's committed offset.
  Offsets from, until;
  const bool committed_read =
      missing->cnt == 0 ||
      rd_kafka_committed(rk, missing.get(), kCommittedTimeoutMs) == RD_KAFKA_RESP_ERR_NO_ERROR;
  if (!committed_read) {
    ReportError("Kafka: restoring partition shards: the group's committed offsets could not be "
                "read; the partitions start there without their earlier rows");
  }
  int64_t from_checkpoint = 0, restored_count = 0;
  std::vector<int32_t> from_changelog;  // restored from the changelog (dropped first)
  for (int i = 0; committed_read && i < missing->cnt; ++i) {
    const auto& p = missing->elems[i];
    const TopicPartition tp(p.topic, p.partition);
    const int64_t committed = p.err == RD_KAFKA_RESP_ERR_NO_ERROR ? p.offset : -1;
    auto c = held.find(tp);
    if (c != held.end()) {
      const bool current = committed == c->second || (committed < 0 && c->second == 0);
      if (current || (committed > c->second && changelog.empty())) {
        // The checkpoint's rows are what the group committed up to its
        // offset: only the records after it are replayed (from the input;
        // a table with a changelog takes a checkpoint only when current).
        ++from_checkpoint;
        ++restored_count;
        from[tp] = c->second;
        if (committed > c->second) until[tp] = committed;
        continue;
      }
      // The checkpoint is ahead of the group (its commit never happened), or
      // behind it with a changelog to restore from: its rows of the
      // partition go, and the partition is restored whole.
      drop.push_back(p.partition);
    }
    if (!changelog.empty()) {
      from_changelog.push_back(p.partition);
      ++restored_count;
    } else if (committed > 0) {
      until[tp] = committed;
      ++restored_count;
    }
  }
  if (!committed_read) {
    for (const auto& [tp, offset] : held) drop.push_back(tp.second);
  }
  hook->Begin(table);
  if (!drop.empty()) hook->Drop(table, drop);
  auto [records, bytes] = until.empty() ? std::pair<int64_t, int64_t>{0, 0} : Replay(from, until);
  if (!from_changelog.empty()) {
    Status st = hook->RestoreFromChangelog(table, changelog, from_changelog, &records, &bytes);
    if (!st.ok()) ReportError("Kafka: restoring partition shards from " + changelog + ": " +
                              st.ToString());
  }
  // The replayed rows are in the table before End (the engine ticks
  // meanwhile); a stalled engine (stopping) is waited for 10 s at most.
  double progress_at = NowSeconds();
  int64_t removed = buffer.removed_records();
  while (!Halted()) {
    bool settled;
    {
      std::lock_guard<std::mutex> lock(mu);
      settled = !unapplied && buffer.stats().buffered_records == 0;
    }
    if (settled) break;
    if (buffer.removed_records() != removed) {
      removed = buffer.removed_records();
      progress_at = NowSeconds();
    } else if (NowSeconds() - progress_at > 10) {
      ReportError("Kafka: restoring partition shards: the engine applied nothing for 10 s");
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::set<int32_t> restored;
    for (int i = 0; i < missing->cnt; ++i) restored.insert(missing->elems[i].partition);
    if (!restored.empty()) {
      hook->Restored(table, options.topics, std::vector<int32_t>(restored.begin(), restored.end()));
    }
  }
  hook->End(table);
  std::lock_guard<std::mutex> lock(mu);
  if (committed_read) {
    for (int i = 0; i < missing->cnt; ++i) {
      restored_whole.emplace(missing->elems[i].topic, missing->elems[i].partition);
    }
  }
  group.partitions_restored += restored_count;
  group.partitions_from_checkpoint += from_checkpoint;
  group.partitions_from_changelog += static_cast<int64_t>(from_changelog.size());
  group.partitions_dropped += moved_away;
  group.restored_records += records;
  group.restored_bytes += bytes;
  group.last_restore_seconds = NowSeconds() - t0;
}

std::pair<int64_t, int64_t> Impl::Replay(const Offsets& from, const Offsets& until) {
  std::map<std::string, std::string> config = options.consumer->impl()->options.config;
  config.erase("group.instance.id");
  config["group.id"] = config["group.id"] + "-restore";
  config["enable.auto.commit"] = "false";
  config["enable.partition.eof"] = "true";
  config["isolation.level"] = "read_committed";
  config["client.id"] = self->name() + "-restore";
  // The end of each partition is found by fetching up to it: do not wait at
  // the end for more data (librdkafka's 500 ms) before saying so.
  config["fetch.wait.max.ms"] = "10";
  auto made = MakeKafkaClient(RD_KAFKA_CONSUMER, config, "restore consumer");
  if (!made.ok()) {
    ReportError("Kafka: restoring partition shards: " + made.status().ToString());
    return {0, 0};
  }
  rd_kafka_t* replay = *made;
  rd_kafka_poll_set_consumer(replay);
  Offsets remaining;
  for (const auto& [tp, end] : until) {
    auto f = from.find(tp);
    remaining[tp] = f != from.end() ? f->second : RD_KAFKA_OFFSET_BEGINNING;
  }
  rd_kafka_assign(replay, kafka_internal::ToList(remaining).get());
  remaining = until;
  int64_t records = 0, bytes = 0;
  std::vector<MessagePtr> batch;
  const double deadline = NowSeconds() + 600;
  while (!remaining.empty() && !Halted() && NowSeconds() < deadline) {
    MessagePtr m(rd_kafka_consumer_poll(replay, 100));
    if (!m) continue;
    const TopicPartition tp(rd_kafka_topic_name(m->rkt), m->partition);
    auto it = remaining.find(tp);
    if (it == remaining.end()) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF || (!m->err && m->offset >= it->second)) {
      remaining.erase(it);
      continue;
    }
    if (m->err) {
      ReportError(std::string("Kafka: restoring partition shards: ") +
                  rd_kafka_message_errstr(m.get()));
      continue;
    }
    const bool last = m->offset + 1 >= it->second;
    ++records;
    bytes += static_cast<int64_t>(m->len + m->key_len);
    batch.push_back(std::move(m));
    if (last) remaining.erase(it);
    if (static_cast<int64_t>(batch.size()) >= options.max_batch_messages) {
      ProcessBatch(batch);
      batch.clear();
    }
  }
  if (!batch.empty()) ProcessBatch(batch);
  batch.clear();
  if (!remaining.empty()) {
    ReportError("Kafka: restoring partition shards: " + std::to_string(remaining.size()) +
                " partitions were not replayed whole");
  }
  kafka_internal::CloseAndDestroy(replay, 10);
  return {records, bytes};
}

void Impl::SetStartOffsets(rd_kafka_topic_partition_list_t* parts) {
  // Handed-back partitions: is the group's committed offset still ours?
  ListPtr returning(rd_kafka_topic_partition_list_new(0));
  {
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < parts->cnt; ++i) {
      const auto& p = parts->elems[i];
      if (!Reads(p.topic) || positions.count({p.topic, p.partition})) continue;
      if (handed_back.count({p.topic, p.partition})) {
        rd_kafka_topic_partition_list_add(returning.get(), p.topic, p.partition);
      }
    }
  }
  if (returning->cnt > 0 &&
      rd_kafka_committed(rk, returning.get(), kCommittedTimeoutMs) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    for (int i = 0; i < returning->cnt; ++i) returning->elems[i].offset = RD_KAFKA_OFFSET_INVALID;
  }
  ListPtr timed(rd_kafka_topic_partition_list_new(0));  // start by timestamp
  {
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < returning->cnt; ++i) {
      const auto& r = returning->elems[i];
      auto back = handed_back.find({r.topic, r.partition});
      const int64_t committed = r.err ? RD_KAFKA_OFFSET_INVALID : r.offset;
      if (committed >= 0 && committed == back->second.first) {
        // Nobody read on: our position (and the rows applied) are current,
        // and the table holds of it what it held.
        positions[back->first] = back->second.second;
        polled[back->first] = back->second.second;
        auto held = handed_back_held.find(back->first);
        if (held != handed_back_held.end()) {
          if (held->second.first_offset >= 0) {
            first_offset[back->first] = held->second.first_offset;
          }
          if (held->second.rewound) rewound.insert(back->first);
          if (held->second.restored_whole) restored_whole.insert(back->first);
        }
        ++group.partitions_resumed;
      } else {
        ++group.partitions_moved_away;
      }
      handed_back_held.erase(back->first);
      handed_back.erase(back);
    }
    for (int i = 0; i < parts->cnt; ++i) {
      auto& p = parts->elems[i];
      if (!Reads(p.topic)) continue;
      auto it = positions.find({p.topic, p.partition});
      if (it != positions.end()) {
        p.offset = it->second;
        continue;
      }
      if (rd_kafka_topic_partition_list_find(returning.get(), p.topic, p.partition)) {
        // Moved away: the group's committed offset.
        p.offset = RD_KAFKA_OFFSET_INVALID;
        continue;
      }
      switch (options.start) {
        case KafkaStart::kEarliest: p.offset = RD_KAFKA_OFFSET_BEGINNING; break;
        case KafkaStart::kLatest: p.offset = RD_KAFKA_OFFSET_END; break;
        case KafkaStart::kTimestamp:
          p.offset = options.start_timestamp_ms;
          rd_kafka_topic_partition_list_add(timed.get(), p.topic, p.partition)->offset = p.offset;
          break;
        case KafkaStart::kCommitted:
          p.offset = restored ? RD_KAFKA_OFFSET_BEGINNING : RD_KAFKA_OFFSET_INVALID;
          break;
      }
    }
  }
  if (timed->cnt == 0) return;
  const bool ok = rd_kafka_offsets_for_times(rk, timed.get(), 10000) == RD_KAFKA_RESP_ERR_NO_ERROR;
  if (!ok) ReportError("Kafka: offsets_for_times failed; starting from the earliest offsets");
  for (int i = 0; i < timed->cnt; ++i) {
    const auto& found = timed->elems[i];
    rd_kafka_topic_partition_t* p =
        rd_kafka_topic_partition_list_find(parts, found.topic, found.partition);
    if (p == nullptr) continue;
    p->offset = !ok || found.err ? RD_KAFKA_OFFSET_BEGINNING
                : found.offset >= 0 ? found.offset
                                    : RD_KAFKA_OFFSET_END;
  }
}

void Impl::Run() {
  std::vector<MessagePtr> batch;
  // With on_overflow=error and a row limit, a batch stays within the limit
  // when messages hold one row each (the usual case).
  int64_t max_messages = options.max_batch_messages;
  if (options.limits.on_overflow == OverflowPolicy::kError && options.limits.max_records > 0) {
    max_messages = std::min(max_messages, options.limits.max_records);
  }
  while (!stop) {
    batch.clear();
    for (int64_t i = 0; i < max_messages && !stop; ++i) {
      MessagePtr m(rd_kafka_consumer_poll(rk, i == 0 ? static_cast<int>(options.poll_timeout_ms)
                                                     : 0));
      if (!m) break;
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;  // not an error
      if (m->err) {
        ReportError(std::string("Kafka consumer error: ") + rd_kafka_message_errstr(m.get()));
        continue;
      }
      batch.push_back(std::move(m));
    }
    if (!batch.empty()) Screen(&batch);
    if (!batch.empty()) ProcessBatch(batch);
    RefreshLags();
  }
}

void Impl::Screen(std::vector<MessagePtr>* batch) {
  Offsets seek_back;
  std::vector<MessagePtr> kept;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& m : *batch) {
      TopicPartition tp(rd_kafka_topic_name(m->rkt), m->partition);
      if (seek_back.count(tp)) continue;
      // Taken from librdkafka before a revoke in the same poll round: the
      // partition belongs to another member now.
      if (!assigned.count(tp)) continue;
      auto at = positions.find(tp);
      // Below the position: already buffered once (a fetch that started from a
      // committed offset behind the position). Never twice.
      if (at != positions.end() && m->offset < at->second) continue;
      auto check = check_start.find(tp);
      if (check != check_start.end()) {
        if (at != positions.end() && m->offset > at->second && !check->second) {
          check->second = true;  // once: later gaps are the log's own
          seek_back[tp] = at->second;
          continue;
        }
        check_start.erase(check);
      }
      kept.push_back(std::move(m));
    }
  }
  if (!seek_back.empty()) {
    std::vector<MessagePtr> rest;
    for (auto& m : kept) {
      if (!seek_back.count({rd_kafka_topic_name(m->rkt), m->partition})) {
        rest.push_back(std::move(m));
      }
    }
    kept = std::move(rest);
    Status st = Seek(kafka_internal::ToList(seek_back).get());
    if (!st.ok()) ReportError(st.ToString());
  }
  *batch = std::move(kept);
}

void Impl::ProcessBatch(const std::vector<MessagePtr>& batch) {
  size_t begin = 0;
  bool reported = false;
  while (begin < batch.size()) {
    DecodedMessages decoded;
    {
      std::lock_guard<std::mutex> lock(mu);
      in_outage = false;
      decoded = avro_decoder
                    ? kafka_internal::DecodeAvroMessages(
                          avro_source.get(), avro_decoder.get(), batch, begin, batch.size(),
                          options.metadata_columns, options.pool, options.decode.max_raw_bytes)
                    : kafka_internal::DecodeMessages(decoder.get(), options.decode, batch, begin,
                                                     batch.size(), options.metadata_columns,
                                                     options.pool, keys.get());
    }
    const size_t end = begin + decoded.messages;
    if (end > begin && !Deliver(&decoded, batch, begin, end)) {
      KeepForRestart(batch, begin);
      return;
    }
    begin = end;
    if (decoded.error.ok()) continue;
    // Adding the metadata columns failed (Arrow could not allocate), or the
    // schema registry of format="avro" could not be asked: the
    // messages from `begin` on are neither buffered nor passed; decode them
    // again after a pause. Counted per attempt, reported once per batch.
    {
      std::lock_guard<std::mutex> lock(mu);
      ++counters.errors;
      if (!reported) {
        pending_error = std::string(avro_decoder ? "Kafka: decoding Avro stopped at "
                                                 : "Kafka: adding the metadata columns failed at ") +
                        kafka_internal::MessagePosition(*batch[begin]) +
                        " (retrying): " + decoded.error.ToString();
      }
    }
    reported = true;
    Pause();
    if (stop) {
      KeepForRestart(batch, begin);
      return;
    }
  }
}

bool Impl::Deliver(DecodedMessages* decoded,
                                   const std::vector<MessagePtr>& batch, size_t begin,
                                   size_t end) {
  int64_t rows = 0;
  for (const auto& b : decoded->rows) rows += b->num_rows();
  // on_overflow = error: wait for room (the topic keeps the data meanwhile).
  for (;;) {
    {
      std::lock_guard<std::mutex> deliver(deliver_mu);
      // A batch larger than the limits goes into an empty buffer whole: its
      // messages' positions advance together, so it cannot be split.
      Status st = rows > 0 ? buffer.Push(decoded->rows, /*oversize_when_empty=*/true)
                           : Status::OK();
      if (!st.IsCapacityError()) {
        std::lock_guard<std::mutex> lock(mu);
        counters.parsed_records += rows;
        counters.received_bytes += decoded->received_bytes;
        counters.received_records += decoded->received_records;
        counters.unknown_fields += decoded->unknown_fields;
        counters.tombstones += decoded->tombstones;
        counters.rejected_records += static_cast<int64_t>(decoded->rejects.size());
        CollectRejects(self->name(), std::move(decoded->rejects), kMaxPendingRejects, &rejects,
                       &counters.dropped_records);
        for (size_t i = begin; i < end; ++i) {
          const auto& m = batch[i];
          TopicPartition tp(rd_kafka_topic_name(m->rkt), m->partition);
          buffered_from.emplace(tp, m->offset);
          positions[tp] = m->offset + 1;
          first_offset.emplace(tp, m->offset);
        }
        return true;
      }
      // Not refused for good: the same rows are pushed again once there is room.
      std::lock_guard<std::mutex> lock(mu);
      retried_records += rows;
    }
    if (Halted()) return false;
    Pause();
  }
}

void Impl::KeepForRestart(const std::vector<MessagePtr>& batch,
                                          size_t begin) {
  std::lock_guard<std::mutex> lock(mu);
  for (size_t i = begin; i < batch.size(); ++i) {
    const auto& m = batch[i];
    // Messages of a partition arrive in offset order: the first one counts.
    resume_at.emplace(TopicPartition(rd_kafka_topic_name(m->rkt), m->partition), m->offset);
  }
}

void Impl::Pause() {
  std::unique_lock<std::mutex> lock(mu);
  room_cv.wait_for(lock, std::chrono::milliseconds(options.poll_timeout_ms),
                   [this] { return stop.load(); });
}

void Impl::SendCommit(bool now) {
  // An application's committer commits the targets in its transactions.
  if (options.consumer && options.consumer->impl()->external_commits) return;
  if (!rk) return;  // stopped, and the application's consumer released
  ListPtr list;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (commit_target.empty() || (commit_target == commit_sent && !now)) return;
    const double t = NowSeconds();
    if (!now && t - last_commit_at < options.commit_interval_ms / 1000.0) return;
    list = kafka_internal::ToList(commit_target);
    commit_sent = commit_target;
    last_commit_at = t;
  }
  rd_kafka_commit(rk, list.get(), now ? 0 : 1);
}

Status Impl::Seek(rd_kafka_topic_partition_list_t* parts) {
  if (parts->cnt == 0) return Status::OK();
  rd_kafka_error_t* e = rd_kafka_seek_partitions(rk, parts, 10000);
  if (!e) return Status::OK();
  std::string what = rd_kafka_error_string(e);
  rd_kafka_error_destroy(e);
  return Status::IOError("KafkaConnector '", self->name(), "': seek: ", what);
}

void Impl::RefreshLags() {
  const double now = NowSeconds();
  if (now - last_lag_refresh < kLagRefreshS) return;
  last_lag_refresh = now;
  rd_kafka_topic_partition_list_t* assigned = nullptr;
  if (rd_kafka_assignment(rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR || !assigned) return;
  ListPtr owned(assigned);
  std::map<TopicPartition, int64_t> fresh;
  for (int i = 0; i < assigned->cnt; ++i) {
    const auto& p = assigned->elems[i];
    int64_t low = -1;
    int64_t high = -1;
    if (rd_kafka_get_watermark_offsets(rk, p.topic, p.partition, &low, &high) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        high < 0) {
      continue;
    }
    std::lock_guard<std::mutex> lock(mu);
    auto it = positions.find({p.topic, p.partition});
    int64_t pos = it != positions.end() ? it->second : low;
    fresh[{p.topic, p.partition}] = std::max<int64_t>(0, high - pos);
  }
  std::lock_guard<std::mutex> lock(mu);
  lags = std::move(fresh);
}

}  // namespace rill
