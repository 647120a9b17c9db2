// Catalog compatibility: what psql, psycopg, SQLAlchemy, pgjdbc and Grafana
// send to discover tables, made to run on DuckDB. Two parts:
//  - CatalogMacroSql(): macros and views (pg_get_userbyid, quote_ident,
//    pg_collation, ...) installed once into DuckDB's catalog;
//  - RewriteCatalogSql(): PostgreSQL-only syntax in the client's statement
//    turned into DuckDB's (OPERATOR(pg_catalog.~), COLLATE pg_catalog.default,
//    ::regclass casts, pg_catalog.-qualified calls of our macros).
//
// Threads: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rill::pgwire {

/// The CREATE MACRO / CREATE VIEW statements of the compatibility layer.
std::vector<std::string> CatalogMacroSql();

/// Return `sql` with the PostgreSQL-only constructs rewritten for DuckDB.
/// Strings, quoted identifiers and comments are left alone.
std::string RewriteCatalogSql(std::string_view sql);

}  // namespace rill::pgwire
