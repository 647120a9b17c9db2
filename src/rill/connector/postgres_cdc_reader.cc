// PostgresCDCConnector's reader thread (postgres_cdc_connector.h): one
// session = a control connection (catalog, publication, COPY, lag queries)
// and a replication connection (slot, START_REPLICATION); a failed session is
// reported once and retried with a backoff.
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <fmt/format.h>
#include <libpq-fe.h>

#include "rill/connector/postgres_cdc_impl_internal.h"

namespace rill {

namespace {

using namespace pgcdc_internal;  // NOLINT: this file's vocabulary

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;
struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using PgConnPtr = std::unique_ptr<PGconn, ConnDeleter>;

// Text formats the value parsers read (ISO dates, UTC, exact floats, hex bytea).
constexpr char kSessionOptions[] =
    "-c datestyle=ISO -c timezone=UTC -c extra_float_digits=3 -c intervalstyle=postgres "
    "-c bytea_output=hex";
// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01).
constexpr int64_t kPgEpochMicros = 946684800LL * 1000000;

using Clock = std::chrono::steady_clock;

std::string Trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string QuoteIdent(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string QuoteLiteral(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

Status PgError(PGconn* conn, const PGresult* result, const std::string& what) {
  std::string message = Trim(result != nullptr ? PQresultErrorMessage(result) : "");
  if (message.empty()) message = Trim(PQerrorMessage(conn));
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  return Status::IOError(what, ": ", message, state != nullptr ? " (SQLSTATE " : "",
                         state != nullptr ? state : "", state != nullptr ? ")" : "");
}

std::string SqlState(const PGresult* result) {
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  return state != nullptr ? state : "";
}

Result<PgConnPtr> Connect(const std::string& dsn, bool replication) {
  std::vector<const char*> keys = {"connect_timeout", "fallback_application_name", "dbname"};
  std::vector<const char*> values = {"10", "rill-cdc", dsn.c_str()};
  if (replication) {
    keys.push_back("replication");
    values.push_back("database");
  }
  keys.push_back("options");
  values.push_back(kSessionOptions);
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PgConnPtr conn(PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1));
  if (!conn) return Status::OutOfMemory("libpq could not allocate a connection");
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    return Status::IOError("PostgreSQL connection failed: ", Trim(PQerrorMessage(conn.get())));
  }
  return conn;
}

Result<PgResult> Query(PGconn* conn, const std::string& sql,
                       const std::vector<std::string>& params, ExecStatusType expected) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  PgResult r(params.empty() ? PQexec(conn, sql.c_str())
                            : PQexecParams(conn, sql.c_str(), static_cast<int>(values.size()),
                                           nullptr, values.data(), nullptr, nullptr, 0));
  if (!r || PQresultStatus(r.get()) != expected) {
    return PgError(conn, r.get(), sql.substr(0, 60));
  }
  return r;
}

Status Exec(PGconn* conn, const std::string& sql) {
  return Query(conn, sql, {}, PGRES_COMMAND_OK).status();
}

/// The source table as the catalog describes it.
struct TableInfo {
  PgRelation relation;
  std::vector<std::string> primary_key;
  int64_t reltuples = -1;
};

Result<TableInfo> ResolveTable(PGconn* conn, const std::string& table) {
  TableInfo info;
  RILL_ASSIGN_OR_RAISE(
      auto r, Query(conn,
                    "SELECT c.oid, n.nspname, c.relname, c.relreplident, c.reltuples::bigint "
                    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE c.oid = to_regclass($1)",
                    {table}, PGRES_TUPLES_OK));
  if (PQntuples(r.get()) != 1) {
    return Status::KeyError("source table '", table, "' does not exist");
  }
  PgRelation& rel = info.relation;
  rel.oid = static_cast<uint32_t>(std::stoul(PQgetvalue(r.get(), 0, 0)));
  rel.nspname = PQgetvalue(r.get(), 0, 1);
  rel.relname = PQgetvalue(r.get(), 0, 2);
  rel.replica_identity = PQgetvalue(r.get(), 0, 3)[0];
  info.reltuples = std::stoll(PQgetvalue(r.get(), 0, 4));
  const std::string oid = std::to_string(rel.oid);
  RILL_ASSIGN_OR_RAISE(
      auto cols, Query(conn,
                       "SELECT attname, atttypid, atttypmod FROM pg_attribute "
                       "WHERE attrelid = $1::oid AND attnum > 0 AND NOT attisdropped "
                       "AND attgenerated = '' ORDER BY attnum",
                       {oid}, PGRES_TUPLES_OK));
  for (int i = 0; i < PQntuples(cols.get()); ++i) {
    PgColumn c;
    c.name = PQgetvalue(cols.get(), i, 0);
    c.type_oid = static_cast<uint32_t>(std::stoul(PQgetvalue(cols.get(), i, 1)));
    c.typmod = std::stoi(PQgetvalue(cols.get(), i, 2));
    rel.columns.push_back(std::move(c));
  }
  // The primary key, else the replica identity index.
  RILL_ASSIGN_OR_RAISE(
      auto keys, Query(conn,
                       "SELECT a.attname FROM pg_index i "
                       "CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord) "
                       "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
                       "WHERE i.indrelid = $1::oid AND (i.indisprimary OR i.indisreplident) "
                       "ORDER BY i.indisprimary DESC, k.ord",
                       {oid}, PGRES_TUPLES_OK));
  for (int i = 0; i < PQntuples(keys.get()); ++i) {
    std::string k = PQgetvalue(keys.get(), i, 0);
    if (std::find(info.primary_key.begin(), info.primary_key.end(), k) ==
        info.primary_key.end()) {
      info.primary_key.push_back(std::move(k));
    }
  }
  for (auto& c : rel.columns) {
    c.key = rel.replica_identity == 'f' ||
            std::find(info.primary_key.begin(), info.primary_key.end(), c.name) !=
                info.primary_key.end();
  }
  return info;
}

/// One connection pair and the stream's state.
class Session {
 public:
  Session(PostgresCDCConnector::Impl* impl, PgCdcPosition* state, bool need_snapshot)
      : impl_(impl), o_(impl->options), state_(state), need_snapshot_(need_snapshot) {}

  /// Run until stopped (OK) or failed. `streaming` is set once the stream runs.
  Status Run(bool* streaming) {
    RILL_ASSIGN_OR_RAISE(control_, Connect(o_.dsn, /*replication=*/false));
    RILL_ASSIGN_OR_RAISE(repl_, Connect(o_.dsn, /*replication=*/true));
    RILL_ASSIGN_OR_RAISE(info_, ResolveTable(control_.get(), o_.table));
    if (need_snapshot_) {
      RILL_RETURN_NOT_OK(EnsurePublication());
      RILL_RETURN_NOT_OK(DropSlot());
      RILL_RETURN_NOT_OK(Snapshot());
    } else {
      RILL_ASSIGN_OR_RAISE(bool exists, SlotExists());
      if (!exists) {
        if (state_->snapshot_done && state_->lsn != 0) {
          return Status::IOError("replication slot '", o_.slot_name,
                                 "' does not exist (dropped?): the changes after LSN ",
                                 FormatLsn(state_->lsn),
                                 " cannot be read; remove the checkpoint to take a new snapshot");
        }
        RILL_RETURN_NOT_OK(EnsurePublication());
        RILL_ASSIGN_OR_RAISE(auto created, CreateSlot(/*export_snapshot=*/false));
        (void)created;
      }
      RILL_ASSIGN_OR_RAISE(bool pub, PublicationExists());
      if (!pub) {
        return Status::IOError("publication '", impl_->publication,
                               "' does not exist (dropped?)");
      }
    }
    return Stream(streaming);
  }

 private:
  Result<bool> SlotExists() {
    RILL_ASSIGN_OR_RAISE(auto r, Query(control_.get(),
                                       "SELECT 1 FROM pg_replication_slots WHERE slot_name = $1",
                                       {o_.slot_name}, PGRES_TUPLES_OK));
    return PQntuples(r.get()) > 0;
  }

  Result<bool> PublicationExists() {
    RILL_ASSIGN_OR_RAISE(auto r, Query(control_.get(),
                                       "SELECT 1 FROM pg_publication WHERE pubname = $1",
                                       {impl_->publication}, PGRES_TUPLES_OK));
    return PQntuples(r.get()) > 0;
  }

  // The default publication is created (or given the table); a named one must
  // exist and hold the table.
  Status EnsurePublication() {
    const std::string qualified =
        QuoteIdent(info_.relation.nspname) + "." + QuoteIdent(info_.relation.relname);
    RILL_ASSIGN_OR_RAISE(bool exists, PublicationExists());
    const bool ours = o_.publication.empty();
    if (!exists) {
      if (!ours) {
        return Status::IOError("publication '", impl_->publication, "' does not exist");
      }
      return Exec(control_.get(),
                  "CREATE PUBLICATION " + QuoteIdent(impl_->publication) + " FOR TABLE " + qualified);
    }
    RILL_ASSIGN_OR_RAISE(
        auto r, Query(control_.get(),
                      "SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND "
                      "schemaname = $2 AND tablename = $3",
                      {impl_->publication, info_.relation.nspname, info_.relation.relname},
                      PGRES_TUPLES_OK));
    if (PQntuples(r.get()) > 0) return Status::OK();
    if (!ours) {
      return Status::IOError("publication '", impl_->publication, "' does not publish table ",
                             qualified);
    }
    return Exec(control_.get(),
                "ALTER PUBLICATION " + QuoteIdent(impl_->publication) + " ADD TABLE " + qualified);
  }

  Status DropSlot() {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (!impl_->stop.load()) {
      PgResult r(PQexec(repl_.get(), ("DROP_REPLICATION_SLOT " + QuoteIdent(o_.slot_name)).c_str()));
      const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
      if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Status::OK();
      const std::string state = SqlState(r.get());
      if (state == "42704") return Status::OK();  // undefined_object: no such slot
      // object_in_use: a killed predecessor's walsender has not noticed yet.
      if (state != "55006" || Clock::now() > deadline) {
        return PgError(repl_.get(), r.get(), "DROP_REPLICATION_SLOT");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return Status::Cancelled("stopping");
  }

  struct CreatedSlot {
    uint64_t consistent_point = 0;
    std::string snapshot_name;
  };

  Result<CreatedSlot> CreateSlot(bool export_snapshot) {
    const std::string sql = "CREATE_REPLICATION_SLOT " + QuoteIdent(o_.slot_name) +
                            " LOGICAL pgoutput " +
                            (export_snapshot ? "EXPORT_SNAPSHOT" : "NOEXPORT_SNAPSHOT");
    RILL_ASSIGN_OR_RAISE(auto r, Query(repl_.get(), sql, {}, PGRES_TUPLES_OK));
    CreatedSlot s;
    RILL_ASSIGN_OR_RAISE(s.consistent_point, ParseLsn(PQgetvalue(r.get(), 0, 1)));
    if (!PQgetisnull(r.get(), 0, 2)) s.snapshot_name = PQgetvalue(r.get(), 0, 2);
    return s;
  }

  void SnapshotStats(int64_t rows, int64_t total, Clock::time_point started, bool done) {
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    const int64_t rate = seconds > 0 ? static_cast<int64_t>(rows / seconds) : 0;
    std::lock_guard<std::mutex> lock(impl_->mu);
    ConnectorStats& s = impl_->stats;
    s.snapshot_rows = rows;
    s.snapshot_rows_total = total;
    s.snapshot_rows_per_s = rate;
    s.snapshot_eta_seconds = done ? 0 : (total >= 0 && rate > 0)
                                            ? std::max<int64_t>(0, (total - rows) / rate)
                                            : -1;
    s.snapshot_done = done ? 1 : 0;
  }

  Result<std::unique_ptr<ChangeBatcher>> MakeBatcher(const PgRelation& relation) {
    std::shared_ptr<arrow::Schema> target;
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      target = impl_->target_schema;
    }
    RILL_ASSIGN_OR_RAISE(auto b, ChangeBatcher::Make(relation, target, info_.primary_key,
                                                     impl_->numeric_as, impl_->name));
    if (!b->unknown_columns().empty()) {
      std::string names;
      for (const auto& n : b->unknown_columns()) names += (names.empty() ? "" : ", ") + n;
      impl_->Count(&ConnectorStats::unknown_fields,
                   static_cast<int64_t>(b->unknown_columns().size()));
      impl_->Alert(Status::Invalid("columns of ", relation.nspname, ".", relation.relname,
                                   " not in target table '", o_.table, "' are ignored: ",
                                   names));
    }
    return b;
  }

  // The exported snapshot of a new slot, copied with COPY; the stream goes on
  // from the slot's consistent point.
  Status Snapshot() {
    RILL_ASSIGN_OR_RAISE(CreatedSlot slot, CreateSlot(/*export_snapshot=*/true));
    RILL_RETURN_NOT_OK(Exec(control_.get(), "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
    RILL_RETURN_NOT_OK(
        Exec(control_.get(), "SET TRANSACTION SNAPSHOT " + QuoteLiteral(slot.snapshot_name)));
    // The table as of the snapshot (its columns and size then).
    RILL_ASSIGN_OR_RAISE(info_, ResolveTable(control_.get(), o_.table));
    RILL_ASSIGN_OR_RAISE(auto batcher, MakeBatcher(info_.relation));
    std::string columns;
    for (const auto& c : info_.relation.columns) {
      columns += (columns.empty() ? "" : ", ") + QuoteIdent(c.name);
    }
    const std::string copy = "COPY " + QuoteIdent(info_.relation.nspname) + "." +
                             QuoteIdent(info_.relation.relname) + " (" + columns +
                             ") TO STDOUT";
    RILL_RETURN_NOT_OK(Query(control_.get(), copy, {}, PGRES_COPY_OUT).status());
    const auto started = Clock::now();
    const int64_t total = info_.reltuples;
    int64_t rows = 0;
    SnapshotStats(0, total, started, false);
    if (impl_->target_may_hold_rows) {
      // A re-snapshot replaces what the table held; the truncate row is a batch
      // of its own (an append target rejects it, not the rows).
      batcher->AddTruncate();
      PostgresCDCConnector::Impl::Item item;
      RILL_ASSIGN_OR_RAISE(auto batch, batcher->Flush());
      item.rows = 1;
      item.batches.push_back(std::move(batch));
      if (!impl_->Push(std::move(item), nullptr)) return Status::Cancelled("stopping");
    }
    impl_->target_may_hold_rows = true;
    std::vector<PgValue> fields;
    std::string scratch;
    while (true) {
      char* buf = nullptr;
      const int n = PQgetCopyData(control_.get(), &buf, /*async=*/0);
      if (n == -1) break;
      if (n < 0) return PgError(control_.get(), nullptr, "COPY");
      std::string_view line(buf, static_cast<size_t>(n));
      if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
      scratch.reserve(line.size());
      SplitCopyLine(line, &fields, &scratch);
      batcher->AddUpsert(fields, {}, "snapshot row " + std::to_string(rows + 1));
      PQfreemem(buf);
      ++rows;
      impl_->Count(&ConnectorStats::received_bytes, n);
      if (batcher->rows() >= o_.snapshot_batch_rows) {
        PostgresCDCConnector::Impl::Item item;
        RILL_ASSIGN_OR_RAISE(auto batch, batcher->Flush());
        item.rows = batch->num_rows();
        item.batches.push_back(std::move(batch));
        item.rejects = batcher->TakeRejects();
        item.position = PgCdcPosition{false, 0};
        if (!impl_->Push(std::move(item), nullptr)) return Status::Cancelled("stopping");
        SnapshotStats(rows, total, started, false);
      }
      if (impl_->stop.load()) return Status::Cancelled("stopping");
    }
    PgResult end(PQgetResult(control_.get()));
    if (!end || PQresultStatus(end.get()) != PGRES_COMMAND_OK) {
      return PgError(control_.get(), end.get(), "COPY");
    }
    while (PgResult more{PQgetResult(control_.get())}) {
    }
    RILL_RETURN_NOT_OK(Exec(control_.get(), "COMMIT"));
    PostgresCDCConnector::Impl::Item item;
    RILL_ASSIGN_OR_RAISE(auto batch, batcher->Flush());
    if (batch) {
      item.rows = batch->num_rows();
      item.batches.push_back(std::move(batch));
    }
    item.rejects = batcher->TakeRejects();
    item.position = PgCdcPosition{true, slot.consistent_point};
    impl_->Count(&ConnectorStats::received_records, rows);
    impl_->Count(&ConnectorStats::parsed_records, rows);
    if (!impl_->Push(std::move(item), nullptr)) return Status::Cancelled("stopping");
    SnapshotStats(rows, total, started, true);
    state_->snapshot_done = true;
    state_->lsn = slot.consistent_point;
    return Status::OK();
  }

  Status SendStatus(bool reply_requested) {
    char msg[34];
    auto put64 = [&](int at, uint64_t v) {
      for (int i = 0; i < 8; ++i) msg[at + i] = static_cast<char>(v >> (56 - 8 * i));
    };
    const uint64_t flush = impl_->confirm_target.load();
    const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count() -
                        kPgEpochMicros;
    msg[0] = 'r';
    put64(1, std::max(received_, flush));
    put64(9, flush);
    put64(17, flush);
    put64(25, static_cast<uint64_t>(now));
    msg[33] = reply_requested ? 1 : 0;
    if (PQputCopyData(repl_.get(), msg, sizeof msg) != 1 || PQflush(repl_.get()) != 0) {
      return PgError(repl_.get(), nullptr, "standby status update");
    }
    last_status_ = Clock::now();
    return Status::OK();
  }

  // The slot's lag (and whether it still exists), on the control connection.
  Status CheckSlot() {
    RILL_ASSIGN_OR_RAISE(
        auto r, Query(control_.get(),
                      "SELECT COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)"
                      "::bigint, 0) FROM pg_replication_slots WHERE slot_name = $1",
                      {o_.slot_name}, PGRES_TUPLES_OK));
    if (PQntuples(r.get()) == 0) {
      return Status::IOError("replication slot '", o_.slot_name, "' was dropped");
    }
    const int64_t lag = std::stoll(PQgetvalue(r.get(), 0, 0));
    impl_->Set(&ConnectorStats::lag_bytes, lag);
    if (o_.lag_alert_bytes > 0 && lag > o_.lag_alert_bytes && !lag_alerted_) {
      lag_alerted_ = true;
      impl_->Alert(Status::CapacityError("replication slot '", o_.slot_name, "' lags ", lag,
                                         " bytes behind the server (lag_alert_bytes ",
                                         o_.lag_alert_bytes, ")"));
    } else if (lag <= o_.lag_alert_bytes / 2) {
      lag_alerted_ = false;
    }
    last_check_ = Clock::now();
    return Status::OK();
  }

  Status Periodic(bool force_status) {
    const auto interval = std::chrono::milliseconds(o_.status_interval_ms);
    const auto now = Clock::now();
    if (force_status || now - last_status_ >= interval) {
      // Between transactions, ask for a keepalive: its position lets the slot
      // advance even when no change of the table arrives.
      RILL_RETURN_NOT_OK(SendStatus(/*reply_requested=*/!in_txn_));
    }
    if (now - last_check_ >= interval) RILL_RETURN_NOT_OK(CheckSlot());
    return Status::OK();
  }

  Status StartBatcher(const PgRelation& relation) {
    if (batcher_ && batcher_->rows() > 0) {
      RILL_ASSIGN_OR_RAISE(auto b, batcher_->Flush());
      txn_batches_.push_back(std::move(b));
      for (auto& r : batcher_->TakeRejects()) txn_rejects_.push_back(std::move(r));
    }
    if (batcher_) {
      for (const auto& now : relation.columns) {
        for (const auto& before : relation_.columns) {
          if (before.name != now.name) continue;
          auto a = MapPgType(before.type_oid, before.typmod, impl_->numeric_as);
          auto b = MapPgType(now.type_oid, now.typmod, impl_->numeric_as);
          if (!CompatibleTypeChange(*a, *b)) {
            incompatible_ = fmt::format("column '{}' changed from {} to {}", now.name,
                                        a->ToString(), b->ToString());
            impl_->Alert(Status::Invalid(
                "incompatible schema change of ", relation.nspname, ".", relation.relname,
                ": ", incompatible_, "; its changes go to rill_rejects"));
          }
        }
      }
    }
    relation_ = relation;
    RILL_ASSIGN_OR_RAISE(batcher_, MakeBatcher(relation));
    return Status::OK();
  }

  void RejectChange(const PgMessage& m) {
    RejectedRecord r;
    r.connector = impl_->name;
    r.position = Position();
    r.error = "incompatible schema change: " + incompatible_;
    r.raw = std::string(1, m.type) + " change of " + relation_.relname;
    r.raw_size = static_cast<int64_t>(r.raw.size());
    txn_rejects_.push_back(std::move(r));
  }

  std::string Position() const {
    return fmt::format("lsn {}, xid {}", FormatLsn(txn_lsn_), txn_xid_);
  }

  Status Handle(std::string_view payload) {
    RILL_RETURN_NOT_OK(ParsePgOutput(payload, &msg_));
    const PgMessage& m = msg_;
    switch (m.type) {
      case 'B':
        in_txn_ = true;
        txn_lsn_ = m.lsn;
        txn_xid_ = m.xid;
        // Its commit is at or before the position we resume from: already had.
        skip_txn_ = state_->snapshot_done && m.lsn < state_->lsn;
        txn_changes_ = 0;
        return Status::OK();
      case 'R':
        if (m.relation.oid != info_.relation.oid) return Status::OK();
        return StartBatcher(m.relation);
      case 'I':
      case 'U':
      case 'D': {
        if (m.relid != info_.relation.oid || skip_txn_) return Status::OK();
        ++txn_changes_;
        if (!incompatible_.empty()) {
          RejectChange(m);
          return Status::OK();
        }
        if (m.type == 'I') {
          batcher_->AddUpsert(m.new_tuple, {}, Position());
        } else if (m.type == 'U') {
          batcher_->AddUpdate(m.old_kind, m.old_tuple, m.new_tuple, Position());
        } else {
          batcher_->AddDelete(m.old_tuple, Position());
        }
        return Status::OK();
      }
      case 'T':
        if (skip_txn_) return Status::OK();
        if (std::find(m.truncate_relids.begin(), m.truncate_relids.end(),
                      info_.relation.oid) != m.truncate_relids.end()) {
          ++txn_changes_;
          batcher_->AddTruncate();
        }
        return Status::OK();
      case 'C': {
        in_txn_ = false;
        if (skip_txn_ || m.end_lsn <= state_->lsn) {
          skip_txn_ = false;
          txn_batches_.clear();
          txn_rejects_.clear();
          if (batcher_) {
            (void)batcher_->Flush();
            (void)batcher_->TakeRejects();
          }
          return Status::OK();
        }
        PostgresCDCConnector::Impl::Item item;
        RILL_ASSIGN_OR_RAISE(auto last, batcher_->Flush());
        for (auto& r : batcher_->TakeRejects()) txn_rejects_.push_back(std::move(r));
        item.batches = std::move(txn_batches_);
        if (last) item.batches.push_back(std::move(last));
        for (const auto& b : item.batches) item.rows += b->num_rows();
        item.rejects = std::move(txn_rejects_);
        txn_batches_.clear();
        txn_rejects_.clear();
        item.position = PgCdcPosition{true, m.end_lsn};
        impl_->Count(&ConnectorStats::received_records, txn_changes_);
        impl_->Count(&ConnectorStats::parsed_records, item.rows);
        if (!impl_->Push(std::move(item), [this] { (void)Periodic(false); })) {
          return Status::Cancelled("stopping");
        }
        state_->lsn = m.end_lsn;
        return Status::OK();
      }
      default:
        return Status::OK();
    }
  }

  // A keepalive's position between transactions: everything before it was sent.
  Status Advance(uint64_t wal_end) {
    if (in_txn_ || wal_end <= state_->lsn) return Status::OK();
    PostgresCDCConnector::Impl::Item item;
    item.position = PgCdcPosition{true, wal_end};
    if (!impl_->Push(std::move(item), nullptr)) return Status::Cancelled("stopping");
    state_->lsn = wal_end;
    return Status::OK();
  }

  Status Stream(bool* streaming) {
    const std::string sql =
        fmt::format("START_REPLICATION SLOT {} LOGICAL {} (proto_version '1', "
                    "publication_names {})",
                    QuoteIdent(o_.slot_name), FormatLsn(state_->snapshot_done ? state_->lsn : 0),
                    QuoteLiteral(QuoteIdent(impl_->publication)));
    RILL_RETURN_NOT_OK(Query(repl_.get(), sql, {}, PGRES_COPY_BOTH).status());
    RILL_ASSIGN_OR_RAISE(batcher_, MakeBatcher(info_.relation));
    relation_ = info_.relation;
    state_->snapshot_done = true;
    *streaming = true;
    if (impl_->reader_failed) {  // streaming again after a failed session
      impl_->reader_failed = false;
      impl_->Count(&ConnectorStats::reconnects, 1);
    }
    RILL_RETURN_NOT_OK(CheckSlot());
    while (!impl_->stop.load()) {
      char* buf = nullptr;
      const int n = PQgetCopyData(repl_.get(), &buf, /*async=*/1);
      if (n == 0) {
        RILL_RETURN_NOT_OK(Periodic(false));
        pollfd pfd{PQsocket(repl_.get()), POLLIN, 0};
        ::poll(&pfd, 1, 100);
        if (PQconsumeInput(repl_.get()) == 0) {
          return PgError(repl_.get(), nullptr, "replication stream");
        }
        continue;
      }
      if (n == -1) {
        PgResult r(PQgetResult(repl_.get()));
        if (r && PQresultStatus(r.get()) == PGRES_COMMAND_OK) {
          return Status::IOError("the server ended the replication stream (shutting down?)");
        }
        return PgError(repl_.get(), r.get(), "replication stream ended");
      }
      if (n < 0) return PgError(repl_.get(), nullptr, "replication stream");
      std::unique_ptr<char, void (*)(void*)> owned(buf, PQfreemem);
      std::string_view data(buf, static_cast<size_t>(n));
      bool reply = false;
      if (data[0] == 'w' && data.size() >= 25) {
        uint64_t wal_end = 0;
        for (int i = 9; i < 17; ++i) wal_end = (wal_end << 8) | static_cast<uint8_t>(data[i]);
        received_ = std::max(received_, wal_end);
        impl_->Count(&ConnectorStats::received_bytes, n);
        Status st = Handle(data.substr(25));
        if (st.IsCancelled()) return Status::OK();
        if (!st.ok()) return Status::IOError("pgoutput: ", st.message());
      } else if (data[0] == 'k' && data.size() >= 18) {
        uint64_t wal_end = 0;
        for (int i = 1; i < 9; ++i) wal_end = (wal_end << 8) | static_cast<uint8_t>(data[i]);
        received_ = std::max(received_, wal_end);
        reply = data[17] != 0;
        Status st = Advance(wal_end);
        if (st.IsCancelled()) return Status::OK();
      }
      RILL_RETURN_NOT_OK(Periodic(reply));
    }
    (void)SendStatus(false);
    return Status::OK();
  }

  PostgresCDCConnector::Impl* impl_;
  const PostgresCDCOptions& o_;
  PgCdcPosition* state_;
  bool need_snapshot_;
  PgConnPtr control_, repl_;
  TableInfo info_;
  // The stream.
  PgMessage msg_;
  PgRelation relation_;
  std::unique_ptr<ChangeBatcher> batcher_;
  std::string incompatible_;  // non-empty: the relation's rows are rejected
  std::vector<std::shared_ptr<arrow::RecordBatch>> txn_batches_;
  std::vector<RejectedRecord> txn_rejects_;
  bool in_txn_ = false, skip_txn_ = false, lag_alerted_ = false;
  uint64_t txn_lsn_ = 0, received_ = 0;
  uint32_t txn_xid_ = 0;
  int64_t txn_changes_ = 0;
  Clock::time_point last_status_{}, last_check_{};
};

}  // namespace

void PostgresCDCConnector::Impl::Run() {
  // Wait for the engine's first tick: a checkpoint's RestorePosition comes first.
  while (!stop.load() && !polled_once.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  bool need_snapshot = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (restored) {
      reader_state = *restored;
      restored.reset();
      target_may_hold_rows = true;
    }
  }
  if (!reader_state) {
    reader_state = PgCdcPosition{};
    need_snapshot = options.snapshot;
    if (!options.snapshot) reader_state->snapshot_done = true;  // lsn 0: the slot's position
  } else if (!reader_state->snapshot_done) {
    need_snapshot = options.snapshot;
    if (!options.snapshot) reader_state->snapshot_done = true;
  }
  double backoff = options.reconnect_initial_seconds;
  bool failed_before = false;  // in this outage
  std::vector<std::string> alerted;  // the failures of this outage already reported
  while (!stop.load()) {
    bool streaming = false;
    Session session(this, &*reader_state, need_snapshot);
    Status st = session.Run(&streaming);
    if (streaming) {
      failed_before = false;
      backoff = options.reconnect_initial_seconds;
    }
    // A snapshot that did not finish is taken again (from a new slot).
    need_snapshot = options.snapshot && !reader_state->snapshot_done;
    if (stop.load() || st.IsCancelled()) break;
    if (st.ok()) continue;
    Count(&ConnectorStats::errors, 1);
    // Once per outage and kind of failure (a restart, then a dropped slot).
    if (!failed_before) alerted.clear();
    if (alerted.size() < 4 &&
        std::find(alerted.begin(), alerted.end(), st.message()) == alerted.end()) {
      alerted.push_back(st.message());
      Alert(st);
    }
    failed_before = true;
    reader_failed = true;
    const auto until = Clock::now() + std::chrono::duration<double>(backoff);
    while (!stop.load() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    backoff = std::min(backoff * 2, options.reconnect_max_seconds);
  }
}

}  // namespace rill
