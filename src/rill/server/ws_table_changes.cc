#include "rill/server/ws_table_changes.h"

#include <chrono>

#include <arrow/array.h>
#include <arrow/record_batch.h>

#include "rill/server/json_writer.h"
#include "rill/table/live_table.h"

namespace rill::server {

namespace {

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void AppendRow(const WsChangeRow& row, std::string* out) {
  *out += row.json;
  *out += ",\"_op\":\"";
  *out += ChangeOpName(row.op);
  *out += "\",\"_version\":";
  *out += std::to_string(row.version);
  *out += "}";
}

void AppendHeader(const std::string& table, uint64_t version, int64_t rows, int64_t bytes,
                  std::string* out) {
  *out += "{\"table\":";
  AppendJsonString(table, out);
  *out += ",\"version\":" + std::to_string(version) + ",\"rows\":" + std::to_string(rows) +
          ",\"bytes\":" + std::to_string(bytes);
}

}  // namespace

std::string WsEventFrame(std::string_view channel, std::string_view data) {
  std::string out = "{\"type\":\"event\",\"channel\":";
  AppendJsonString(channel, &out);
  out += ",\"ts\":";
  AppendJsonNumber(WallNow(), &out);
  out += ",\"data\":";
  out += data;
  out += "}";
  return out;
}

Result<std::shared_ptr<const WsTableChanges>> FormatChanges(const ChangeSet& changes,
                                                            const std::vector<int>& key_columns) {
  auto out = std::make_shared<WsTableChanges>();
  out->from_version = changes.from_version;
  out->to_version = changes.to_version;
  out->snapshot = changes.snapshot;
  if (changes.snapshot) return out;  // the clients get snapshots of their own
  out->rows.reserve(static_cast<size_t>(changes.num_rows));
  for (const auto& batch : changes.batches) {
    const int n = batch->num_columns() - 2;
    std::vector<int> table_columns(n);
    for (int i = 0; i < n; ++i) table_columns[i] = i;
    RILL_ASSIGN_OR_RAISE(auto rows, batch->SelectColumns(table_columns));
    std::shared_ptr<arrow::RecordBatch> keys;
    if (!key_columns.empty()) {
      RILL_ASSIGN_OR_RAISE(keys, batch->SelectColumns(key_columns));
    }
    const auto& ops = static_cast<const arrow::StringArray&>(*batch->column(n));
    const auto& versions = static_cast<const arrow::UInt64Array&>(*batch->column(n + 1));
    for (int64_t r = 0; r < batch->num_rows(); ++r) {
      RILL_ASSIGN_OR_RAISE(ChangeOp op, ParseChangeOp(ops.GetView(r)));
      if (op == ChangeOp::kUpdateBefore) continue;
      WsChangeRow row;
      row.op = op;
      row.version = versions.Value(r);
      RILL_RETURN_NOT_OK(AppendJsonRow(*rows, r, &row.json));
      row.json.pop_back();  // the closing brace: _op and _version follow
      if (keys) RILL_RETURN_NOT_OK(AppendJsonRow(*keys, r, &row.key));
      out->rows.push_back(std::move(row));
    }
  }
  return out;
}

Result<std::string> SnapshotFrame(const std::string& channel, const std::string& table,
                                  const TableVersion& version, int64_t max_rows) {
  std::string data;
  AppendHeader(table, version.version(), version.num_rows(), version.nbytes(), &data);
  data += ",\"truncated\":";
  data += version.num_rows() > max_rows ? "true" : "false";
  data += ",\"changes\":[";
  int64_t written = 0;
  const std::string tail = ",\"_op\":\"insert\",\"_version\":" +
                           std::to_string(version.version()) + "}";
  for (const auto& chunk : version.chunks()) {
    if (written >= max_rows) break;
    if (chunk.live_rows == 0) continue;
    RILL_ASSIGN_OR_RAISE(auto rows, TableVersion::LiveBatch(chunk));
    for (int64_t r = 0; r < rows->num_rows() && written < max_rows; ++r, ++written) {
      if (written > 0) data += ",";
      RILL_RETURN_NOT_OK(AppendJsonRow(*rows, r, &data));
      data.pop_back();
      data += tail;
    }
  }
  data += "]}";
  std::string out = "{\"type\":\"snapshot\",\"channel\":";
  AppendJsonString(channel, &out);
  out += ",\"ts\":";
  AppendJsonNumber(WallNow(), &out);
  out += ",\"data\":";
  out += data;
  out += "}";
  return out;
}

int64_t WsPendingChanges::Merge(const WsTableChanges& changes, int64_t max_rows) {
  if (changes.to_version <= client_version_) return 0;
  int64_t merged = 0;
  if (changes.to_version > to_version_) {
    to_version_ = changes.to_version;
    table_rows_ = changes.table_rows;
    table_bytes_ = changes.table_bytes;
  }
  for (const auto& row : changes.rows) {
    if (row.version <= client_version_) continue;
    if (!row.key.empty()) {
      auto it = by_key_.find(row.key);
      if (it != by_key_.end()) {
        ++merged;
        Entry& e = entries_[it->second];
        // Last wins; the op says what the client must do from what it holds.
        const ChangeOp before = e.row.op;
        ChangeOp op = row.op;
        if (before == ChangeOp::kInsert && row.op == ChangeOp::kDelete) {
          e.erased = true;  // never seen by the client
          by_key_.erase(it);
          --live_;
          continue;
        }
        if (before == ChangeOp::kInsert) op = ChangeOp::kInsert;
        if (before != ChangeOp::kInsert && row.op == ChangeOp::kInsert) op = ChangeOp::kUpdate;
        e.row = row;
        e.row.op = op;
        continue;
      }
      by_key_[row.key] = entries_.size();
    }
    if (live_ >= max_rows) {
      entries_.clear();
      by_key_.clear();
      live_ = 0;
      return -1;
    }
    entries_.push_back(Entry{row, false});
    ++live_;
  }
  return merged;
}

void WsPendingChanges::Reset(uint64_t version) {
  client_version_ = std::max(client_version_, version);
  to_version_ = std::max(to_version_, client_version_);
  std::vector<Entry> kept;
  by_key_.clear();
  live_ = 0;
  for (auto& e : entries_) {
    if (e.erased || e.row.version <= client_version_) continue;
    if (!e.row.key.empty()) by_key_[e.row.key] = kept.size();
    kept.push_back(std::move(e));
    ++live_;
  }
  entries_ = std::move(kept);
}

std::string WsPendingChanges::TakeFrame(const std::string& table, int64_t max_rows,
                                        bool* more) {
  std::string data;
  AppendHeader(table, to_version_, table_rows_, table_bytes_, &data);
  data += ",\"from_version\":" + std::to_string(client_version_) + ",\"changes\":[";
  int64_t taken = 0;
  size_t i = 0;
  for (; i < entries_.size() && taken < max_rows; ++i) {
    Entry& e = entries_[i];
    if (e.erased) continue;
    if (taken++ > 0) data += ",";
    AppendRow(e.row, &data);
    if (!e.row.key.empty()) by_key_.erase(e.row.key);
    --live_;
  }
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(i));
  if (!by_key_.empty()) {
    for (auto& [key, index] : by_key_) index -= i;
  }
  *more = live_ > 0;
  data += "],\"more\":";
  data += *more ? "true" : "false";
  data += "}";
  if (!*more) client_version_ = to_version_;
  return data;
}

}  // namespace rill::server
