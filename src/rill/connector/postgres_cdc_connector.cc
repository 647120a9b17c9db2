// PostgresCDCConnector (postgres_cdc_connector.h): the engine's side: the
// queue of whole transactions, positions, commits and stats. The reader thread
// is in postgres_cdc_reader.cc.
#include <algorithm>
#include <chrono>

#include <arrow/record_batch.h>
#include <fmt/format.h>

#include "rill/connector/postgres_cdc_impl_internal.h"

namespace rill {

namespace {

// The value of "key": in a flat JSON document (our own SavePosition output).
std::optional<std::string_view> JsonValue(std::string_view doc, std::string_view key) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  size_t at = doc.find(quoted);
  if (at == std::string_view::npos) return std::nullopt;
  at = doc.find(':', at + quoted.size());
  if (at == std::string_view::npos) return std::nullopt;
  ++at;
  while (at < doc.size() && doc[at] == ' ') ++at;
  if (at < doc.size() && doc[at] == '"') {
    const size_t end = doc.find('"', at + 1);
    if (end == std::string_view::npos) return std::nullopt;
    return doc.substr(at + 1, end - at - 1);
  }
  size_t end = at;
  while (end < doc.size() && doc[end] != ',' && doc[end] != '}' && doc[end] != ' ') ++end;
  return doc.substr(at, end - at);
}

}  // namespace

std::string EncodePgCdcPosition(const std::string& slot, const PgCdcPosition& position) {
  return fmt::format("{{\"slot\": \"{}\", \"snapshot_done\": {}, \"lsn\": \"{}\"}}", slot,
                     position.snapshot_done ? "true" : "false",
                     pgcdc_internal::FormatLsn(position.lsn));
}

Result<PgCdcPosition> DecodePgCdcPosition(std::string_view document, const std::string& slot) {
  auto doc_slot = JsonValue(document, "slot");
  auto done = JsonValue(document, "snapshot_done");
  auto lsn = JsonValue(document, "lsn");
  if (!doc_slot || !done || !lsn || (*done != "true" && *done != "false")) {
    return Status::Invalid("not a PostgresCDCConnector position: ", document);
  }
  if (*doc_slot != slot) {
    return Status::Invalid("the checkpoint's position is of replication slot '", *doc_slot,
                           "', this connector reads slot '", slot, "'");
  }
  PgCdcPosition p;
  p.snapshot_done = *done == "true";
  RILL_ASSIGN_OR_RAISE(p.lsn, pgcdc_internal::ParseLsn(*lsn));
  return p;
}

bool PostgresCDCConnector::Impl::Push(Item item, const std::function<void()>& idle) {
  std::unique_lock<std::mutex> lock(mu);
  while (!stop.load() && !queue.empty() &&
         buffered_rows + item.rows > options.max_buffer_records) {
    room.wait_for(lock, std::chrono::milliseconds(100));
    if (idle) {
      lock.unlock();
      idle();
      lock.lock();
    }
  }
  if (stop.load()) return false;
  buffered_rows += item.rows;
  stats.buffered_records = buffered_rows;
  stats.pushed_records += item.rows;
  queue.push_back(std::move(item));
  return true;
}

void PostgresCDCConnector::Impl::Alert(Status status) {
  std::lock_guard<std::mutex> lock(mu);
  if (alerts.size() < 16) alerts.push_back(std::move(status));
}

Result<std::shared_ptr<PostgresCDCConnector>> PostgresCDCConnector::Make(
    std::string target_table, PostgresCDCOptions options) {
  if (options.dsn.empty()) return Status::Invalid("PostgresCDCConnector: dsn is empty");
  if (options.table.empty()) return Status::Invalid("PostgresCDCConnector: table is empty");
  if (options.slot_name.empty()) {
    return Status::Invalid("PostgresCDCConnector: slot_name is empty");
  }
  for (char c : options.slot_name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return Status::Invalid("slot_name '", options.slot_name,
                             "': PostgreSQL allows only lower case letters, digits and '_'");
    }
  }
  RILL_ASSIGN_OR_RAISE(auto numeric_as, pgcdc_internal::ParseNumericAs(options.numeric_as));
  if (options.max_buffer_records <= 0 || options.snapshot_batch_rows <= 0 ||
      options.status_interval_ms <= 0) {
    return Status::Invalid(
        "PostgresCDCConnector: max_buffer_records, snapshot_batch_rows and "
        "status_interval_ms must be positive");
  }
  auto c = std::shared_ptr<PostgresCDCConnector>(
      new PostgresCDCConnector(std::move(target_table), std::move(options)));
  c->impl_->numeric_as = numeric_as;
  return c;
}

PostgresCDCConnector::PostgresCDCConnector(std::string target_table,
                                           PostgresCDCOptions options)
    : Connector(options.name, target_table, nullptr), impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->name = name();
  impl_->publication = impl_->options.publication.empty()
                           ? "rill_" + impl_->options.slot_name
                           : impl_->options.publication;
}

PostgresCDCConnector::~PostgresCDCConnector() { Stop(); }

Status PostgresCDCConnector::Start() {
  if (impl_->running) return Status::OK();
  impl_->stop.store(false);
  impl_->running = true;
  impl_->thread = std::thread([impl = impl_.get()] { impl->Run(); });
  return Status::OK();
}

void PostgresCDCConnector::Stop() {
  if (!impl_->running) return;
  impl_->stop.store(true);
  impl_->room.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->running = false;
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> PostgresCDCConnector::Poll() {
  impl_->polled_once.store(true);
  std::deque<Impl::Item> items;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->alerts.empty()) {
      Status st = std::move(impl_->alerts.front());
      impl_->alerts.erase(impl_->alerts.begin());
      return st;
    }
    items.swap(impl_->queue);
    impl_->stats.drained_records += impl_->buffered_rows;
    impl_->buffered_rows = 0;
    impl_->stats.buffered_records = 0;
    for (const auto& item : items) impl_->stats.rejected_records += item.rejects.size();
  }
  impl_->room.notify_all();
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  for (auto& item : items) {
    for (auto& b : item.batches) out.push_back(std::move(b));
    for (auto& r : item.rejects) impl_->polled_rejects.push_back(std::move(r));
    impl_->polled = item.position;
  }
  return out;
}

std::vector<RejectedRecord> PostgresCDCConnector::TakeRejects() {
  return std::exchange(impl_->polled_rejects, {});
}

void PostgresCDCConnector::SetTargetSchema(const std::shared_ptr<arrow::Schema>& schema) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->target_schema = schema;
}

ConnectorStats PostgresCDCConnector::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

Result<std::string> PostgresCDCConnector::SavePosition() const {
  return EncodePgCdcPosition(impl_->options.slot_name, impl_->polled);
}

Status PostgresCDCConnector::RestorePosition(std::string_view position) {
  RILL_ASSIGN_OR_RAISE(PgCdcPosition p, DecodePgCdcPosition(position, impl_->options.slot_name));
  const bool was_running = impl_->running;
  Stop();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->queue.clear();
    impl_->buffered_rows = 0;
    impl_->stats.buffered_records = 0;
    impl_->restored = p;
  }
  impl_->polled = p;
  impl_->polled_rejects.clear();
  if (was_running) return Start();
  return Status::OK();
}

void PostgresCDCConnector::CommitApplied() {
  if (!impl_->polled.snapshot_done) return;
  uint64_t target = impl_->confirm_target.load();
  while (target < impl_->polled.lsn &&
         !impl_->confirm_target.compare_exchange_weak(target, impl_->polled.lsn)) {
  }
}

void PostgresCDCConnector::CommitCheckpointed(std::string_view position) {
  auto p = DecodePgCdcPosition(position, impl_->options.slot_name);
  if (!p.ok() || !p->snapshot_done) return;
  uint64_t target = impl_->confirm_target.load();
  while (target < p->lsn && !impl_->confirm_target.compare_exchange_weak(target, p->lsn)) {
  }
}

const std::string& PostgresCDCConnector::publication() const { return impl_->publication; }

uint64_t PostgresCDCConnector::confirmed_lsn() const { return impl_->confirm_target.load(); }

}  // namespace rill
