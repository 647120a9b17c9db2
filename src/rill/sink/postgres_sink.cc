// PostgresSinkWriter (postgres_sink.h): libpq, one connection, one transaction
// per unit (Write ... Commit).
#include "rill/sink/postgres_sink.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include <arrow/api.h>

#include "rill/sink/postgres_sink_internal.h"

namespace rill {

namespace {

using postgres_sink_internal::CopyBinaryEncoder;
using postgres_sink_internal::MapArrowType;
using postgres_sink_internal::PgColumnType;
using postgres_sink_internal::QuoteIdentifier;
using postgres_sink_internal::QuoteQualifiedName;

struct ResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

constexpr const char* kStage = "pg_temp.rill_stage";
constexpr size_t kCopyChunkBytes = 1 << 20;
constexpr int64_t kCopyRowsPerSlice = 4096;
// Writes that go the staging way after a direct upsert COPY met an existing key.
constexpr int kDirectRetryWrites = 16;

std::string Trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

/// "host:port" of a connection string, never its password.
std::string ServerOf(const std::string& dsn) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(dsn.c_str(), &error);
  if (error != nullptr) PQfreemem(error);
  std::string host, port, hostaddr;
  if (options != nullptr) {
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
      if (o->val == nullptr) continue;
      std::string_view keyword = o->keyword;
      if (keyword == "host") host = o->val;
      if (keyword == "hostaddr") hostaddr = o->val;
      if (keyword == "port") port = o->val;
    }
    PQconninfoFree(options);
  }
  if (host.empty()) host = hostaddr.empty() ? "localhost" : hostaddr;
  if (port.empty()) port = "5432";
  return host + ":" + port;
}

/// SQLSTATE classes after which the same statement may succeed later:
/// connection exceptions, transaction rollbacks (serialization, deadlock),
/// insufficient resources, operator intervention (shutdown, statement
/// timeout), system errors.
bool IsTransient(std::string_view sqlstate) {
  if (sqlstate.size() < 2) return true;
  std::string_view cls = sqlstate.substr(0, 2);
  return cls == "08" || cls == "40" || cls == "53" || cls == "57" || cls == "58";
}

void IgnoreNotice(void*, const char*) {}

class PostgresSinkWriter final : public SinkWriter {
 public:
  explicit PostgresSinkWriter(PostgresSinkOptions options)
      : options_(std::move(options)),
        server_(ServerOf(options_.dsn)),
        target_(QuoteQualifiedName(options_.target_table)) {
    if (options_.sink_name.empty()) options_.sink_name = options_.target_table;
  }
  ~PostgresSinkWriter() override { Close(); }

  Status Open(const std::shared_ptr<arrow::Schema>& table_schema,
              const std::vector<std::string>& primary_key) override {
    Close();
    table_schema_ = table_schema;
    change_schema_ = ChangeSchema(table_schema);
    primary_key_ = primary_key;
    for (const auto& key : primary_key_) {
      if (table_schema_->GetFieldIndex(key) < 0) {
        return Status::Invalid(Prefix(), "key column '", key, "' is not in the table");
      }
    }
    for (const auto& field : table_schema_->fields()) {
      RILL_RETURN_NOT_OK(MapArrowType(*field->type(), field->name()).status());
    }
    RILL_RETURN_NOT_OK(Connect());
    RILL_RETURN_NOT_OK(CreateIfMissing(
        "CREATE TABLE IF NOT EXISTS rill_sink_progress (sink text PRIMARY KEY, "
        "version bigint NOT NULL, epoch bigint NOT NULL, "
        "updated_at timestamptz NOT NULL DEFAULT now())",
        "creating rill_sink_progress"));
    if (options_.mode.has_value()) return EnsureTarget(*options_.mode);
    RILL_ASSIGN_OR_RAISE(bool exists, TargetExists());
    if (!exists && !options_.create_table) return MissingTarget();
    return Status::OK();
  }

  Result<std::optional<SinkProgress>> LoadProgress() override {
    RILL_RETURN_NOT_OK(CheckOpen());
    std::string sql = "SELECT version, epoch FROM rill_sink_progress WHERE sink = " +
                      Literal(options_.sink_name);
    RILL_ASSIGN_OR_RAISE(PgResult result, Query(sql, "reading rill_sink_progress"));
    if (PQntuples(result.get()) == 0) return std::optional<SinkProgress>();
    SinkProgress progress;
    progress.version = std::stoull(PQgetvalue(result.get(), 0, 0));
    progress.epoch = std::stoull(PQgetvalue(result.get(), 0, 1));
    return std::optional<SinkProgress>(progress);
  }

  Status Write(const ChangeSet& changes, SinkMode mode) override {
    RILL_RETURN_NOT_OK(CheckOpen());
    if (!ensured_ || mode != ensured_mode_) RILL_RETURN_NOT_OK(EnsureTarget(mode));
    if (changes.num_rows == 0 && !changes.snapshot) return Status::OK();
    RILL_ASSIGN_OR_RAISE(OpCounts ops, CountOps(changes));
    RILL_RETURN_NOT_OK(Begin());
    if (!changes.snapshot && direct_copy_) {
      bool all_inserts = ops.inserts == changes.num_rows;
      if (mode == SinkMode::kChangelog) return CopyRows(target_, changes, *full_encoder_, true);
      if (mode == SinkMode::kAppend && all_inserts) {
        return CopyRows(target_, changes, *plain_encoder_, false);
      }
      if (mode == SinkMode::kUpsert && all_inserts) {
        RILL_ASSIGN_OR_RAISE(bool written, TryDirectUpsert(changes));
        if (written) return Status::OK();
      }
    }
    RILL_RETURN_NOT_OK(CopyRows(kStage, changes, *full_encoder_, true));
    return Exec(ApplySql(mode, changes.snapshot, ops.deletes > 0), "applying the changes");
  }

  Status Commit(const CommitPoint& point) override {
    RILL_RETURN_NOT_OK(CheckOpen());
    RILL_RETURN_NOT_OK(Begin());
    std::string sql =
        "INSERT INTO rill_sink_progress (sink, version, epoch, updated_at) VALUES (" +
        Literal(options_.sink_name) + ", " +
        std::to_string(static_cast<int64_t>(point.version)) + ", " +
        std::to_string(static_cast<int64_t>(point.epoch)) +
        ", now()) ON CONFLICT (sink) DO UPDATE SET version = EXCLUDED.version, "
        "epoch = EXCLUDED.epoch, updated_at = EXCLUDED.updated_at";
    RILL_RETURN_NOT_OK(Exec(sql, "storing the progress"));
    PgResult result(PQexec(conn_, "COMMIT"));
    RILL_RETURN_NOT_OK(Check(result.get(), PGRES_COMMAND_OK, "COMMIT"));
    // COMMIT of a transaction that failed earlier answers ROLLBACK.
    if (std::string_view(PQcmdStatus(result.get())) != "COMMIT") {
      in_transaction_ = false;
      return Status::Invalid(Prefix(), "the transaction was rolled back by ", server_);
    }
    in_transaction_ = false;
    ensured_in_transaction_ = false;
    return Status::OK();
  }

  void Abort() override {
    if (conn_ == nullptr) return;
    if (in_transaction_ && PQstatus(conn_) == CONNECTION_OK) {
      PgResult result(PQexec(conn_, "ROLLBACK"));
    }
    in_transaction_ = false;
    if (ensured_in_transaction_) ensured_ = false;
    ensured_in_transaction_ = false;
    if (PQstatus(conn_) != CONNECTION_OK) Close();
  }

  void Close() override {
    if (conn_ != nullptr) PQfinish(conn_);
    conn_ = nullptr;
    in_transaction_ = false;
    ensured_ = false;
    ensured_in_transaction_ = false;
  }

  int64_t bytes_written() const override { return bytes_; }
  const char* type() const override { return "postgres"; }

 private:
  std::string Prefix() const { return "PostgreSQL sink '" + options_.sink_name + "': "; }

  Status CheckOpen() const {
    if (conn_ == nullptr) {
      return Status::IOError(Prefix(), "not connected to ", server_, " (Open first)");
    }
    return Status::OK();
  }

  Status Connect() {
    std::string connect_timeout =
        std::to_string(std::max(2, static_cast<int>(std::ceil(options_.connect_timeout_seconds))));
    std::string tcp_timeout =
        std::to_string(static_cast<int64_t>(options_.statement_timeout_seconds * 1000));
    std::string application = "rill sink " + options_.sink_name;
    // Earlier keywords are overridden by what the DSN (dbname, expanded) says.
    const char* keywords[] = {"connect_timeout", "tcp_user_timeout", "application_name",
                              "dbname", nullptr};
    const char* values[] = {connect_timeout.c_str(), tcp_timeout.c_str(),
                            application.c_str(), options_.dsn.c_str(), nullptr};
    conn_ = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
    if (conn_ == nullptr) return Status::OutOfMemory(Prefix(), "libpq could not allocate");
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string message = Trim(PQerrorMessage(conn_));
      Close();
      return Status::IOError(Prefix(), "cannot connect to ", server_, ": ", message);
    }
    PQsetNoticeProcessor(conn_, IgnoreNotice, nullptr);
    // temp_buffers: the staging table of a large batch stays in memory (the
    // default 8 MB spills to files); it can be set only before the first use.
    std::string settings = "SET client_min_messages = warning; SET temp_buffers = '256MB'";
    if (options_.statement_timeout_seconds > 0) {
      settings += "; SET statement_timeout = " +
                  std::to_string(static_cast<int64_t>(options_.statement_timeout_seconds * 1000));
    }
    return Exec(settings, "configuring the session");
  }

  std::string Literal(const std::string& text) const {
    char* escaped = PQescapeLiteral(conn_, text.data(), text.size());
    if (escaped == nullptr) return "''";
    std::string out = escaped;
    PQfreemem(escaped);
    return out;
  }

  /// OK when `result` has `expected`; else IOError (connection lost or a
  /// transient SQLSTATE) or Invalid, with the server's message.
  Status Check(PGresult* result, ExecStatusType expected, std::string_view what) {
    last_sqlstate_.clear();
    if (result != nullptr && PQresultStatus(result) == expected) return Status::OK();
    std::string message = Trim(result != nullptr ? PQresultErrorMessage(result) : "");
    if (message.empty()) message = Trim(PQerrorMessage(conn_));
    if (PQstatus(conn_) != CONNECTION_OK) {
      return Status::IOError(Prefix(), "connection to ", server_, " lost while ", what, ": ",
                             message);
    }
    const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
    std::string sqlstate = state != nullptr ? state : "";
    last_sqlstate_ = sqlstate;
    if (IsTransient(sqlstate)) {
      return Status::IOError(Prefix(), what, " failed on ", server_, ": ", message,
                             " (SQLSTATE ", sqlstate, ")");
    }
    return Status::Invalid(Prefix(), what, " failed on ", server_, ": ", message,
                           " (SQLSTATE ", sqlstate, ")");
  }

  Status Exec(const std::string& sql, std::string_view what) {
    PgResult result(PQexec(conn_, sql.c_str()));
    return Check(result.get(), PGRES_COMMAND_OK, what);
  }

  Result<PgResult> Query(const std::string& sql, std::string_view what) {
    PgResult result(PQexec(conn_, sql.c_str()));
    RILL_RETURN_NOT_OK(Check(result.get(), PGRES_TUPLES_OK, what));
    return result;
  }

  Status Begin() {
    if (in_transaction_) return Status::OK();
    RILL_RETURN_NOT_OK(Exec("BEGIN", "BEGIN"));
    in_transaction_ = true;
    return Status::OK();
  }

  Result<bool> TargetExists() {
    RILL_ASSIGN_OR_RAISE(PgResult result,
                         Query("SELECT to_regclass(" + Literal(target_) + ")::oid",
                               "looking up the target table"));
    return !PQgetisnull(result.get(), 0, 0);
  }

  Status MissingTarget() const {
    return Status::KeyError(Prefix(), "target table ", target_, " does not exist on ",
                            server_, " (create it, or set create_table=True)");
  }

  Status CreateTarget(SinkMode mode) {
    std::string sql = "CREATE TABLE IF NOT EXISTS " + target_ + " (";
    std::set<std::string> keys(primary_key_.begin(), primary_key_.end());
    for (const auto& field : table_schema_->fields()) {
      RILL_ASSIGN_OR_RAISE(PgColumnType type, MapArrowType(*field->type(), field->name()));
      sql += QuoteIdentifier(field->name()) + " " + type.target;
      if (mode == SinkMode::kUpsert && keys.count(field->name()) > 0) sql += " NOT NULL";
      sql += ", ";
    }
    if (mode == SinkMode::kChangelog) {
      sql += QuoteIdentifier(kChangeOpColumn) + " text NOT NULL, " +
             QuoteIdentifier(kChangeVersionColumn) + " bigint NOT NULL, ";
    }
    if (mode == SinkMode::kUpsert && !primary_key_.empty()) {
      sql += "PRIMARY KEY (" + ColumnList(primary_key_) + "), ";
    }
    sql.resize(sql.size() - 2);
    sql += ")";
    return CreateIfMissing(sql, "creating the target table");
  }

  /// CREATE TABLE IF NOT EXISTS, outside a transaction: two sinks creating the
  /// same table at once make one of them fail with unique_violation (on the
  /// catalog) or duplicate_table; the table is there then, which is all we want.
  Status CreateIfMissing(const std::string& sql, std::string_view what) {
    Status status = Exec(sql, what);
    if (!status.ok() && !in_transaction_ &&
        (last_sqlstate_ == "23505" || last_sqlstate_ == "42P07")) {
      return Status::OK();
    }
    return status;
  }

  static std::string ColumnList(const std::vector<std::string>& names,
                                const std::string& prefix = "") {
    std::string out;
    for (const auto& name : names) {
      if (!out.empty()) out += ", ";
      out += prefix + QuoteIdentifier(name);
    }
    return out;
  }

  /// Make sure the target exists and fits `mode`; choose the columns written;
  /// (re)create the staging table and the statements.
  Status EnsureTarget(SinkMode mode) {
    RILL_ASSIGN_OR_RAISE(bool exists, TargetExists());
    if (!exists) {
      if (!options_.create_table) return MissingTarget();
      RILL_RETURN_NOT_OK(CreateTarget(mode));
    }
    RILL_ASSIGN_OR_RAISE(
        PgResult result,
        Query("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(" +
                  Literal(target_) + ") AND attnum > 0 AND NOT attisdropped",
              "reading the target's columns"));
    std::set<std::string> target_columns;
    for (int i = 0; i < PQntuples(result.get()); ++i) {
      target_columns.insert(PQgetvalue(result.get(), i, 0));
    }
    RILL_RETURN_NOT_OK(ChooseColumns(mode, target_columns));
    if (mode == SinkMode::kUpsert) RILL_RETURN_NOT_OK(CheckUniqueKey());
    RILL_RETURN_NOT_OK(CreateStage());
    RILL_ASSIGN_OR_RAISE(direct_copy_, TargetTakesTheStagingTypes(mode));
    direct_upsert_skip_ = 0;
    ensured_ = true;
    ensured_mode_ = mode;
    ensured_in_transaction_ = in_transaction_;
    return Status::OK();
  }

  Status ChooseColumns(SinkMode mode, const std::set<std::string>& target_columns) {
    columns_.clear();
    std::vector<std::string> missing;
    for (int i = 0; i < table_schema_->num_fields(); ++i) {
      const std::string& name = table_schema_->field(i)->name();
      if (target_columns.count(name) > 0) {
        columns_.push_back(i);
      } else if (name != "z_insert_ts" && name != "z_update_ts") {
        missing.push_back(name);
      }
    }
    if (mode == SinkMode::kChangelog) {
      for (const char* name : {kChangeOpColumn, kChangeVersionColumn}) {
        if (target_columns.count(name) == 0) missing.push_back(name);
      }
    }
    if (!missing.empty()) {
      std::string list;
      for (const auto& name : missing) list += (list.empty() ? "" : ", ") + name;
      return Status::Invalid(Prefix(), "target table ", target_, " on ", server_,
                             " has no column(s) ", list, " (", SinkModeName(mode),
                             " mode writes them)");
    }
    return Status::OK();
  }

  Status CheckUniqueKey() {
    if (primary_key_.empty()) {
      return Status::Invalid(Prefix(), "upsert mode needs a table with a primary key");
    }
    std::vector<std::string> sorted = primary_key_;
    std::sort(sorted.begin(), sorted.end());
    std::string wanted;
    for (const auto& name : sorted) wanted += (wanted.empty() ? "" : ",") + name;
    RILL_ASSIGN_OR_RAISE(
        PgResult result,
        Query("SELECT array_to_string(array(SELECT a.attname::text FROM unnest(i.indkey) k "
              "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k "
              "ORDER BY a.attname::text COLLATE \"C\"), ',') FROM pg_index i WHERE i.indrelid = to_regclass(" +
                  Literal(target_) + ") AND i.indisunique AND i.indpred IS NULL",
              "reading the target's keys"));
    for (int i = 0; i < PQntuples(result.get()); ++i) {
      if (wanted == PQgetvalue(result.get(), i, 0)) return Status::OK();
    }
    return Status::Invalid(Prefix(), "target table ", target_, " on ", server_,
                           " has no PRIMARY KEY or UNIQUE constraint on (", wanted,
                           "): upsert mode needs one");
  }

  /// The staging table: the written columns with their staging types, _op,
  /// _version; emptied at every commit.
  Status CreateStage() {
    std::string sql = "DROP TABLE IF EXISTS " + std::string(kStage) +
                      "; CREATE TEMP TABLE rill_stage (";
    stage_columns_.clear();
    stage_exprs_.clear();
    for (int index : columns_) {
      const auto& field = table_schema_->field(index);
      RILL_ASSIGN_OR_RAISE(PgColumnType type, MapArrowType(*field->type(), field->name()));
      std::string name = QuoteIdentifier(field->name());
      sql += name + " " + type.stage + ", ";
      stage_columns_.push_back(field->name());
      stage_exprs_[field->name()] = type.cast ? "s." + name + "::" + type.target : "s." + name;
    }
    sql += "_op text, _version bigint) ON COMMIT DELETE ROWS";
    RILL_RETURN_NOT_OK(Exec(sql, "creating the staging table"));
    std::vector<int> encoded = columns_;
    encoded.push_back(table_schema_->num_fields());      // _op
    encoded.push_back(table_schema_->num_fields() + 1);  // _version
    RILL_ASSIGN_OR_RAISE(full_encoder_, CopyBinaryEncoder::Make(change_schema_, encoded));
    RILL_ASSIGN_OR_RAISE(plain_encoder_, CopyBinaryEncoder::Make(change_schema_, columns_));
    op_column_ = table_schema_->num_fields();
    return Status::OK();
  }

  /// True when every written column of the target has exactly the staging type
  /// (no casts), so that binary COPY can go straight into the target.
  Result<bool> TargetTakesTheStagingTypes(SinkMode mode) {
    std::string values;
    for (int index : columns_) {
      const auto& field = table_schema_->field(index);
      RILL_ASSIGN_OR_RAISE(PgColumnType type, MapArrowType(*field->type(), field->name()));
      if (type.cast) return false;
      values += (values.empty() ? "(" : ", (") + Literal(field->name()) + ", " +
                Literal(type.stage) + ")";
    }
    if (mode == SinkMode::kChangelog) values += ", ('_op', 'text'), ('_version', 'bigint')";
    RILL_ASSIGN_OR_RAISE(
        PgResult result,
        Query("SELECT count(*) FILTER (WHERE a.atttypid = to_regtype(v.type)::oid), count(*) "
              "FROM (VALUES " + values + ") v(name, type) LEFT JOIN pg_attribute a ON "
              "a.attrelid = to_regclass(" + Literal(target_) + ") AND a.attname = v.name",
              "reading the target's column types"));
    return std::string_view(PQgetvalue(result.get(), 0, 0)) == PQgetvalue(result.get(), 0, 1);
  }

  std::string Exprs() const {
    std::string out;
    for (const auto& name : stage_columns_) {
      if (!out.empty()) out += ", ";
      out += stage_exprs_.at(name);
    }
    return out;
  }

  std::string KeyMatch() const {
    std::string out;
    for (const auto& key : primary_key_) {
      if (!out.empty()) out += " AND ";
      out += "t." + QuoteIdentifier(key) + " = " + stage_exprs_.at(key);
    }
    return out;
  }

  std::string ApplySql(SinkMode mode, bool snapshot, bool has_deletes) const {
    std::string columns = ColumnList(stage_columns_);
    std::string sql;
    if (mode == SinkMode::kUpsert) {
      // A snapshot: the last change per key. The Sink coalesces changes, but a
      // snapshot it reads from the start of the log is not, and ON CONFLICT
      // refuses a key twice in one statement. Stage order is ctid order: one
      // COPY appends the rows of a Write to the emptied heap, nothing updates
      // them. Changes skip the sort.
      std::string key_list = ColumnList(primary_key_);
      std::string last = snapshot ? "(SELECT DISTINCT ON (" + key_list + ") * FROM " +
                                        std::string(kStage) +
                                        " WHERE _op <> 'update_before' ORDER BY " + key_list +
                                        ", ctid DESC)"
                                  : std::string(kStage);
      if (snapshot) {
        sql += "DELETE FROM " + target_ + " t WHERE NOT EXISTS (SELECT 1 FROM " + last +
               " s WHERE s._op <> 'delete' AND " + KeyMatch() + "); ";
      }
      if (has_deletes) {
        sql += "DELETE FROM " + target_ + " t USING " + last +
               " s WHERE s._op = 'delete' AND " + KeyMatch() + "; ";
      }
      sql += "INSERT INTO " + target_ + " (" + columns + ") SELECT " + Exprs() + " FROM " +
             last + " s WHERE s._op IN ('insert', 'update') ON CONFLICT (" +
             ColumnList(primary_key_) + ") DO ";
      std::set<std::string> keys(primary_key_.begin(), primary_key_.end());
      std::string set;
      for (const auto& name : stage_columns_) {
        if (keys.count(name) > 0) continue;
        if (!set.empty()) set += ", ";
        set += QuoteIdentifier(name) + " = EXCLUDED." + QuoteIdentifier(name);
      }
      sql += set.empty() ? "NOTHING" : "UPDATE SET " + set;
    } else {
      if (snapshot) sql += "DELETE FROM " + target_ + "; ";
      if (mode == SinkMode::kChangelog) {
        sql += "INSERT INTO " + target_ + " (" + columns + ", _op, _version) SELECT " + Exprs() +
               ", s._op, s._version FROM " + kStage + " s";
      } else {
        sql += "INSERT INTO " + target_ + " (" + columns + ") SELECT " + Exprs() + " FROM " +
               kStage + " s WHERE s._op = 'insert'";
      }
    }
    sql += "; TRUNCATE " + std::string(kStage);
    return sql;
  }

  struct OpCounts {
    int64_t inserts = 0;
    int64_t deletes = 0;
  };

  Result<OpCounts> CountOps(const ChangeSet& changes) const {
    OpCounts counts;
    for (const auto& batch : changes.batches) {
      if (batch->num_columns() != change_schema_->num_fields()) {
        return Status::Invalid(Prefix(), "a change batch has ", batch->num_columns(),
                               " columns, the table's change schema ",
                               change_schema_->num_fields());
      }
      const auto& ops = static_cast<const arrow::StringArray&>(*batch->column(op_column_));
      for (int64_t i = 0; i < ops.length(); ++i) {
        std::string_view op = ops.GetView(i);
        if (op == "insert") ++counts.inserts;
        if (op == "delete") ++counts.deletes;
      }
    }
    return counts;
  }

  /// Upsert mode, a batch of inserts only (new keys at the source): COPY
  /// straight into the target under a savepoint, which is all an upsert of new
  /// keys does. When the target holds one of the keys already (a replay after
  /// a crash, a write after a snapshot), the COPY fails with unique_violation,
  /// the savepoint is rolled back, and false sends the batch the staging way;
  /// the next kDirectRetryWrites writes go that way too.
  Result<bool> TryDirectUpsert(const ChangeSet& changes) {
    if (direct_upsert_skip_ > 0) {
      --direct_upsert_skip_;
      return false;
    }
    RILL_RETURN_NOT_OK(Exec("SAVEPOINT rill_direct", "SAVEPOINT"));
    Status status = CopyRows(target_, changes, *plain_encoder_, false);
    if (status.ok()) {
      RILL_RETURN_NOT_OK(Exec("RELEASE SAVEPOINT rill_direct", "RELEASE SAVEPOINT"));
      return true;
    }
    if (last_sqlstate_ != "23505" || PQstatus(conn_) != CONNECTION_OK) return status;
    RILL_RETURN_NOT_OK(Exec("ROLLBACK TO SAVEPOINT rill_direct", "ROLLBACK TO SAVEPOINT"));
    direct_upsert_skip_ = kDirectRetryWrites;
    return false;
  }

  /// COPY every row of `changes` into `table` (quoted) through `encoder`: the
  /// written columns, and with `with_op_version` _op and _version.
  Status CopyRows(const std::string& table, const ChangeSet& changes,
                  CopyBinaryEncoder& encoder, bool with_op_version) {
    if (changes.num_rows == 0) return Status::OK();
    std::string sql = "COPY " + table + " (" + ColumnList(stage_columns_) +
                      (with_op_version ? ", _op, _version" : "") + ") FROM STDIN (FORMAT binary)";
    PgResult start(PQexec(conn_, sql.c_str()));
    RILL_RETURN_NOT_OK(Check(start.get(), PGRES_COPY_IN, "starting COPY"));
    buffer_.clear();
    CopyBinaryEncoder::AppendHeader(&buffer_);
    Status status = EncodeAndSend(changes, encoder);
    if (status.ok()) {
      CopyBinaryEncoder::AppendTrailer(&buffer_);
      status = Send();
    }
    if (PQputCopyEnd(conn_, status.ok() ? nullptr : status.message().c_str()) != 1 &&
        status.ok()) {
      status = Check(nullptr, PGRES_COMMAND_OK, "ending COPY");
    }
    PgResult end(PQgetResult(conn_));
    Status end_status = Check(end.get(), PGRES_COMMAND_OK, "COPY");
    while (PGresult* more = PQgetResult(conn_)) PQclear(more);
    return status.ok() ? end_status : status;
  }

  Status EncodeAndSend(const ChangeSet& changes, CopyBinaryEncoder& encoder) {
    for (const auto& batch : changes.batches) {
      RILL_RETURN_NOT_OK(encoder.Bind(*batch));
      for (int64_t begin = 0; begin < batch->num_rows(); begin += kCopyRowsPerSlice) {
        encoder.AppendRows(begin, std::min(batch->num_rows(), begin + kCopyRowsPerSlice),
                           &buffer_);
        if (buffer_.size() >= kCopyChunkBytes) RILL_RETURN_NOT_OK(Send());
      }
    }
    return Status::OK();
  }

  Status Send() {
    if (buffer_.empty()) return Status::OK();
    if (PQputCopyData(conn_, buffer_.data(), static_cast<int>(buffer_.size())) != 1) {
      return Check(nullptr, PGRES_COPY_IN, "sending COPY data");
    }
    bytes_ += static_cast<int64_t>(buffer_.size());
    buffer_.clear();
    return Status::OK();
  }

  PostgresSinkOptions options_;
  std::string server_;  // host:port, for messages
  std::string target_;  // quoted
  std::shared_ptr<arrow::Schema> table_schema_;
  std::shared_ptr<arrow::Schema> change_schema_;
  std::vector<std::string> primary_key_;

  PGconn* conn_ = nullptr;
  bool in_transaction_ = false;
  bool ensured_ = false;
  bool ensured_in_transaction_ = false;
  SinkMode ensured_mode_ = SinkMode::kUpsert;
  std::vector<int> columns_;                 // table columns written
  std::vector<std::string> stage_columns_;   // their names
  std::unordered_map<std::string, std::string> stage_exprs_;  // name -> s.col[::type]
  std::unique_ptr<CopyBinaryEncoder> full_encoder_;   // columns_, _op, _version
  std::unique_ptr<CopyBinaryEncoder> plain_encoder_;  // columns_
  bool direct_copy_ = false;  // the target has the staging types: COPY into it
  int direct_upsert_skip_ = 0;
  std::string last_sqlstate_;
  int op_column_ = 0;
  std::string buffer_;
  int64_t bytes_ = 0;
};

}  // namespace

Result<std::unique_ptr<SinkWriter>> MakePostgresSinkWriter(PostgresSinkOptions options) {
  if (options.dsn.empty()) return Status::Invalid("PostgresSink: dsn is empty");
  if (options.target_table.empty()) {
    return Status::Invalid("PostgresSink: target_table is empty");
  }
  if (options.connect_timeout_seconds <= 0) {
    return Status::Invalid("PostgresSink: connect_timeout_seconds must be > 0");
  }
  if (options.statement_timeout_seconds < 0) {
    return Status::Invalid("PostgresSink: statement_timeout_seconds must be >= 0");
  }
  return std::unique_ptr<SinkWriter>(new PostgresSinkWriter(std::move(options)));
}

}  // namespace rill
