// PlanIncremental: DuckDB's parse tree of the query, checked for the
// maintainable shapes, rewritten into the row-stage terms and the group stage
// (see ivm_plan.h); DuckDB's binder gives the result's names and types and
// the determinism of every function.
#include "rill/sql/ivm_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include <arrow/type.h>

#include <duckdb.hpp>
#include <duckdb/main/client_context.hpp>
#include <duckdb/parser/expression/list.hpp>
#include <duckdb/parser/parsed_expression_iterator.hpp>
#include <duckdb/parser/parser.hpp>
#include <duckdb/parser/query_node/select_node.hpp>
#include <duckdb/parser/statement/select_statement.hpp>
#include <duckdb/parser/tableref/basetableref.hpp>
#include <duckdb/parser/tableref/joinref.hpp>
#include <duckdb/planner/expression.hpp>
#include <duckdb/planner/logical_operator.hpp>
#include <duckdb/planner/logical_operator_visitor.hpp>

#include "rill/sql/sql_engine.h"
#include "rill/sql/sql_engine_access_internal.h"
#include "rill/table/live_table.h"

namespace rill {
namespace {

using duckdb::ExpressionClass;
using duckdb::ParsedExpression;
using duckdb::unique_ptr;

constexpr int kMaxSources = 3;

Status NotMaintainable(const std::string& what) {
  return Status::Invalid(what, " is not maintainable incrementally");
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Text of an expression without its alias (to compare expressions).
std::string Text(const ParsedExpression& e) {
  auto copy = e.Copy();
  copy->alias.clear();
  return copy->ToString();
}

struct Source {
  std::string table;
  std::string alias;
  std::shared_ptr<arrow::Schema> schema;  // full schema
  std::vector<std::string> key;
};

struct Analysis {
  std::vector<Source> sources;
  // Join conditions (INNER: ANDed into WHERE); a LEFT JOIN's condition.
  std::vector<std::string> inner_conditions;
  bool left_join = false;
  std::vector<std::pair<std::string, std::string>> left_keys;  // (left expr, right expr)
  std::string left_condition;
};

// Which source (index) a column reference belongs to, or -1 when unknown or ambiguous.
int OwnerOf(const duckdb::ColumnRefExpression& ref, const std::vector<Source>& sources) {
  if (ref.column_names.size() >= 2) {
    const std::string qualifier = Lower(ref.column_names[ref.column_names.size() - 2]);
    for (size_t i = 0; i < sources.size(); ++i) {
      if (Lower(sources[i].alias) == qualifier) return static_cast<int>(i);
    }
    return -1;
  }
  int owner = -1;
  const std::string name = Lower(ref.GetColumnName());
  for (size_t i = 0; i < sources.size(); ++i) {
    for (const auto& f : sources[i].schema->fields()) {
      if (Lower(f->name()) == name) {
        if (owner != -1) return -1;
        owner = static_cast<int>(i);
        break;
      }
    }
  }
  return owner;
}

// The sources every column of `e` belongs to (bit set); -1 if one is unknown.
int64_t Owners(const ParsedExpression& e, const std::vector<Source>& sources) {
  int64_t mask = 0;
  std::function<bool(const ParsedExpression&)> visit = [&](const ParsedExpression& x) {
    if (x.GetExpressionClass() == ExpressionClass::COLUMN_REF) {
      int owner = OwnerOf(x.Cast<duckdb::ColumnRefExpression>(), sources);
      if (owner < 0) return false;
      mask |= int64_t{1} << owner;
      return true;
    }
    bool ok = true;
    duckdb::ParsedExpressionIterator::EnumerateChildren(
        x, [&](const ParsedExpression& child) { ok = ok && visit(child); });
    return ok;
  };
  return visit(e) ? mask : -1;
}

Status CollectSources(SqlEngine& sql, duckdb::TableRef& ref, Analysis* a, int depth) {
  using duckdb::TableReferenceType;
  if (ref.type == TableReferenceType::BASE_TABLE) {
    auto& base = ref.Cast<duckdb::BaseTableRef>();
    if (!base.schema_name.empty() && base.schema_name != INVALID_SCHEMA &&
        base.schema_name != "main") {
      return NotMaintainable("the table '" + base.schema_name + "." + base.table_name +
                             "' (not a live table)");
    }
    auto table = sql.RegisteredTable(base.table_name);
    if (table == nullptr) {
      return Status::KeyError("no live table '", base.table_name, "' (yet)");
    }
    if (static_cast<int>(a->sources.size()) >= kMaxSources) {
      return NotMaintainable("a join of more than " + std::to_string(kMaxSources) + " tables");
    }
    Source s;
    s.table = table->name();
    s.alias = base.alias.empty() ? base.table_name : base.alias;
    s.schema = table->schema();
    s.key = table->primary_key();
    if (!table->keyed()) s.key.clear();
    a->sources.push_back(std::move(s));
    return Status::OK();
  }
  if (ref.type != TableReferenceType::JOIN) {
    return NotMaintainable("the FROM item " + ref.ToString() + " (only live tables and joins)");
  }
  auto& join = ref.Cast<duckdb::JoinRef>();
  if (join.ref_type != duckdb::JoinRefType::REGULAR && !join.is_implicit) {
    return NotMaintainable("a " + std::string(duckdb::EnumUtil::ToChars(join.ref_type)) +
                           " join");
  }
  if (!join.using_columns.empty()) {
    return NotMaintainable("JOIN ... USING (write the join as ON a.x = b.x)");
  }
  RILL_RETURN_NOT_OK(CollectSources(sql, *join.left, a, depth + 1));
  const size_t left_count = a->sources.size();
  RILL_RETURN_NOT_OK(CollectSources(sql, *join.right, a, depth + 1));
  if (join.type == duckdb::JoinType::INNER) {
    if (join.condition) a->inner_conditions.push_back("(" + join.condition->ToString() + ")");
    if (!join.condition && !join.is_implicit) {
      return NotMaintainable("a join without a condition");
    }
    if (join.is_implicit && a->left_join) {
      return NotMaintainable("a comma join after a LEFT JOIN");
    }
    return Status::OK();
  }
  if (join.type != duckdb::JoinType::LEFT) {
    return NotMaintainable(std::string(duckdb::EnumUtil::ToChars(join.type)) +
                           " JOIN (only INNER and LEFT joins)");
  }
  if (depth != 0 || left_count != 1 || a->sources.size() != 2) {
    return NotMaintainable("a LEFT JOIN other than of two tables (a LEFT JOIN b)");
  }
  if (!join.condition) return NotMaintainable("a LEFT JOIN without a condition");
  // The condition: equalities between a column expression of each side.
  std::vector<const ParsedExpression*> conjuncts;
  std::function<void(const ParsedExpression&)> split = [&](const ParsedExpression& e) {
    if (e.GetExpressionType() == duckdb::ExpressionType::CONJUNCTION_AND) {
      for (auto& c : e.Cast<duckdb::ConjunctionExpression>().children) split(*c);
    } else {
      conjuncts.push_back(&e);
    }
  };
  split(*join.condition);
  for (const ParsedExpression* c : conjuncts) {
    if (c->GetExpressionType() != duckdb::ExpressionType::COMPARE_EQUAL) {
      return NotMaintainable("the LEFT JOIN condition " + c->ToString() +
                             " (only equalities of the two sides)");
    }
    auto& cmp = c->Cast<duckdb::ComparisonExpression>();
    const int64_t l = Owners(*cmp.left, a->sources), r = Owners(*cmp.right, a->sources);
    if (l == 1 && r == 2) {
      a->left_keys.emplace_back(cmp.left->ToString(), cmp.right->ToString());
    } else if (l == 2 && r == 1) {
      a->left_keys.emplace_back(cmp.right->ToString(), cmp.left->ToString());
    } else {
      return NotMaintainable("the LEFT JOIN condition " + c->ToString() +
                             " (each side must read one table)");
    }
  }
  a->left_join = true;
  a->left_condition = join.condition->ToString();
  return Status::OK();
}

bool IsAggregateName(const std::string& name) {
  static const std::set<std::string> kNames = {
      "count", "sum", "avg", "mean", "min", "max", "count_star", "sum_no_overflow",
      "first", "last", "any_value", "arbitrary", "list", "array_agg", "string_agg",
      "group_concat", "median", "quantile", "quantile_cont", "quantile_disc", "mode",
      "stddev", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop",
      "approx_count_distinct", "approx_quantile", "bool_and", "bool_or", "bit_and",
      "bit_or", "bit_xor", "product", "fsum", "favg", "kahan_sum", "sumkahan", "arg_min",
      "arg_max", "argmin", "argmax", "min_by", "max_by", "histogram", "entropy", "kurtosis",
      "skewness", "corr", "covar_pop", "covar_samp", "regr_slope", "regr_intercept",
      "regr_count", "regr_r2", "regr_avgx", "regr_avgy", "regr_sxx", "regr_syy", "regr_sxy",
      "bitstring_agg", "geomean", "geometric_mean", "mad", "reservoir_quantile"};
  return kNames.count(name) > 0;
}

// The query's aggregates, replaced (in the select list and HAVING) by
// references `__a<j>`; their arguments are collected as stage columns.
class AggregateRewriter {
 public:
  std::vector<IvmAggregate> aggregates;
  std::vector<std::string> args;  // stage argument expressions (text)
  std::vector<std::string> texts;

  Status Rewrite(unique_ptr<ParsedExpression>& e) {
    if (e->GetExpressionClass() == ExpressionClass::WINDOW) {
      return NotMaintainable("the window function " + e->ToString());
    }
    if (e->GetExpressionClass() == ExpressionClass::SUBQUERY) {
      return NotMaintainable("the subquery " + e->ToString());
    }
    if (e->GetExpressionClass() == ExpressionClass::FUNCTION) {
      auto& fn = e->Cast<duckdb::FunctionExpression>();
      const std::string name = Lower(fn.function_name);
      if (IsAggregateName(name)) return Aggregate(e, fn, name);
    }
    Status st;
    duckdb::ParsedExpressionIterator::EnumerateChildren(
        *e, [&](unique_ptr<ParsedExpression>& child) {
          if (st.ok()) st = Rewrite(child);
        });
    return st;
  }

 private:
  Status Aggregate(unique_ptr<ParsedExpression>& e, duckdb::FunctionExpression& fn,
                   const std::string& name) {
    const std::string text = Text(*e);
    if (fn.filter) return NotMaintainable("the aggregate FILTER clause of " + text);
    if (fn.order_bys && !fn.order_bys->orders.empty()) {
      return NotMaintainable("the ordered aggregate " + text);
    }
    IvmAggregate agg;
    agg.text = text;
    if (name == "count_star" || (name == "count" && fn.children.empty())) {
      agg.kind = IvmAggregateKind::kCountStar;
    } else if (fn.children.size() != 1) {
      return NotMaintainable("the aggregate " + text);
    } else if (name == "count") {
      agg.kind = fn.distinct ? IvmAggregateKind::kCountDistinct : IvmAggregateKind::kCount;
    } else if (fn.distinct && name != "min" && name != "max") {
      return NotMaintainable("the aggregate " + text + " (DISTINCT only with count)");
    } else if (name == "sum") {
      agg.kind = IvmAggregateKind::kSum;
    } else if (name == "avg" || name == "mean") {
      agg.kind = IvmAggregateKind::kAvg;
    } else if (name == "min") {
      agg.kind = IvmAggregateKind::kMin;
    } else if (name == "max") {
      agg.kind = IvmAggregateKind::kMax;
    } else {
      return NotMaintainable("the aggregate " + text +
                             " (only count, sum, avg, min, max and count(DISTINCT))");
    }
    if (agg.kind != IvmAggregateKind::kCountStar) {
      // No aggregate inside an aggregate, no subquery or window.
      bool nested = false;
      std::function<void(const ParsedExpression&)> visit = [&](const ParsedExpression& x) {
        if (x.GetExpressionClass() == ExpressionClass::WINDOW ||
            x.GetExpressionClass() == ExpressionClass::SUBQUERY ||
            (x.GetExpressionClass() == ExpressionClass::FUNCTION &&
             IsAggregateName(Lower(x.Cast<duckdb::FunctionExpression>().function_name)))) {
          nested = true;
        }
        duckdb::ParsedExpressionIterator::EnumerateChildren(x, visit);
      };
      visit(*fn.children[0]);
      if (nested) return NotMaintainable("the aggregate " + text);
      const std::string arg = fn.children[0]->ToString();
      auto it = std::find(args.begin(), args.end(), arg);
      agg.arg = static_cast<int>(it - args.begin());
      if (it == args.end()) args.push_back(arg);
    }
    // The same aggregate twice is kept once.
    int index = -1;
    for (size_t j = 0; j < aggregates.size(); ++j) {
      if (texts[j] == text) index = static_cast<int>(j);
    }
    if (index < 0) {
      index = static_cast<int>(aggregates.size());
      aggregates.push_back(agg);
      texts.push_back(text);
    }
    const std::string alias = e->alias;
    e = duckdb::make_uniq<duckdb::ColumnRefExpression>("__a" + std::to_string(index));
    e->alias = alias;
    return Status::OK();
  }
};

// Replace the subtrees equal to a group expression by `__g<i>`.
void ReplaceGroups(unique_ptr<ParsedExpression>& e, const std::vector<std::string>& groups) {
  const std::string text = Text(*e);
  for (size_t i = 0; i < groups.size(); ++i) {
    if (text == groups[i]) {
      const std::string alias = e->alias;
      e = duckdb::make_uniq<duckdb::ColumnRefExpression>("__g" + std::to_string(i));
      e->alias = alias;
      return;
    }
  }
  duckdb::ParsedExpressionIterator::EnumerateChildren(
      *e, [&](unique_ptr<ParsedExpression>& child) { ReplaceGroups(child, groups); });
}

// True when `e` reads a column other than __g<i> / __a<j>.
bool ReadsRawColumns(const ParsedExpression& e) {
  if (e.GetExpressionClass() == ExpressionClass::COLUMN_REF) {
    const auto& name = e.Cast<duckdb::ColumnRefExpression>().GetColumnName();
    return !(name.rfind("__g", 0) == 0 || name.rfind("__a", 0) == 0);
  }
  bool raw = false;
  duckdb::ParsedExpressionIterator::EnumerateChildren(
      e, [&](const ParsedExpression& child) { raw = raw || ReadsRawColumns(child); });
  return raw;
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string Relation(const std::string& name, const std::string& alias) {
  return QuoteIdentifier(name) + " AS " + QuoteIdentifier(alias);
}

}  // namespace

Result<IvmPlan> PlanIncremental(SqlEngine& sql, const std::string& query,
                                const std::string& prefix) {
  duckdb::Parser parser;
  try {
    parser.ParseQuery(query);
  } catch (const std::exception& e) {
    return Status::Invalid("cannot parse the query: ", duckdb::ErrorData(e).Message());
  }
  if (parser.statements.size() != 1 ||
      parser.statements[0]->type != duckdb::StatementType::SELECT_STATEMENT) {
    return NotMaintainable("a statement other than one SELECT");
  }
  auto& select = parser.statements[0]->Cast<duckdb::SelectStatement>();
  if (select.node->type == duckdb::QueryNodeType::CTE_NODE ||
      select.node->type == duckdb::QueryNodeType::RECURSIVE_CTE_NODE) {
    return NotMaintainable("WITH (a common table expression)");
  }
  if (select.node->type != duckdb::QueryNodeType::SELECT_NODE) {
    return NotMaintainable(std::string(duckdb::EnumUtil::ToChars(select.node->type)) ==
                                   "SET_OPERATION_NODE"
                               ? std::string("UNION / EXCEPT / INTERSECT")
                               : std::string("a recursive or set query"));
  }
  auto& node = select.node->Cast<duckdb::SelectNode>();
  if (!node.cte_map.map.empty()) return NotMaintainable("WITH (a common table expression)");
  for (const auto& m : node.modifiers) {
    switch (m->type) {
      case duckdb::ResultModifierType::ORDER_MODIFIER: return NotMaintainable("ORDER BY");
      case duckdb::ResultModifierType::DISTINCT_MODIFIER: return NotMaintainable("SELECT DISTINCT");
      default: return NotMaintainable("LIMIT / OFFSET");
    }
  }
  if (node.qualify) return NotMaintainable("QUALIFY");
  if (node.sample) return NotMaintainable("USING SAMPLE");
  if (node.groups.grouping_sets.size() > 1) {
    return NotMaintainable("GROUPING SETS / ROLLUP / CUBE");
  }
  if (node.aggregate_handling == duckdb::AggregateHandling::FORCE_AGGREGATES) {
    return NotMaintainable("GROUP BY ALL (name the group columns)");
  }
  if (!node.from_table || node.from_table->type == duckdb::TableReferenceType::EMPTY_FROM) {
    return NotMaintainable("a query without a FROM table");
  }

  Analysis a;
  RILL_RETURN_NOT_OK(CollectSources(sql, *node.from_table, &a, 0));
  const int n = static_cast<int>(a.sources.size());

  // Subqueries and window functions, named before the binder rewrites them.
  {
    std::string found;
    std::function<void(const ParsedExpression&)> scan = [&](const ParsedExpression& e) {
      if (!found.empty()) return;
      if (e.GetExpressionClass() == ExpressionClass::SUBQUERY) {
        found = "the subquery " + e.ToString();
      } else if (e.GetExpressionClass() == ExpressionClass::WINDOW) {
        found = "the window function " + e.ToString();
      } else {
        duckdb::ParsedExpressionIterator::EnumerateChildren(e, scan);
      }
    };
    for (const auto& e : node.select_list) scan(*e);
    if (node.where_clause) scan(*node.where_clause);
    if (node.having) scan(*node.having);
    for (const auto& g : node.groups.group_expressions) scan(*g);
    if (!found.empty()) return NotMaintainable(found);
  }

  // The binder: result names and types; determinism of every expression.
  std::vector<std::string> names;
  Status bound = SqlEngineAccess::WithConnection(sql, [&](duckdb::Connection& conn) {
    auto prepared = conn.Prepare(query);
    if (prepared->HasError()) return Status::Invalid(prepared->GetError());
    names = prepared->GetNames();
    // The plan as bound, before the optimizer folds now() and the like into constants.
    auto& config = conn.context->config;
    const bool optimizer = config.enable_optimizer;
    config.enable_optimizer = false;
    duckdb::unique_ptr<duckdb::LogicalOperator> plan;
    try {
      plan = conn.ExtractPlan(query);
    } catch (...) {
      config.enable_optimizer = optimizer;
      throw;
    }
    config.enable_optimizer = optimizer;
    std::string volatile_expr;
    std::function<void(duckdb::LogicalOperator&)> visit = [&](duckdb::LogicalOperator& op) {
      duckdb::LogicalOperatorVisitor::EnumerateExpressions(
          op, [&](unique_ptr<duckdb::Expression>* e) {
            if (volatile_expr.empty() && !(*e)->IsConsistent()) volatile_expr = (*e)->ToString();
          });
      for (auto& child : op.children) visit(*child);
    };
    visit(*plan);
    if (!volatile_expr.empty()) {
      return NotMaintainable("the non-deterministic expression " + volatile_expr);
    }
    return Status::OK();
  });
  RILL_RETURN_NOT_OK(bound);

  // SELECT * over one table: its columns.
  std::vector<unique_ptr<ParsedExpression>> select_list;
  for (auto& e : node.select_list) {
    if (e->GetExpressionClass() == ExpressionClass::STAR) {
      auto& star = e->Cast<duckdb::StarExpression>();
      if (n != 1 || star.expr || !star.exclude_list.empty() || !star.replace_list.empty() ||
          star.columns) {
        return NotMaintainable("SELECT * over a join, or with EXCLUDE / REPLACE / COLUMNS");
      }
      for (const auto& f : a.sources[0].schema->fields()) {
        select_list.push_back(duckdb::make_uniq<duckdb::ColumnRefExpression>(
            f->name(), a.sources[0].alias));
      }
      continue;
    }
    select_list.push_back(e->Copy());
  }
  if (select_list.size() != names.size()) {
    return Status::Invalid("incremental plan: ", select_list.size(), " select items but ",
                           names.size(), " result columns");
  }

  IvmPlan plan;
  plan.output_names = names;
  for (int i = 0; i < n; ++i) {
    plan.sources.push_back(
        {a.sources[i].table, a.sources[i].alias, prefix + "_d" + std::to_string(i)});
  }

  // GROUP BY: positions and select aliases name select items.
  std::vector<std::string> groups;
  for (auto& g : node.groups.group_expressions) {
    if (g->GetExpressionClass() == ExpressionClass::CONSTANT) {
      auto value = g->Cast<duckdb::ConstantExpression>().value;
      if (value.type().IsIntegral()) {
        const int64_t pos = value.GetValue<int64_t>();
        if (pos < 1 || pos > static_cast<int64_t>(select_list.size())) {
          return Status::Invalid("GROUP BY position ", pos, " is not in the select list");
        }
        groups.push_back(Text(*select_list[pos - 1]));
        continue;
      }
    }
    if (g->GetExpressionClass() == ExpressionClass::COLUMN_REF &&
        !g->Cast<duckdb::ColumnRefExpression>().IsQualified()) {
      const std::string name = Lower(g->Cast<duckdb::ColumnRefExpression>().GetColumnName());
      bool is_column = false;
      for (const auto& s : a.sources) {
        for (const auto& f : s.schema->fields()) is_column |= Lower(f->name()) == name;
      }
      if (!is_column) {
        bool found = false;
        for (auto& item : select_list) {
          if (!found && Lower(item->alias) == name) {
            groups.push_back(Text(*item));
            found = true;
          }
        }
        if (found) continue;
      }
    }
    groups.push_back(Text(*g));
  }

  AggregateRewriter aggs;
  std::vector<unique_ptr<ParsedExpression>> final_list;
  for (auto& item : select_list) {
    auto copy = item->Copy();
    RILL_RETURN_NOT_OK(aggs.Rewrite(copy));
    final_list.push_back(std::move(copy));
  }
  unique_ptr<ParsedExpression> having;
  if (node.having) {
    having = node.having->Copy();
    RILL_RETURN_NOT_OK(aggs.Rewrite(having));
  }
  plan.aggregate = !groups.empty() || !aggs.aggregates.empty();
  if (node.where_clause) {
    Status st = aggs.Rewrite(node.where_clause);  // only to refuse subqueries / windows
    RILL_RETURN_NOT_OK(st);
  }

  // The FROM / WHERE part of a term: source i reads its changes when bit i of
  // `delta` is set.
  std::vector<std::string> where;
  for (const auto& c : a.inner_conditions) where.push_back(c);
  if (node.where_clause) where.push_back("(" + node.where_clause->ToString() + ")");
  auto rel = [&](int i, uint32_t delta) {
    return Relation((delta >> i) & 1 ? plan.sources[i].scratch : a.sources[i].table,
                    a.sources[i].alias);
  };
  auto mult_of = [&](uint32_t delta) {
    std::vector<std::string> factors;
    for (int i = 0; i < n; ++i) {
      if ((delta >> i) & 1) factors.push_back(QuoteIdentifier(a.sources[i].alias) + ".__m");
    }
    return factors.empty() ? std::string("1") : Join(factors, " * ");
  };

  std::vector<std::string> stage_columns;
  if (plan.aggregate) {
    plan.num_groups = static_cast<int>(groups.size());
    for (size_t i = 0; i < groups.size(); ++i) {
      stage_columns.push_back(groups[i] + " AS __g" + std::to_string(i));
    }
    for (size_t j = 0; j < aggs.args.size(); ++j) {
      stage_columns.push_back(aggs.args[j] + " AS __x" + std::to_string(j));
    }
    for (auto& agg : aggs.aggregates) {
      if (agg.arg >= 0) agg.arg += plan.num_groups;
    }
    plan.aggregates = aggs.aggregates;
    // The group stage: group expressions become __g<i>.
    for (auto& item : final_list) ReplaceGroups(item, groups);
    if (having) ReplaceGroups(having, groups);
    std::vector<std::string> out;
    for (size_t k = 0; k < final_list.size(); ++k) {
      if (ReadsRawColumns(*final_list[k])) {
        return Status::Invalid("the select item ", select_list[k]->ToString(),
                               " is neither grouped nor aggregated");
      }
      auto bare = final_list[k]->Copy();
      bare->alias.clear();
      out.push_back(bare->ToString() + " AS " + QuoteIdentifier(names[k]));
      const std::string text = bare->ToString();
      for (size_t i = 0; i < groups.size(); ++i) {
        if (text == "__g" + std::to_string(i)) {
          if (std::find(plan.key_groups.begin(), plan.key_groups.end(), static_cast<int>(i)) ==
              plan.key_groups.end()) {
            plan.output_key.push_back(names[k]);
            plan.key_groups.push_back(static_cast<int>(i));
          }
        }
      }
    }
    if (static_cast<int>(plan.key_groups.size()) != plan.num_groups) {
      for (size_t i = 0; i < groups.size(); ++i) {
        if (std::find(plan.key_groups.begin(), plan.key_groups.end(), static_cast<int>(i)) ==
            plan.key_groups.end()) {
          return NotMaintainable("GROUP BY " + groups[i] +
                                 " without that expression as a column of the result");
        }
      }
    }
    if (having && ReadsRawColumns(*having)) {
      return Status::Invalid("HAVING ", node.having->ToString(),
                             " reads a column that is neither grouped nor aggregated");
    }
    // The aggregates' bound types: the group stage casts its values to them
    // (a sum of integers is kept as DECIMAL(38,0), DuckDB's HUGEINT).
    std::vector<std::string> casts;
    if (!aggs.texts.empty()) {
      const std::string probe =
          "SELECT " + Join(aggs.texts, ", ") + " FROM " + node.from_table->ToString() +
          (node.where_clause ? " WHERE " + node.where_clause->ToString() : "") +
          (groups.empty() ? "" : " GROUP BY " + Join(groups, ", ")) + " LIMIT 0";
      RILL_RETURN_NOT_OK(SqlEngineAccess::WithConnection(sql, [&](duckdb::Connection& conn) {
        auto prepared = conn.Prepare(probe);
        if (prepared->HasError()) return Status::Invalid(prepared->GetError());
        const auto& types = prepared->GetTypes();
        for (size_t j = 0; j < types.size(); ++j) {
          const std::string a = "__a" + std::to_string(j);
          casts.push_back("CAST(" + a + " AS " + types[j].ToString() + ") AS " + a);
        }
        return Status::OK();
      }));
    }
    plan.groups_scratch = prefix + "_groups";
    const std::string groups_relation =
        casts.empty() ? QuoteIdentifier(plan.groups_scratch)
                      : "(SELECT * REPLACE (" + Join(casts, ", ") + ") FROM " +
                            QuoteIdentifier(plan.groups_scratch) + ") AS __groups";
    plan.final_sql = "SELECT " + Join(out, ", ") + ", __gid FROM " + groups_relation +
                     (having ? " WHERE " + having->ToString() : std::string());
  } else {
    // Rows keyed by every source's key, each a column of the result.
    for (int i = 0; i < n; ++i) {
      if (a.sources[i].key.empty()) {
        return NotMaintainable("a query without GROUP BY over the table '" +
                               a.sources[i].table +
                               "', which has no primary key (its rows could not be retracted)");
      }
      for (const auto& key : a.sources[i].key) {
        int found = -1;
        for (size_t k = 0; k < select_list.size() && found < 0; ++k) {
          if (select_list[k]->GetExpressionClass() != ExpressionClass::COLUMN_REF) continue;
          auto& ref = select_list[k]->Cast<duckdb::ColumnRefExpression>();
          if (Lower(ref.GetColumnName()) == Lower(key) && OwnerOf(ref, a.sources) == i) {
            found = static_cast<int>(k);
          }
        }
        if (found < 0) {
          return NotMaintainable("a query without GROUP BY that does not select the key column " +
                                 a.sources[i].alias + "." + key);
        }
        plan.output_key.push_back(names[found]);
        plan.key_columns.push_back(found);
      }
    }
    for (size_t k = 0; k < select_list.size(); ++k) {
      auto bare = select_list[k]->Copy();
      bare->alias.clear();
      stage_columns.push_back(bare->ToString() + " AS " + QuoteIdentifier(names[k]));
    }
  }

  const std::string columns = Join(stage_columns, ", ");
  auto where_sql = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> all = where;
    for (const auto& e : extra) all.push_back(e);
    return all.empty() ? std::string() : " WHERE " + Join(all, " AND ");
  };
  auto term = [&](const std::string& from, const std::string& mult,
                  const std::vector<std::string>& extra) {
    return "SELECT " + columns + (columns.empty() ? "" : ", ") + "CAST(" + mult + " AS BIGINT) AS __m FROM " + from +
           where_sql(extra);
  };
  if (!a.left_join) {
    std::vector<std::string> rels;
    for (int i = 0; i < n; ++i) rels.push_back(rel(i, 0));
    plan.full_sql = term(Join(rels, ", "), "1", {});
    // Inclusion-exclusion: every non-empty set of sources read as changes.
    for (uint32_t delta = 1; delta < (1u << n); ++delta) {
      std::vector<std::string> parts;
      for (int i = 0; i < n; ++i) parts.push_back(rel(i, delta));
      const bool odd = __builtin_popcount(delta) % 2 == 1;
      const std::string mult = odd ? mult_of(delta) : "-(" + mult_of(delta) + ")";
      plan.terms.push_back({term(Join(parts, ", "), mult, {}), delta});
    }
  } else {
    const std::string& la = a.sources[0].alias;
    const std::string& ra = a.sources[1].alias;
    auto left_join = [&](uint32_t delta) {
      return rel(0, delta) + " LEFT JOIN " + rel(1, delta) + " ON " + a.left_condition;
    };
    plan.full_sql = term(left_join(0), "1", {});
    // The matched rows: inclusion-exclusion as for an inner join.
    for (uint32_t delta = 1; delta < 4; ++delta) {
      const std::string from = rel(0, delta) + " JOIN " + rel(1, delta) + " ON " +
                               a.left_condition;
      const std::string mult = delta == 3 ? "-(" + mult_of(delta) + ")" : mult_of(delta);
      plan.terms.push_back({term(from, mult, {}), delta});
    }
    // Added left rows without a match.
    const std::string right_hit = "(SELECT *, true AS __hit FROM " +
                                  QuoteIdentifier(a.sources[1].table) + ") AS " +
                                  QuoteIdentifier(ra);
    plan.terms.push_back({term(rel(0, 1) + " LEFT JOIN " + right_hit + " ON " + a.left_condition,
                               QuoteIdentifier(la) + ".__m",
                               {QuoteIdentifier(ra) + ".__hit IS NULL"}),
                          1u});
    // Keys whose match count went to or from 0: the left rows of that key
    // gain (+1) or lose (-1) their unmatched row.
    std::vector<std::string> dkeys, nconds, fconds;
    for (size_t k = 0; k < a.left_keys.size(); ++k) {
      const std::string kc = "__k" + std::to_string(k);
      dkeys.push_back(a.left_keys[k].second + " AS " + kc);
      nconds.push_back(a.left_keys[k].second + " = __d." + kc);
      fconds.push_back(a.left_keys[k].first + " = __flips." + kc);
    }
    std::vector<std::string> kcols;
    for (size_t k = 0; k < a.left_keys.size(); ++k) kcols.push_back("__d.__k" + std::to_string(k));
    plan.with_clause =
        "WITH __flips AS (SELECT " + Join(kcols, ", ") +
        ", CASE WHEN __n = 0 THEN 1 ELSE -1 END AS __s FROM (SELECT __d.*, (SELECT count(*) FROM " +
        Relation(a.sources[1].table, ra) + " WHERE " + Join(nconds, " AND ") +
        ") AS __n FROM (SELECT " + Join(dkeys, ", ") + ", sum(" + QuoteIdentifier(ra) +
        ".__m) AS __dn FROM " + Relation(plan.sources[1].scratch, ra) + " GROUP BY ALL) AS __d) AS __d " +
        "WHERE (__n = 0) <> (__n - __dn = 0)) ";
    const std::string nulls = " LEFT JOIN " + Relation(a.sources[1].table, ra) + " ON false";
    plan.terms.push_back({term(rel(0, 0) + " JOIN __flips ON " + Join(fconds, " AND ") + nulls,
                               "__flips.__s", {}),
                          2u});
    plan.terms.push_back({term(rel(0, 1) + " JOIN __flips ON " + Join(fconds, " AND ") + nulls,
                               "-__flips.__s * " + QuoteIdentifier(la) + ".__m", {}),
                          3u});
  }
  return plan;
}

}  // namespace rill
