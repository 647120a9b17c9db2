// PlanGlobal: an aggregate query as partial (per partition) and final SQL
// (global_plan.h), read with DuckDB's parser.
#include "rill/sql/global_plan.h"

#include <set>

#include <duckdb.hpp>
#include <duckdb/parser/expression/columnref_expression.hpp>
#include <duckdb/parser/expression/function_expression.hpp>
#include <duckdb/parser/parser.hpp>
#include <duckdb/parser/query_node/select_node.hpp>
#include <duckdb/parser/statement/select_statement.hpp>
#include <duckdb/parser/tableref/basetableref.hpp>

namespace rill {

namespace {

std::string Quote(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

Status Refuse(const std::string& what) {
  return Status::Invalid("a global view cannot have ", what,
                         " (one SELECT over one table: GROUP BY columns, and count, sum, min, "
                         "max, avg each as an output column)");
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

}  // namespace

Result<GlobalPlan> PlanGlobal(const std::string& query, const std::string& partition_column,
                              const std::string& contributor) {
  duckdb::Parser parser;
  try {
    parser.ParseQuery(query);
  } catch (const std::exception& e) {
    return Status::Invalid("cannot parse the query: ", duckdb::ErrorData(e).Message());
  }
  if (parser.statements.size() != 1 ||
      parser.statements[0]->type != duckdb::StatementType::SELECT_STATEMENT) {
    return Refuse("a statement other than one SELECT");
  }
  auto& select = parser.statements[0]->Cast<duckdb::SelectStatement>();
  if (select.node->type != duckdb::QueryNodeType::SELECT_NODE) {
    return Refuse("WITH, UNION, EXCEPT or INTERSECT");
  }
  auto& node = select.node->Cast<duckdb::SelectNode>();
  if (!node.cte_map.map.empty()) return Refuse("WITH (a common table expression)");
  if (!node.modifiers.empty()) return Refuse("ORDER BY, LIMIT or DISTINCT");
  if (node.qualify) return Refuse("QUALIFY");
  if (node.having) return Refuse("HAVING");
  if (node.sample) return Refuse("USING SAMPLE");
  if (node.groups.grouping_sets.size() > 1) return Refuse("GROUPING SETS, ROLLUP or CUBE");
  if (node.aggregate_handling == duckdb::AggregateHandling::FORCE_AGGREGATES) {
    return Refuse("GROUP BY ALL (name the group columns)");
  }
  if (!node.from_table || node.from_table->type != duckdb::TableReferenceType::BASE_TABLE) {
    return Refuse("a FROM other than one table");
  }
  GlobalPlan plan;
  const auto& from = node.from_table->Cast<duckdb::BaseTableRef>();
  plan.table = from.table_name;
  const std::string from_sql = node.from_table->ToString();

  // GROUP BY: plain columns.
  std::set<std::string> groups;
  std::vector<std::string> group_sql;
  for (const auto& g : node.groups.group_expressions) {
    if (g->GetExpressionClass() != duckdb::ExpressionClass::COLUMN_REF) {
      return Refuse("the GROUP BY expression " + g->ToString() + " (group by columns)");
    }
    const std::string name = g->Cast<duckdb::ColumnRefExpression>().GetColumnName();
    if (name == partition_column) return Refuse("GROUP BY " + partition_column);
    groups.insert(name);
    group_sql.push_back(g->ToString());
  }

  // The select list.
  std::vector<std::string> partial_groups;  // "expr AS name"
  std::vector<std::string> partial_cols;
  std::vector<std::string> final_cols;
  std::set<std::string> names;
  int n = 0;
  for (const auto& e : node.select_list) {
    ++n;
    std::string name = e->alias.empty() ? e->ToString() : e->alias;
    if (e->GetExpressionClass() == duckdb::ExpressionClass::COLUMN_REF) {
      const std::string column = e->Cast<duckdb::ColumnRefExpression>().GetColumnName();
      if (!groups.count(column)) {
        return Refuse("the column " + e->ToString() + " outside GROUP BY");
      }
      if (e->alias.empty()) name = column;
      partial_groups.push_back(e->ToString() + " AS " + Quote(name));
      final_cols.push_back(Quote(name));
      plan.group_columns.push_back(name);
    } else if (e->GetExpressionClass() == duckdb::ExpressionClass::FUNCTION) {
      const auto& f = e->Cast<duckdb::FunctionExpression>();
      if (f.distinct) return Refuse("the aggregate " + e->ToString() + " (DISTINCT)");
      if (f.filter) return Refuse("the aggregate " + e->ToString() + " (FILTER)");
      if (f.order_bys && !f.order_bys->orders.empty()) {
        return Refuse("the aggregate " + e->ToString() + " (ORDER BY)");
      }
      const std::string fn = duckdb::StringUtil::Lower(f.function_name);
      const bool star = fn == "count_star" || (fn == "count" && f.children.empty());
      if (!star && f.children.size() != 1) return Refuse("the expression " + e->ToString());
      const std::string arg = star ? "" : f.children[0]->ToString();
      const std::string q = Quote(name);
      if (star) {
        partial_cols.push_back("count(*) AS " + q);
        final_cols.push_back("CAST(sum(" + q + ") AS BIGINT) AS " + q);
      } else if (fn == "count") {
        partial_cols.push_back("count(" + arg + ") AS " + q);
        final_cols.push_back("CAST(sum(" + q + ") AS BIGINT) AS " + q);
      } else if (fn == "sum") {
        partial_cols.push_back("sum(" + arg + ") AS " + q);
        final_cols.push_back("sum(" + q + ") AS " + q);
      } else if (fn == "min" || fn == "max") {
        partial_cols.push_back(fn + "(" + arg + ") AS " + q);
        final_cols.push_back(fn + "(" + q + ") AS " + q);
      } else if (fn == "avg" || fn == "mean") {
        const std::string s = Quote(name + "__sum");
        const std::string c = Quote(name + "__count");
        partial_cols.push_back("sum(" + arg + ") AS " + s);
        partial_cols.push_back("count(" + arg + ") AS " + c);
        final_cols.push_back("CAST(sum(" + s + ") AS DOUBLE) / NULLIF(sum(" + c + "), 0) AS " + q);
      } else {
        return Refuse("the aggregate " + e->ToString() +
                      " (count, sum, min, max and avg combine across partitions)");
      }
    } else {
      return Refuse("the expression " + e->ToString() + " (each aggregate its own column)");
    }
    if (!names.insert(name).second) return Refuse("two output columns named " + name);
    plan.output_names.push_back(name);
  }
  if (plan.group_columns.size() != groups.size()) {
    return Refuse("a GROUP BY column missing from the select list");
  }
  if (names.count(partition_column)) return Refuse("an output column named " + partition_column);
  if (!contributor.empty() && names.count(kContributorColumn)) {
    return Refuse(std::string("an output column named ") + kContributorColumn);
  }

  const std::string part = Quote(partition_column);
  // Columns: the groups (in select order), the partition, the partials.
  std::string partial = "SELECT ";
  for (const auto& c : partial_groups) partial += c + ", ";
  partial += part + " AS " + part;
  if (!contributor.empty()) {
    std::string literal = "'";
    for (char c : contributor) literal += c == '\'' ? std::string("''") : std::string(1, c);
    partial += ", " + literal + "' AS " + Quote(kContributorColumn);
  }
  for (const auto& c : partial_cols) partial += ", " + c;
  partial += " FROM " + from_sql;
  std::string by;
  for (const auto& g : group_sql) by += g + ", ";
  by += part;
  const std::string where = node.where_clause ? node.where_clause->ToString() : "";
  plan.partial_sql = partial + (where.empty() ? "" : " WHERE " + where) + " GROUP BY " + by;
  plan.partial_sql_for_partitions =
      partial + " WHERE " + (where.empty() ? "" : "(" + where + ") AND ") + part +
      " IN ({partitions}) GROUP BY " + by;
  plan.partial_key = plan.group_columns;
  plan.partial_key.push_back(partition_column);
  if (!contributor.empty()) plan.partial_key.push_back(kContributorColumn);

  std::string fin = "SELECT ";
  for (size_t i = 0; i < final_cols.size(); ++i) {
    if (i > 0) fin += ", ";
    fin += final_cols[i];
  }
  fin += " FROM {partials}";
  if (!plan.group_columns.empty()) {
    fin += " GROUP BY ";
    for (size_t i = 0; i < plan.group_columns.size(); ++i) {
      if (i > 0) fin += ", ";
      fin += Quote(plan.group_columns[i]);
    }
  }
  plan.final_sql = fin;
  return plan;
}

std::string FinalSqlOver(const GlobalPlan& plan, const std::string& relation) {
  return Replace(plan.final_sql, "{partials}", relation);
}

}  // namespace rill
