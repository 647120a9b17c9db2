// The DDL parser (src/rill/pipeline/ddl.h): the issue's statements parse to
// what they say; malformed statements (hundreds, by mutation) are refused
// with SQLSTATE 42601 (or 42704 for an unknown type) and never crash.
#include "rill/pipeline/ddl.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace rill::pipeline {
namespace {

std::string Opt(const DdlStatement& st, const std::string& key) {
  for (const auto& [k, v] : st.with) {
    if (k == key) return v.text;
  }
  return "<missing>";
}

// The statements of the issue, as written there.
const std::vector<std::string>& IssueStatements() {
  static const std::vector<std::string> statements = {
      "CREATE TABLE orders (order_id BIGINT NOT NULL, region TEXT, price DOUBLE, ts TIMESTAMP, "
      "PRIMARY KEY (order_id))\n  WITH (mode = 'snapshot', max_rows = 1000000, "
      "max_age_seconds = 3600, time_column = 'ts');",
      "CREATE SOURCE orders_kafka INTO orders\n  WITH (connector = 'kafka', topics = 'orders', "
      "\"bootstrap.servers\" = '127.0.0.1:9092',\n        \"group.id\" = 'rill', format = 'json', "
      "start = 'earliest', on_overflow = 'error');",
      "CREATE MATERIALIZED VIEW revenue_by_region WITH (interval_seconds = 1, primary_key = "
      "'region') AS\n  SELECT region, sum(price) AS revenue, count(*) AS n FROM orders GROUP BY "
      "region;",
      "CREATE STREAM VIEW big_orders WITH (source = 'orders', max_rows = 100000) AS\n  SELECT * "
      "FROM orders WHERE price > 100;                      -- a StreamSqlTask over new rows",
      "CREATE WINDOW orders_per_minute WITH (source = 'orders', time_column = 'ts', window = "
      "'tumbling',\n  size_seconds = 60, group_by = 'region', aggregations = "
      "'n=count(*),revenue=sum(price)');",
      "CREATE SINK revenue_out FROM revenue_by_region\n  WITH (connector = 'kafka', topic = "
      "'revenue', \"bootstrap.servers\" = '127.0.0.1:9092', mode = 'upsert');",
      "CREATE KPI total_revenue WITH (interval_seconds = 1, chart_type = 'line') AS SELECT "
      "sum(price) AS revenue FROM orders;",
      "CREATE ALERT RULE high_price WITH (metric = 'max_price', op = '>', threshold = 1000, "
      "severity = 'warning');",
      "DROP TABLE IF EXISTS orders CASCADE;",
      "DROP MATERIALIZED VIEW revenue_by_region",
      "DROP ALERT RULE high_price;",
      "SHOW TABLES;",
      "SHOW SOURCES",
      "SHOW VIEWS;",
      "SHOW SINKS;",
      "SHOW WINDOWS;",
  };
  return statements;
}

TEST(Ddl, TheIssuesStatementsParse) {
  for (const std::string& sql : IssueStatements()) {
    auto st = ParseDdl(sql);
    EXPECT_TRUE(st.ok()) << sql << "\n" << st.status().ToString();
    EXPECT_TRUE(IsDdl(sql)) << sql;
  }
}

TEST(Ddl, CreateTableReadsColumnsKeyAndOptions) {
  auto st = ParseDdl(IssueStatements()[0]);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->verb, DdlStatement::Verb::kCreate);
  EXPECT_EQ(st->object, DdlObject::kTable);
  EXPECT_EQ(st->name, "orders");
  ASSERT_EQ(st->columns.size(), 4u);
  EXPECT_EQ(st->columns[0].name, "order_id");
  EXPECT_EQ(st->columns[0].type, "int64");
  EXPECT_TRUE(st->columns[0].not_null);
  EXPECT_EQ(st->columns[1].type, "string");
  EXPECT_FALSE(st->columns[1].not_null);
  EXPECT_EQ(st->columns[2].type, "float64");
  EXPECT_EQ(st->columns[3].type, "timestamp");
  EXPECT_EQ(st->primary_key, (std::vector<std::string>{"order_id"}));
  EXPECT_EQ(Opt(*st, "mode"), "snapshot");
  EXPECT_EQ(Opt(*st, "max_rows"), "1000000");
  EXPECT_EQ(Opt(*st, "time_column"), "ts");

  auto inline_key = ParseDdl(
      "create table \"My Table\" (\"Id\" int primary key, v double precision, "
      "t timestamp with time zone, name varchar(20) null)");
  ASSERT_TRUE(inline_key.ok()) << inline_key.status().ToString();
  EXPECT_EQ(inline_key->name, "My Table");
  EXPECT_EQ(inline_key->primary_key, (std::vector<std::string>{"Id"}));
  EXPECT_EQ(inline_key->columns[0].type, "int32");
  EXPECT_TRUE(inline_key->columns[0].not_null);
  EXPECT_EQ(inline_key->columns[1].type, "float64");
  EXPECT_EQ(inline_key->columns[2].type, "timestamp[us, UTC]");
  EXPECT_EQ(inline_key->columns[3].type, "string");
}

TEST(Ddl, SourcesSinksAndViewsKeepTheirTargetsOptionsAndQuery) {
  auto source = ParseDdl(IssueStatements()[1]);
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(source->object, DdlObject::kSource);
  EXPECT_EQ(source->name, "orders_kafka");
  EXPECT_EQ(source->into, "orders");
  EXPECT_EQ(Opt(*source, "connector"), "kafka");
  EXPECT_EQ(Opt(*source, "bootstrap.servers"), "127.0.0.1:9092");
  EXPECT_EQ(Opt(*source, "group.id"), "rill");
  EXPECT_EQ(source->with.size(), 7u);

  auto view = ParseDdl(IssueStatements()[2]);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->object, DdlObject::kMaterializedView);
  EXPECT_EQ(view->query,
            "SELECT region, sum(price) AS revenue, count(*) AS n FROM orders GROUP BY region");
  EXPECT_EQ(Opt(*view, "primary_key"), "region");

  auto stream = ParseDdl(IssueStatements()[3]);
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(stream->object, DdlObject::kStreamView);
  EXPECT_EQ(stream->query.rfind("SELECT * FROM orders WHERE price > 100", 0), 0u) << stream->query;

  auto sink = ParseDdl(IssueStatements()[5]);
  ASSERT_TRUE(sink.ok());
  EXPECT_EQ(sink->from, "revenue_by_region");
  EXPECT_EQ(Opt(*sink, "mode"), "upsert");

  auto rule = ParseDdl(IssueStatements()[7]);
  ASSERT_TRUE(rule.ok());
  EXPECT_EQ(rule->object, DdlObject::kAlertRule);
  EXPECT_EQ(Opt(*rule, "op"), ">");
  EXPECT_EQ(Opt(*rule, "threshold"), "1000");

  auto drop = ParseDdl(IssueStatements()[8]);
  ASSERT_TRUE(drop.ok());
  EXPECT_EQ(drop->verb, DdlStatement::Verb::kDrop);
  EXPECT_TRUE(drop->if_exists);
  EXPECT_TRUE(drop->cascade);

  auto show = ParseDdl("show views");
  ASSERT_TRUE(show.ok());
  EXPECT_EQ(show->verb, DdlStatement::Verb::kShow);
  EXPECT_TRUE(show->show_all_views);
}

TEST(Ddl, NamesAndLiteralsFollowPostgres) {
  auto st = ParseDdl("CREATE KPI \"Q\"\"uote\" WITH (label = 'it''s') AS SELECT 1");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->name, "Q\"uote");
  EXPECT_EQ(Opt(*st, "label"), "it's");
  EXPECT_EQ(QuoteName("orders"), "orders");
  EXPECT_EQ(QuoteName("My Table"), "\"My Table\"");
  EXPECT_EQ(QuoteName("a\"b"), "\"a\"\"b\"");
  EXPECT_EQ(QuoteName("select"), "\"select\"");
  EXPECT_EQ(QuoteLiteral("it's"), "'it''s'");
  // Round trip: quoting then parsing gives the name back.
  for (std::string name : {"orders", "My Table", "a\"b", "select", "x.y", "Ünï"}) {
    auto back = ParseDdl("DROP TABLE " + QuoteName(name));
    ASSERT_TRUE(back.ok()) << name;
    EXPECT_EQ(back->name, name);
  }
}

TEST(Ddl, IsDdlTellsDdlFromQueriesAndSettings) {
  EXPECT_TRUE(IsDdl("  -- comment\n create table t (a int)"));
  EXPECT_TRUE(IsDdl("/* x */ DROP SINK s"));
  EXPECT_TRUE(IsDdl("show tables"));
  EXPECT_TRUE(IsDdl("SHOW ALERT RULES"));
  EXPECT_FALSE(IsDdl("SHOW search_path"));
  EXPECT_FALSE(IsDdl("SHOW ALL"));
  EXPECT_FALSE(IsDdl("SELECT 1"));
  EXPECT_FALSE(IsDdl("WITH x AS (SELECT 1) SELECT * FROM x"));
  EXPECT_FALSE(IsDdl(""));
}

void ExpectSyntaxError(const std::string& sql, const std::string& part = "") {
  auto st = ParseDdl(sql);
  ASSERT_FALSE(st.ok()) << sql;
  EXPECT_TRUE(st.status().IsInvalid()) << sql;
  const std::string state = SqlStateOf(st.status());
  EXPECT_TRUE(state == kSqlStateSyntax || state == kSqlStateUndefined) << sql << ": " << state;
  EXPECT_FALSE(st.status().message().empty());
  if (!part.empty()) {
    EXPECT_NE(st.status().message().find(part), std::string::npos)
        << sql << ": " << st.status().message();
  }
}

TEST(Ddl, RefusalsNameWhatIsWrong) {
  ExpectSyntaxError("CREATE TABEL t (a int)", "\"TABEL\"");
  ExpectSyntaxError("CREATE TABLE t (a int", "end of input");
  ExpectSyntaxError("CREATE TABLE t (a widget)", "type \"widget\" does not exist");
  ExpectSyntaxError("CREATE TABLE t ()", "column name");
  // PostgreSQL's codes: 42701 duplicate column, 42703 undefined column.
  auto duplicate = ParseDdl("CREATE TABLE t (a int, a int)");
  ASSERT_FALSE(duplicate.ok());
  EXPECT_EQ(SqlStateOf(duplicate.status()), "42701");
  EXPECT_NE(duplicate.status().message().find("specified more than once"), std::string::npos);
  auto unknown_key = ParseDdl("CREATE TABLE t (a int, PRIMARY KEY (b))");
  ASSERT_FALSE(unknown_key.ok());
  EXPECT_EQ(SqlStateOf(unknown_key.status()), "42703");
  EXPECT_NE(unknown_key.status().message().find("\"b\" named in key does not exist"),
            std::string::npos);
  ExpectSyntaxError("CREATE TABLE t (a int PRIMARY KEY, b int, PRIMARY KEY (b))",
                    "multiple primary keys");
  ExpectSyntaxError("CREATE SOURCE s WITH (connector = 'kafka')", "INTO");
  ExpectSyntaxError("CREATE SOURCE s INTO t", "WITH");
  ExpectSyntaxError("CREATE SOURCE s INTO t WITH (connector 'kafka')", "=");
  ExpectSyntaxError("CREATE SOURCE s INTO t WITH (connector = )", "a value");
  ExpectSyntaxError("CREATE SOURCE s INTO t WITH (connector = 'kafka',)", "option name");
  ExpectSyntaxError("CREATE MATERIALIZED VIEW v AS", "a query");
  ExpectSyntaxError("CREATE MATERIALIZED VIEW v AS DELETE FROM t", "a query");
  ExpectSyntaxError("CREATE VIEW v AS SELECT 1", "\"VIEW\"");
  ExpectSyntaxError("DROP TABLE", "a name");
  ExpectSyntaxError("DROP TABLE t u", "end of the statement");
  ExpectSyntaxError("SHOW COLUMNS", "TABLES");
  ExpectSyntaxError("CREATE TABLE 't' (a int)", "a name");
  ExpectSyntaxError("CREATE TABLE t (a int) WITH (mode = 'x'", "end of input");
  ExpectSyntaxError("CREATE TABLE \"\" (a int)", "zero-length");
  ExpectSyntaxError("CREATE KPI k WITH (a = 'unterminated) AS SELECT 1", "unterminated");
  ExpectSyntaxError("ALTER TABLE t ADD COLUMN b int", "CREATE, DROP or SHOW");
}

// Malformed statements by mutation of the valid ones: every prefix cut at a
// random byte, a token dropped, a token duplicated, punctuation swapped. Each
// either parses (some cuts are still whole statements) or is refused with a
// SQLSTATE and a message; nothing crashes (ASan/UBSan run this).
TEST(Ddl, HundredsOfMalformedStatementsAreRefusedCleanly) {
  std::mt19937 rng(1234);
  int refused = 0;
  int tried = 0;
  auto check = [&](const std::string& sql) {
    ++tried;
    auto st = ParseDdl(sql);
    if (st.ok()) return;
    ++refused;
    const std::string state = SqlStateOf(st.status());
    EXPECT_TRUE(state == kSqlStateSyntax || state == kSqlStateUndefined)
        << sql << ": " << st.status().ToString();
    EXPECT_FALSE(st.status().message().empty()) << sql;
  };
  const std::string junk[] = {"(", ")", ",", "=", "'", "\"", ";", "WITH", "AS", "--", "/*",
                              "PRIMARY", "KEY", "NOT", "\xff", "1e", "-", "."};
  for (const std::string& sql : IssueStatements()) {
    for (int i = 0; i < 12; ++i) {
      check(sql.substr(0, std::uniform_int_distribution<size_t>(0, sql.size())(rng)));
    }
    for (int i = 0; i < 12; ++i) {
      std::string m = sql;
      const size_t at = std::uniform_int_distribution<size_t>(0, m.size())(rng);
      m.insert(at, " " + junk[rng() % std::size(junk)] + " ");
      check(m);
    }
    for (int i = 0; i < 6; ++i) {
      std::string m = sql;
      const size_t at = std::uniform_int_distribution<size_t>(0, m.size() - 1)(rng);
      const size_t len = std::uniform_int_distribution<size_t>(1, 8)(rng);
      m.erase(at, len);
      check(m);
    }
  }
  EXPECT_GE(tried, 300);
  EXPECT_GE(refused, 300 / 2) << "the mutations should mostly break the statements";
}

}  // namespace
}  // namespace rill::pipeline
