// FindPointLookup: see point_lookup_internal.h.
#include "rill/sql/point_lookup_internal.h"

#include <algorithm>
#include <vector>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>

#include <duckdb.hpp>
#include <duckdb/parser/expression/cast_expression.hpp>
#include <duckdb/parser/expression/columnref_expression.hpp>
#include <duckdb/parser/expression/comparison_expression.hpp>
#include <duckdb/parser/expression/conjunction_expression.hpp>
#include <duckdb/parser/expression/constant_expression.hpp>
#include <duckdb/parser/expression/operator_expression.hpp>
#include <duckdb/parser/expression/star_expression.hpp>
#include <duckdb/parser/parsed_expression_iterator.hpp>
#include <duckdb/parser/query_node/select_node.hpp>
#include <duckdb/parser/statement/select_statement.hpp>
#include <duckdb/parser/tableref/basetableref.hpp>

#include "rill/sql/arrow_scan_internal.h"
#include "rill/table/live_table.h"

namespace rill::sql_internal {
namespace {

using duckdb::ExpressionClass;
using duckdb::ExpressionType;
using duckdb::LogicalType;
using duckdb::ParsedExpression;
using duckdb::StringUtil;
using duckdb::Value;

// The DuckDB type of an Arrow key column the lookup supports (the types
// whose values DuckDB compares exactly as the key index does: integers by
// value, strings by bytes); INVALID for others.
LogicalType DuckKeyType(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::INT8: return LogicalType::TINYINT;
    case arrow::Type::INT16: return LogicalType::SMALLINT;
    case arrow::Type::INT32: return LogicalType::INTEGER;
    case arrow::Type::INT64: return LogicalType::BIGINT;
    case arrow::Type::UINT8: return LogicalType::UTINYINT;
    case arrow::Type::UINT16: return LogicalType::USMALLINT;
    case arrow::Type::UINT32: return LogicalType::UINTEGER;
    case arrow::Type::UINT64: return LogicalType::UBIGINT;
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING: return LogicalType::VARCHAR;
    default: return LogicalType::INVALID;
  }
}

// A constant of the query: a literal, or a literal under a CAST (not
// TRY_CAST), evaluated.
struct Constant {
  Value value;
  bool string_literal = false;  // an uncast string literal: DuckDB casts it to the column's type
};

std::optional<Constant> ReadConstant(const ParsedExpression& e) {
  try {
    if (e.GetExpressionClass() == ExpressionClass::CONSTANT) {
      const auto& value = e.Cast<duckdb::ConstantExpression>().value;
      return Constant{value, value.type().id() == duckdb::LogicalTypeId::VARCHAR};
    }
    if (e.GetExpressionClass() == ExpressionClass::CAST) {
      const auto& cast = e.Cast<duckdb::CastExpression>();
      if (cast.try_cast || cast.child->GetExpressionClass() != ExpressionClass::CONSTANT) {
        return std::nullopt;
      }
      const auto id = cast.cast_type.id();
      if (id == duckdb::LogicalTypeId::USER || id == duckdb::LogicalTypeId::ANY ||
          id == duckdb::LogicalTypeId::INVALID || id == duckdb::LogicalTypeId::UNKNOWN) {
        return std::nullopt;
      }
      const auto& value = cast.child->Cast<duckdb::ConstantExpression>().value;
      Value cast_value;
      std::string error;
      if (!value.DefaultTryCastAs(cast.cast_type, cast_value, &error, /*strict=*/false)) {
        return std::nullopt;  // DuckDB reports the error
      }
      return Constant{cast_value, false};
    }
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// The key value DuckDB compares a column of `key_type` with when the query
// says `column = constant`; nullopt when unsure. A null value matches
// nothing (its Value is null).
std::optional<Value> KeyValue(const Constant& c, const LogicalType& key_type) {
  const LogicalType& type = c.value.type();
  // An untyped NULL compares with anything, as NULL.
  if (type.id() == duckdb::LogicalTypeId::SQLNULL) return Value(key_type);
  if (key_type.id() == duckdb::LogicalTypeId::VARCHAR) {
    // Strings compare as strings only with strings.
    if (type.id() != duckdb::LogicalTypeId::VARCHAR) return std::nullopt;
    return c.value;
  }
  // Integer keys: an integer constant compares in a type holding both
  // exactly; a string literal is cast to the key's type.
  if (!c.string_literal && !(type.IsIntegral() && type.id() != duckdb::LogicalTypeId::BOOLEAN)) {
    return std::nullopt;
  }
  if (c.value.IsNull()) return Value(key_type);
  Value key;
  std::string error;
  try {
    if (!c.value.DefaultTryCastAs(key_type, key, &error, /*strict=*/false)) {
      return std::nullopt;  // out of the key's range, or DuckDB's conversion error
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return key;
}

// One key column's constraint: the values it may take.
struct KeyConstraint {
  int column = -1;  // in the table's schema
  std::vector<Value> values;
};

class Matcher {
 public:
  Matcher(const duckdb::BaseTableRef& ref, const LiveTable& table) : ref_(ref), table_(table) {}

  // The schema index of the column `e` names, or -1.
  int Column(const ParsedExpression& e) const {
    if (e.GetExpressionClass() != ExpressionClass::COLUMN_REF) return -1;
    const auto& names = e.Cast<duckdb::ColumnRefExpression>().column_names;
    if (names.size() == 2) {
      const std::string& qualifier = ref_.alias.empty() ? ref_.table_name : ref_.alias;
      if (!StringUtil::CIEquals(names[0], qualifier)) return -1;
    } else if (names.size() != 1) {
      return -1;
    }
    return FieldIndex(names.back());
  }

  // The schema index of the field named `name` as DuckDB resolves it
  // (case-insensitively), or -1 (also when ambiguous).
  int FieldIndex(const std::string& name) const {
    const auto& schema = *table_.schema();
    int found = -1;
    for (int i = 0; i < schema.num_fields(); ++i) {
      if (StringUtil::CIEquals(schema.field(i)->name(), name)) {
        if (found >= 0) return -1;
        found = i;
      }
    }
    return found;
  }

  // The key constraint `e` states (`key = c`, `c = key`, `key IN (c, ...)`).
  std::optional<KeyConstraint> Constraint(const ParsedExpression& e) const {
    const ParsedExpression* column = nullptr;
    std::vector<const ParsedExpression*> constants;
    if (e.GetExpressionClass() == ExpressionClass::COMPARISON &&
        e.GetExpressionType() == ExpressionType::COMPARE_EQUAL) {
      const auto& cmp = e.Cast<duckdb::ComparisonExpression>();
      const bool left_column = cmp.left->GetExpressionClass() == ExpressionClass::COLUMN_REF;
      column = left_column ? cmp.left.get() : cmp.right.get();
      constants.push_back(left_column ? cmp.right.get() : cmp.left.get());
    } else if (e.GetExpressionClass() == ExpressionClass::OPERATOR &&
               e.GetExpressionType() == ExpressionType::COMPARE_IN) {
      const auto& in = e.Cast<duckdb::OperatorExpression>();
      if (in.children.size() < 2) return std::nullopt;
      column = in.children[0].get();
      for (size_t i = 1; i < in.children.size(); ++i) constants.push_back(in.children[i].get());
    } else {
      return std::nullopt;
    }
    KeyConstraint constraint;
    constraint.column = Column(*column);
    if (constraint.column < 0) return std::nullopt;
    const auto& field = table_.schema()->field(constraint.column);
    const auto& key = table_.primary_key();
    if (std::find(key.begin(), key.end(), field->name()) == key.end()) return std::nullopt;
    const LogicalType key_type = DuckKeyType(*field->type());
    if (key_type.id() == duckdb::LogicalTypeId::INVALID) return std::nullopt;
    for (const ParsedExpression* c : constants) {
      auto constant = ReadConstant(*c);
      if (!constant) return std::nullopt;
      auto value = KeyValue(*constant, key_type);
      if (!value) return std::nullopt;
      constraint.values.push_back(std::move(*value));
    }
    // An IN list's values are compared in one type that holds them all; a
    // mix of string literals and numbers might not be the key's type.
    if (constants.size() > 1) {
      bool any_string = false, all_string = true;
      for (const ParsedExpression* c : constants) {
        const bool s = ReadConstant(*c)->string_literal;
        any_string = any_string || s;
        all_string = all_string && s;
      }
      if (any_string && !all_string) return std::nullopt;
    }
    return constraint;
  }

 private:
  const duckdb::BaseTableRef& ref_;
  const LiveTable& table_;
};

// The conjuncts of a WHERE clause (nested ANDs flattened).
void Conjuncts(const ParsedExpression& e, std::vector<const ParsedExpression*>* out) {
  if (e.GetExpressionClass() == ExpressionClass::CONJUNCTION &&
      e.GetExpressionType() == ExpressionType::CONJUNCTION_AND) {
    for (const auto& child : e.Cast<duckdb::ConjunctionExpression>().children) {
      Conjuncts(*child, out);
    }
    return;
  }
  out->push_back(&e);
}

template <typename Builder, typename T>
arrow::Status AppendAs(arrow::ArrayBuilder& builder, const Value& v) {
  return static_cast<Builder&>(builder).Append(v.GetValue<T>());
}

// Arrow arrays of the key columns' values (the cross product of the
// constraints' values), for LiveTable::LookupKeys; nullopt when a value
// cannot be written. Null values match nothing and are left out.
std::shared_ptr<arrow::RecordBatch> KeyBatch(const LiveTable& table,
                                             const std::vector<KeyConstraint>& constraints) {
  std::vector<std::vector<Value>> rows(1);
  for (const auto& c : constraints) {
    std::vector<std::vector<Value>> next;
    for (const auto& row : rows) {
      for (const auto& v : c.values) {
        if (v.IsNull()) continue;
        next.push_back(row);
        next.back().push_back(v);
      }
    }
    rows = std::move(next);
  }
  if (rows.size() > 1024) return nullptr;  // a long list: the scan is no worse
  arrow::FieldVector fields;
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  for (size_t k = 0; k < constraints.size(); ++k) {
    const auto& field = table.schema()->field(constraints[k].column);
    std::unique_ptr<arrow::ArrayBuilder> builder;
    if (!arrow::MakeBuilder(arrow::default_memory_pool(), field->type(), &builder).ok()) {
      return nullptr;
    }
    for (const auto& row : rows) {
      const Value& v = row[k];
      arrow::Status st;
      switch (field->type()->id()) {
        case arrow::Type::INT8: st = AppendAs<arrow::Int8Builder, int8_t>(*builder, v); break;
        case arrow::Type::INT16: st = AppendAs<arrow::Int16Builder, int16_t>(*builder, v); break;
        case arrow::Type::INT32: st = AppendAs<arrow::Int32Builder, int32_t>(*builder, v); break;
        case arrow::Type::INT64: st = AppendAs<arrow::Int64Builder, int64_t>(*builder, v); break;
        case arrow::Type::UINT8: st = AppendAs<arrow::UInt8Builder, uint8_t>(*builder, v); break;
        case arrow::Type::UINT16: st = AppendAs<arrow::UInt16Builder, uint16_t>(*builder, v); break;
        case arrow::Type::UINT32: st = AppendAs<arrow::UInt32Builder, uint32_t>(*builder, v); break;
        case arrow::Type::UINT64: st = AppendAs<arrow::UInt64Builder, uint64_t>(*builder, v); break;
        case arrow::Type::STRING:
          st = static_cast<arrow::StringBuilder&>(*builder).Append(duckdb::StringValue::Get(v));
          break;
        case arrow::Type::LARGE_STRING:
          st = static_cast<arrow::LargeStringBuilder&>(*builder).Append(
              duckdb::StringValue::Get(v));
          break;
        default: return nullptr;
      }
      if (!st.ok()) return nullptr;
    }
    std::shared_ptr<arrow::Array> array;
    if (!builder->Finish(&array).ok()) return nullptr;
    fields.push_back(field);
    arrays.push_back(std::move(array));
  }
  return arrow::RecordBatch::Make(arrow::schema(std::move(fields)),
                                  static_cast<int64_t>(rows.size()), std::move(arrays));
}

// True for the Arrow types DuckDB's result gives back unchanged (so a plain
// projection can pass the column on as it is).
bool PassesThrough(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::BOOL: case arrow::Type::INT8: case arrow::Type::INT16:
    case arrow::Type::INT32: case arrow::Type::INT64: case arrow::Type::UINT8:
    case arrow::Type::UINT16: case arrow::Type::UINT32: case arrow::Type::UINT64:
    case arrow::Type::FLOAT: case arrow::Type::DOUBLE: case arrow::Type::STRING:
    case arrow::Type::DATE32:
      return true;
    case arrow::Type::TIMESTAMP: {
      const auto& ts = static_cast<const arrow::TimestampType&>(type);
      return ts.unit() == arrow::TimeUnit::MICRO && ts.timezone().empty();
    }
    default:
      return false;
  }
}

// The result of a plain projection (`SELECT a, b AS c` or `SELECT *`) of
// `rows`, typed and named as DuckDB returns it; null when the select list is
// anything else.
std::shared_ptr<arrow::Table> Project(const duckdb::SelectNode& node, const Matcher& matcher,
                                      const arrow::Table& rows) {
  arrow::FieldVector fields;
  std::vector<std::shared_ptr<arrow::ChunkedArray>> columns;
  auto add = [&](int index, const std::string& name) {
    const auto& field = rows.schema()->field(index);
    if (!PassesThrough(*field->type())) return false;
    for (const auto& f : fields) {
      if (StringUtil::CIEquals(f->name(), name)) return false;  // DuckDB renames duplicates
    }
    fields.push_back(arrow::field(name, field->type()));
    columns.push_back(rows.column(index));
    return true;
  };
  for (const auto& e : node.select_list) {
    if (e->GetExpressionClass() == ExpressionClass::STAR) {
      const auto& star = e->Cast<duckdb::StarExpression>();
      if (!star.relation_name.empty() || !star.exclude_list.empty() ||
          !star.replace_list.empty() || !star.rename_list.empty() || star.expr != nullptr ||
          star.columns || !star.alias.empty()) {
        return nullptr;
      }
      for (int i = 0; i < rows.num_columns(); ++i) {
        if (!add(i, rows.schema()->field(i)->name())) return nullptr;
      }
      continue;
    }
    const int index = matcher.Column(*e);
    if (index < 0) return nullptr;
    // DuckDB names an unaliased column as the query spells it; only the
    // table's own spelling is sure to match.
    const auto& spelled = e->Cast<duckdb::ColumnRefExpression>().GetColumnName();
    const std::string name = e->alias.empty() ? spelled : e->alias;
    if (e->alias.empty() && spelled != rows.schema()->field(index)->name()) return nullptr;
    if (!add(index, name)) return nullptr;
  }
  auto table = arrow::Table::Make(arrow::schema(std::move(fields)), std::move(columns),
                                  rows.num_rows());
  return table;
}

}  // namespace

std::optional<PointLookup> FindPointLookup(
    const duckdb::SQLStatement& statement,
    const std::map<std::string, std::shared_ptr<LiveTableSource>>& views) {
  if (statement.type != duckdb::StatementType::SELECT_STATEMENT) return std::nullopt;
  const auto& select = statement.Cast<duckdb::SelectStatement>();
  if (select.node == nullptr || select.node->type != duckdb::QueryNodeType::SELECT_NODE ||
      !select.node->cte_map.map.empty()) {
    return std::nullopt;
  }
  const auto& node = select.node->Cast<duckdb::SelectNode>();
  if (node.from_table == nullptr ||
      node.from_table->type != duckdb::TableReferenceType::BASE_TABLE ||
      node.where_clause == nullptr || node.sample != nullptr) {
    return std::nullopt;
  }
  const auto& ref = node.from_table->Cast<duckdb::BaseTableRef>();
  if (!ref.catalog_name.empty() || !ref.schema_name.empty() || ref.at_clause != nullptr ||
      ref.sample != nullptr || !ref.column_name_alias.empty()) {
    return std::nullopt;
  }
  // The view DuckDB binds the name to (case-insensitively; ambiguous: none).
  std::shared_ptr<LiveTableSource> view;
  if (auto it = views.find(ref.table_name); it != views.end()) {
    view = it->second;
  } else {
    for (const auto& [name, source] : views) {
      if (!StringUtil::CIEquals(name, ref.table_name)) continue;
      if (view != nullptr) return std::nullopt;
      view = source;
    }
  }
  // A view showing other rows (SqlEngine::QueryWith) is not the table.
  if (view == nullptr || view->substituted() || view->table() == nullptr ||
      !view->table()->keyed()) {
    return std::nullopt;
  }
  // No other reference to the table: the view shows the looked-up rows to
  // every scan of it in this statement.
  bool subquery = node.where_clause->HasSubquery() ||
                  (node.having != nullptr && node.having->HasSubquery()) ||
                  (node.qualify != nullptr && node.qualify->HasSubquery());
  for (const auto& e : node.select_list) subquery = subquery || e->HasSubquery();
  for (const auto& e : node.groups.group_expressions) subquery = subquery || e->HasSubquery();
  if (subquery) return std::nullopt;
  bool plain = node.modifiers.empty() && node.groups.group_expressions.empty() &&
               node.having == nullptr && node.qualify == nullptr &&
               node.aggregate_handling == duckdb::AggregateHandling::STANDARD_HANDLING;
  // ORDER BY, LIMIT and DISTINCT ON expressions (only read here).
  duckdb::ParsedExpressionIterator::EnumerateQueryNodeModifiers(
      const_cast<duckdb::SelectNode&>(node),
      [&](duckdb::unique_ptr<ParsedExpression>& child) {
        subquery = subquery || child->HasSubquery();
      });
  if (subquery) return std::nullopt;

  LiveTable& table = *view->table();
  Matcher matcher(ref, table);
  std::vector<const ParsedExpression*> conjuncts;
  Conjuncts(*node.where_clause, &conjuncts);
  std::vector<KeyConstraint> constraints;  // in primary key order
  for (const auto& key : table.primary_key()) {
    const int index = table.schema()->GetFieldIndex(key);
    std::optional<KeyConstraint> found;
    for (const ParsedExpression* c : conjuncts) {
      auto constraint = matcher.Constraint(*c);
      if (constraint && constraint->column == index) {
        found = std::move(constraint);
        break;
      }
    }
    if (!found) return std::nullopt;
    constraints.push_back(std::move(*found));
  }
  // A plain projection also needs the WHERE clause to be these constraints only.
  plain = plain && conjuncts.size() == constraints.size();
  for (const ParsedExpression* c : conjuncts) {
    plain = plain && matcher.Constraint(*c).has_value();
  }

  auto keys = KeyBatch(table, constraints);
  if (keys == nullptr) return std::nullopt;
  auto found = table.LookupKeys(*keys);
  if (!found.ok() || !found->has_value()) return std::nullopt;
  PointLookup lookup;
  lookup.view = view;
  lookup.rows = (*found)->rows;
  if (plain) lookup.answer = Project(node, matcher, *lookup.rows);
  return lookup;
}

}  // namespace rill::sql_internal
