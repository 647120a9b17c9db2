// Catalog compatibility: what psql, psycopg, SQLAlchemy, pgjdbc and Grafana
// send to discover tables, made to run on DuckDB. Two parts:
//  - CatalogDefinitionSql(): a schema `rill_pg` of views and macros shaped like
//    PostgreSQL's catalogs (pg_class, pg_attribute, pg_type with real OIDs,
//    pg_database, pg_collation, information_schema.tables/columns, ...) and
//    functions (pg_get_userbyid, format_type, quote_ident, parse_ident,
//    version, ...), installed once into DuckDB's catalog. Live tables (the
//    DuckDB views of each connection) appear as tables of schema `public`.
//  - RewriteCatalogSql(): the client's statement with PostgreSQL-only syntax
//    turned into DuckDB's (OPERATOR(pg_catalog.~), COLLATE pg_catalog.default,
//    ::regclass and friends) and catalog names pointed at `rill_pg`; the
//    session's own values (current_database(), current_user,
//    current_setting('x')) inlined as literals.
//
// Threads: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rill::pgwire {

/// The schema holding the compatibility objects.
constexpr const char* kCatalogSchema = "rill_pg";

/// Which relations the catalogs list as the tables of schema `public`.
enum class CatalogTables {
  kLiveViews,   ///< the engine's DuckDB: each connection's temporary views (live tables)
  kMainTables,  ///< the metrics database: the base tables of schema main
};

/// The CREATE SCHEMA / VIEW / MACRO statements of the compatibility layer.
std::vector<std::string> CatalogDefinitionSql(CatalogTables tables = CatalogTables::kLiveViews);

/// What the rewrite inlines for the session.
struct CatalogSessionInfo {
  std::string database;
  std::string user;
  int32_t pid = 0;
  const std::map<std::string, std::string>* settings = nullptr;  ///< lower-case names
};

/// Return the statement that answers a driver's type-introspection query in
/// place of `sql` (asyncpg's INTRO_LOOKUP_TYPES: recursive CTEs over pg_type,
/// pg_range and pg_attribute for the OIDs in `$1::oid[]`), with the same
/// columns and parameter; nullopt for any other statement.
std::optional<std::string> DriverIntrospectionSql(std::string_view sql);

/// Return `sql` with PostgreSQL-only constructs rewritten for DuckDB.
/// Strings, quoted identifiers and comments are left alone.
std::string RewriteCatalogSql(std::string_view sql, const CatalogSessionInfo& session);

}  // namespace rill::pgwire
