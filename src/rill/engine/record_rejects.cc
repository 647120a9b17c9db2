// Engine: per-record rejects of decoding connectors -> rill_rejects, with a
// rate-limited engine event per connector.
#include <arrow/builder.h>
#include <arrow/record_batch.h>

#include "rill/connector/connector.h"
#include "rill/engine/engine.h"

namespace rill {

namespace {

/// At most one reject event per connector in this many seconds; the next one
/// says how many records were rejected meanwhile.
constexpr double kRejectEventIntervalS = 10.0;

}  // namespace

void Engine::TakeConnectorRejects(Connector& connector, double now) {
  auto records = connector.TakeRejects();
  if (records.empty()) return;
  const int64_t n = static_cast<int64_t>(records.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.rejected_records += n;
  }
  RejectedRecord first = records.front();
  WriteRecordRejects(connector.target_table(), std::move(records), now);

  auto& [last, pending] = reject_events_[connector.name()];
  pending += n;
  if (last > 0 && now - last < kRejectEventIntervalS) return;
  last = now;
  std::string message = "Rejected " + std::to_string(pending) + " record" +
                        (pending == 1 ? "" : "s") + " from connector '" + connector.name() +
                        "' for table '" + connector.target_table() + "' (kept in rill_rejects)";
  pending = 0;
  RecordEvent(EngineEvent::Engine(Severity::kWarning, connector.name(), message,
                                  "first: " + first.position + ": " + first.error, now));
}

void Engine::WriteRecordRejects(const std::string& table, std::vector<RejectedRecord> records,
                                double now) {
  arrow::DoubleBuilder ts;
  arrow::StringBuilder t, s, r, pos;
  arrow::Int64Builder rows;
  arrow::BinaryBuilder data, raw;
  Status st;
  for (const auto& rec : records) {
    st &= ts.Append(now);
    st &= t.Append(table);
    st &= s.Append(rec.connector);
    st &= r.Append(rec.error);
    st &= rows.Append(1);
    st &= data.AppendNull();
    st &= pos.Append(rec.position);
    st &= raw.Append(rec.raw);
  }
  std::vector<std::shared_ptr<arrow::Array>> cols(8);
  st &= ts.Finish(&cols[0]);
  st &= t.Finish(&cols[1]);
  st &= s.Finish(&cols[2]);
  st &= r.Finish(&cols[3]);
  st &= rows.Finish(&cols[4]);
  st &= data.Finish(&cols[5]);
  st &= pos.Finish(&cols[6]);
  st &= raw.Finish(&cols[7]);
  if (st.ok()) {
    auto batch = arrow::RecordBatch::Make(rejects_->user_schema(),
                                          static_cast<int64_t>(records.size()), cols);
    st = rejects_->Write(batch, now).status();
  }
  if (!st.ok()) {
    RecordEvent(EngineEvent::Engine(Severity::kError, "rill_rejects",
                                    "Could not write " + std::to_string(records.size()) +
                                        " rejected records to rill_rejects",
                                    st.ToString(), now));
  }
}

}  // namespace rill
