// Scheduled SQL and join/aggregate tasks. Both compile to one DuckDB query
// through SqlEngine; nothing here touches DuckDB directly.
#include "rill/engine/task.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include <arrow/array.h>
#include <arrow/compute/api_vector.h>
#include <arrow/datum.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <arrow/type_traits.h>

#include "rill/sql/sql_engine.h"
#include "rill/table/live_table.h"
#include "rill/table/schema.h"

namespace rill {

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> RowsUpdatedAfter(
    const TableVersion& version, double* cursor) {
  const auto& chunks = version.chunks();
  const int upd = version.schema()->GetFieldIndex(kUpdateTsColumn);
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  double newest = *cursor;
  for (size_t i = chunks.size(); i-- > 0;) {
    const VersionChunk& chunk = chunks[i];
    const int64_t n = chunk.batch->num_rows();
    if (n == 0) continue;
    const double* ts = chunk.batch->column(upd)->data()->GetValues<double>(1);
    if (ts[n - 1] <= *cursor) break;
    newest = std::max(newest, ts[n - 1]);
    const int64_t first = std::upper_bound(ts, ts + n, *cursor) - ts;
    std::shared_ptr<arrow::RecordBatch> rows = chunk.batch->Slice(first);
    if (chunk.alive && chunk.live_rows < n) {
      auto mask = std::make_shared<arrow::BooleanArray>(n, chunk.alive)->Slice(first);
      RILL_ASSIGN_OR_RAISE(auto filtered,
                           arrow::compute::Filter(arrow::Datum(rows), arrow::Datum(mask)));
      rows = filtered.record_batch();
    }
    if (rows->num_rows() > 0) out.push_back(std::move(rows));
    if (first > 0) break;
  }
  std::reverse(out.begin(), out.end());
  *cursor = newest;
  return out;
}

double NewestUpdateTs(const TableVersion& version) {
  const auto& chunks = version.chunks();
  const int upd = version.schema()->GetFieldIndex(kUpdateTsColumn);
  for (size_t i = chunks.size(); i-- > 0;) {
    const int64_t n = chunks[i].batch->num_rows();
    if (n > 0) return chunks[i].batch->column(upd)->data()->GetValues<double>(1)[n - 1];
  }
  return -1e300;
}
namespace {

std::string Normalize(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '_' || std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) {
      out.push_back(' ');
      space = false;
    }
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

std::string FormatDouble(double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  return buf;
}

Status PrefixError(const Status& status, const std::string& task) {
  return status.WithMessage("task '", task, "': ", status.message());
}

// Where a column named in the options comes from, as a SQL expression.
struct ColumnRef {
  std::string expr;
  std::shared_ptr<arrow::DataType> type;
};

}  // namespace

// ScheduledSqlTask ---------------------------------------------------------------

Result<TaskOutput> ScheduledSqlTask::Recompute(SqlEngine& sql) {
  auto result = use_prepared_statements_ ? sql.QueryPrepared(query_) : sql.Query(query_);
  if (!result.ok()) {
    return PrefixError(result.status(), name());
  }
  return TaskOutput{std::move(result).ValueUnsafe(), /*replace=*/true};
}

// Names ------------------------------------------------------------------------

Result<IncrementalMode> ParseIncrementalMode(std::string_view text) {
  const std::string t = Normalize(text);
  if (t == "auto") return IncrementalMode::kAuto;
  if (t == "true" || t == "on" || t == "yes" || t == "1") return IncrementalMode::kOn;
  if (t == "false" || t == "off" || t == "no" || t == "0") return IncrementalMode::kOff;
  return Status::Invalid("incremental must be auto, true or false, got '", text, "'");
}

const char* IncrementalModeName(IncrementalMode mode) {
  switch (mode) {
    case IncrementalMode::kAuto: return "auto";
    case IncrementalMode::kOn: return "true";
    case IncrementalMode::kOff: return "false";
  }
  return "auto";
}

Result<JoinType> ParseJoinType(std::string_view text) {
  const std::string t = Normalize(text);
  if (t == "inner") {
    return JoinType::kInner;
  }
  if (t == "left" || t == "left outer") {
    return JoinType::kLeftOuter;
  }
  if (t == "right" || t == "right outer") {
    return JoinType::kRightOuter;
  }
  if (t == "full" || t == "full outer" || t == "outer") {
    return JoinType::kFullOuter;
  }
  return Status::Invalid("unknown join type '", text,
                         "': expected inner, left outer, right outer or full outer");
}

const char* JoinTypeName(JoinType type) {
  switch (type) {
    case JoinType::kInner:
      return "inner";
    case JoinType::kLeftOuter:
      return "left outer";
    case JoinType::kRightOuter:
      return "right outer";
    case JoinType::kFullOuter:
      return "full outer";
  }
  return "inner";
}

Result<AggregateFunction> ParseAggregateFunction(std::string_view text) {
  const std::string t = Normalize(text);
  if (t == "sum") {
    return AggregateFunction::kSum;
  }
  if (t == "count") {
    return AggregateFunction::kCount;
  }
  if (t == "avg" || t == "mean") {
    return AggregateFunction::kAvg;
  }
  if (t == "min") {
    return AggregateFunction::kMin;
  }
  if (t == "max") {
    return AggregateFunction::kMax;
  }
  if (t == "count distinct") {
    return AggregateFunction::kCountDistinct;
  }
  return Status::Invalid("unknown aggregation '", text,
                         "': expected sum, count, avg (mean), min, max or count_distinct");
}

const char* AggregateFunctionName(AggregateFunction fn) {
  switch (fn) {
    case AggregateFunction::kSum:
      return "sum";
    case AggregateFunction::kCount:
      return "count";
    case AggregateFunction::kAvg:
      return "avg";
    case AggregateFunction::kMin:
      return "min";
    case AggregateFunction::kMax:
      return "max";
    case AggregateFunction::kCountDistinct:
      return "count_distinct";
  }
  return "sum";
}

// TableJoinTask ------------------------------------------------------------------

TableJoinTask::TableJoinTask(JoinTaskOptions options)
    : Task(options.name, options.output_table, options.interval_seconds, options.primary_key,
           options.retention),
      options_(std::move(options)) {}

Result<std::shared_ptr<TableJoinTask>> TableJoinTask::Make(JoinTaskOptions options) {
  const std::string who = "TableJoinTask '" + options.name + "': ";
  if (options.left_table.empty() || options.right_table.empty()) {
    return Status::Invalid(who, "left_table and right_table are required");
  }
  if (options.output_table.empty()) {
    return Status::Invalid(who, "output_table is required");
  }
  if (options.keys.empty()) {
    return Status::Invalid(who, "keys must name at least one join column");
  }
  if (options.right_keys.empty()) {
    options.right_keys = options.keys;
  }
  if (options.right_keys.size() != options.keys.size()) {
    return Status::Invalid(who, "keys has ", options.keys.size(), " columns but right_keys has ",
                           options.right_keys.size());
  }
  for (const auto& key : options.keys) {
    if (key.empty()) {
      return Status::Invalid(who, "empty key column name");
    }
  }
  for (const auto& key : options.right_keys) {
    if (key.empty()) {
      return Status::Invalid(who, "empty right key column name");
    }
  }
  std::set<std::string> outputs(options.group_by.begin(), options.group_by.end());
  if (outputs.size() != options.group_by.size()) {
    return Status::Invalid(who, "group_by names a column twice");
  }
  for (const auto& [column, fn] : options.aggregations) {
    if (column.empty()) {
      return Status::Invalid(who, "aggregation without a column");
    }
    const std::string out = column + "_" + AggregateFunctionName(fn);
    if (!outputs.insert(out).second) {
      return Status::Invalid(who, "output column '", out, "' would appear twice");
    }
  }
  if (options.incremental && (options.join_type == JoinType::kRightOuter ||
                              options.join_type == JoinType::kFullOuter)) {
    return Status::Invalid(who, "incremental joins must be inner or left outer: a ",
                           JoinTypeName(options.join_type),
                           " join would re-emit every unmatched right row on each run");
  }
  if (options.interval_seconds < 0) {
    return Status::Invalid(who, "interval_seconds must be >= 0");
  }
  return std::shared_ptr<TableJoinTask>(new TableJoinTask(std::move(options)));
}

std::string TableJoinTask::Describe() const {
  if (!last_sql_.empty()) {
    return last_sql_;
  }
  return std::string(JoinTypeName(options_.join_type)) + " join of " + options_.left_table +
         " and " + options_.right_table + " into " + options_.output_table;
}

Result<std::string> TableJoinTask::BuildSql(const arrow::Schema& left,
                                            const arrow::Schema& right,
                                            std::optional<double> since) const {
  const auto& o = options_;
  const bool coalesce_keys =
      o.join_type == JoinType::kRightOuter || o.join_type == JoinType::kFullOuter;
  auto check = [](const arrow::Schema& schema, const std::string& column,
                  const std::string& table) -> Status {
    if (schema.GetFieldIndex(column) < 0) {
      return Status::KeyError("column '", column, "' not found in table '", table,
                              "' (columns: ", schema.ToString(), ")");
    }
    return Status::OK();
  };
  for (size_t i = 0; i < o.keys.size(); ++i) {
    RILL_RETURN_NOT_OK(check(left, o.keys[i], o.left_table));
    RILL_RETURN_NOT_OK(check(right, o.right_keys[i], o.right_table));
  }

  // The expression a left column stands for in the output.
  auto left_expr = [&](const std::string& column) {
    std::string l = "l." + QuoteIdentifier(column);
    if (coalesce_keys) {
      for (size_t i = 0; i < o.keys.size(); ++i) {
        if (o.keys[i] == column) {
          return "COALESCE(" + l + ", r." + QuoteIdentifier(o.right_keys[i]) + ")";
        }
      }
    }
    return l;
  };
  // Resolve a group-by or aggregated column: left first, then right.
  auto resolve = [&](const std::string& column) -> Result<ColumnRef> {
    if (auto field = left.GetFieldByName(column)) {
      return ColumnRef{left_expr(column), field->type()};
    }
    if (auto field = right.GetFieldByName(column)) {
      return ColumnRef{"r." + QuoteIdentifier(column), field->type()};
    }
    return Status::KeyError("column '", column, "' is in neither '", o.left_table, "' nor '",
                            o.right_table, "'");
  };

  std::vector<std::string> select;
  std::vector<std::string> group;
  if (o.aggregations.empty() && o.group_by.empty()) {
    std::set<std::string> names;
    for (const auto& field : left.fields()) {
      if (IsSystemColumn(field->name())) {
        continue;
      }
      names.insert(field->name());
      select.push_back(left_expr(field->name()) + " AS " + QuoteIdentifier(field->name()));
    }
    std::set<std::string> right_keys(o.right_keys.begin(), o.right_keys.end());
    for (const auto& field : right.fields()) {
      if (IsSystemColumn(field->name()) || right_keys.count(field->name()) > 0) {
        continue;
      }
      std::string name = field->name();
      while (names.count(name) > 0) {
        name += "_right";
      }
      names.insert(name);
      select.push_back("r." + QuoteIdentifier(field->name()) + " AS " + QuoteIdentifier(name));
    }
  } else {
    for (const auto& column : o.group_by) {
      RILL_ASSIGN_OR_RAISE(auto ref, resolve(column));
      select.push_back(ref.expr + " AS " + QuoteIdentifier(column));
      group.push_back(ref.expr);
    }
    for (const auto& [column, fn] : o.aggregations) {
      RILL_ASSIGN_OR_RAISE(auto ref, resolve(column));
      std::string agg;
      switch (fn) {
        case AggregateFunction::kSum:
          agg = "sum(" + ref.expr + ")";
          // DuckDB sums integers as HUGEINT; Arrow (and pyarrow) keep int64.
          if (arrow::is_integer(ref.type->id())) {
            agg = "CAST(" + agg + " AS BIGINT)";
          }
          break;
        case AggregateFunction::kCount:
          agg = "count(" + ref.expr + ")";
          break;
        case AggregateFunction::kAvg:
          agg = "avg(" + ref.expr + ")";
          break;
        case AggregateFunction::kMin:
          agg = "min(" + ref.expr + ")";
          break;
        case AggregateFunction::kMax:
          agg = "max(" + ref.expr + ")";
          break;
        case AggregateFunction::kCountDistinct:
          agg = "count(DISTINCT " + ref.expr + ")";
          break;
      }
      select.push_back(agg + " AS " +
                       QuoteIdentifier(column + "_" + AggregateFunctionName(fn)));
    }
  }

  std::string sql = "SELECT ";
  for (size_t i = 0; i < select.size(); ++i) {
    sql += (i > 0 ? ", " : "") + select[i];
  }
  std::string left_from = QuoteIdentifier(o.left_table);
  if (since.has_value()) {
    // Filter the left input itself, so the join sees only the new rows.
    left_from = "(SELECT * FROM " + left_from + " WHERE " + QuoteIdentifier(kUpdateTsColumn) +
                " > " + FormatDouble(*since) + "::DOUBLE)";
  }
  const char* join = "JOIN";
  switch (o.join_type) {
    case JoinType::kInner:
      join = "INNER JOIN";
      break;
    case JoinType::kLeftOuter:
      join = "LEFT OUTER JOIN";
      break;
    case JoinType::kRightOuter:
      join = "RIGHT OUTER JOIN";
      break;
    case JoinType::kFullOuter:
      join = "FULL OUTER JOIN";
      break;
  }
  sql += " FROM " + left_from + " AS l " + join + " " + QuoteIdentifier(o.right_table) +
         " AS r ON ";
  for (size_t i = 0; i < o.keys.size(); ++i) {
    sql += (i > 0 ? " AND " : "") + std::string("l.") + QuoteIdentifier(o.keys[i]) +
           " = r." + QuoteIdentifier(o.right_keys[i]);
  }
  if (!group.empty()) {
    sql += " GROUP BY ";
    for (size_t i = 0; i < group.size(); ++i) {
      sql += (i > 0 ? ", " : "") + group[i];
    }
  }
  return sql;
}

Result<TaskOutput> TableJoinTask::Run(SqlEngine& sql, double now) {
  auto left = sql.TableSchema(options_.left_table);
  if (!left.ok()) {
    return PrefixError(left.status(), name());
  }
  auto right = sql.TableSchema(options_.right_table);
  if (!right.ok()) {
    return PrefixError(right.status(), name());
  }
  std::optional<double> since;
  if (options_.incremental) {
    since = watermark_;
  }
  auto query = BuildSql(**left, **right, since);
  if (!query.ok()) {
    return PrefixError(query.status(), name());
  }
  last_sql_ = *query;
  auto result = sql.Query(*query);
  if (!result.ok()) {
    return PrefixError(result.status(), name());
  }
  if (options_.incremental) {
    watermark_ = now;
    return TaskOutput{std::move(result).ValueUnsafe(), /*replace=*/false};
  }
  return TaskOutput{std::move(result).ValueUnsafe(), /*replace=*/true};
}

}  // namespace rill
