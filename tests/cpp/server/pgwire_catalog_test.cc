// The catalog rewrite: PostgreSQL-only syntax in client SQL becomes DuckDB's;
// strings and quoted identifiers are never touched.
#include <gtest/gtest.h>

#include "rill/server/pgwire/pg_catalog.h"

namespace rill::pgwire {
namespace {

std::string Rewrite(const std::string& sql) {
  static const std::map<std::string, std::string> settings = {{"timezone", "UTC"}};
  CatalogSessionInfo info{"rill", "alice", 42, &settings};
  return RewriteCatalogSql(sql, info);
}

TEST(PgCatalogRewrite, ReplacesOperatorAndCollate) {
  EXPECT_EQ(Rewrite("WHERE c.relname OPERATOR(pg_catalog.~) '^(orders)$' COLLATE pg_catalog.default"),
            "WHERE c.relname  ~  '^(orders)$' ");
}

TEST(PgCatalogRewrite, PointsCatalogRelationsAndFunctionsAtRillPg) {
  EXPECT_EQ(Rewrite("SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c"),
            "SELECT rill_pg.pg_get_userbyid(c.relowner) FROM rill_pg.pg_class c");
  EXPECT_EQ(Rewrite("select version()"), "select rill_pg.version()");
  EXPECT_EQ(Rewrite("select t.version from pg_type t"), "select t.version from rill_pg.pg_type t");
}

TEST(PgCatalogRewrite, InlinesSessionValues) {
  EXPECT_EQ(Rewrite("select current_database(), current_user, current_setting('TimeZone')"),
            "select 'rill', 'alice', 'UTC'");
  EXPECT_EQ(Rewrite("select current_setting('nope')"), "select NULL::VARCHAR");
}

TEST(PgCatalogRewrite, LeavesStringsAndQuotedIdentifiersAlone) {
  EXPECT_EQ(Rewrite("select 'pg_class', \"pg_type\" from x -- pg_class\n"),
            "select 'pg_class', \"pg_type\" from x -- pg_class\n");
}

TEST(PgCatalogRewrite, CastsToPostgresOnlyTypes) {
  EXPECT_EQ(Rewrite("select x::oid, y::pg_catalog.int2[], z::\"char\""),
            "select x::BIGINT, y::int2[], z::VARCHAR");
  EXPECT_EQ(Rewrite("select 'orders'::regclass"), "select rill_pg.regclass_oid('orders')");
  EXPECT_EQ(Rewrite("select oid::regtype::text"), "select rill_pg.regtype_name(oid)::VARCHAR");
}

TEST(PgCatalogRewrite, NamesGenerateSeriesValueByItsAlias) {
  EXPECT_EQ(Rewrite("FROM generate_series(0, 3) s, t WHERE a[s]"),
            "FROM generate_series(0, 3) s(s), t WHERE a[s]");
}

TEST(PgCatalogRewrite, DropsPublicSchema) {
  EXPECT_EQ(Rewrite("select * from public.orders"), "select * from orders");
  EXPECT_EQ(Rewrite("select * from information_schema.tables"),
            "select * from rill_pg.information_schema_tables");
}

}  // namespace
}  // namespace rill::pgwire

namespace rill::pgwire {
namespace {
TEST(PgCatalogRewrite, PsqlPublicationQuery) {
  std::string sql =
      "         (SELECT string_agg(attname, ', ')\n"
      "           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,\n"
      "                pg_catalog.pg_attribute\n"
      "          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])";
  EXPECT_EQ(Rewrite(sql),
            "         (SELECT string_agg(attname, ', ')\n"
            "           FROM generate_series(0, rill_pg.array_upper(pr.prattrs::int2[], 1)) s(s),\n"
            "                rill_pg.pg_attribute\n"
            "          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])");
}
}  // namespace
}  // namespace rill::pgwire
