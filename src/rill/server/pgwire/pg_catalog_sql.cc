// The rill_pg schema: PostgreSQL-shaped catalogs over DuckDB's. Live tables
// are the temporary, non-internal views of the querying connection (see
// sql/sql_engine.cc); they appear as ordinary tables of schema `public`, with
// OIDs derived from their names so that every pooled connection agrees.
#include "rill/server/pgwire/pg_catalog.h"

namespace rill::pgwire {
namespace {

constexpr const char* kTypeRows = R"sql(
  (16,'bool',1,'B',0,1000), (17,'bytea',-1,'U',0,1001), (18,'char',1,'Z',0,1002),
  (19,'name',64,'S',0,1003), (20,'int8',8,'N',0,1016), (21,'int2',2,'N',0,1005),
  (23,'int4',4,'N',0,1007), (25,'text',-1,'S',0,1009), (26,'oid',4,'N',0,1028),
  (114,'json',-1,'U',0,199), (700,'float4',4,'N',0,1021), (701,'float8',8,'N',0,1022),
  (1042,'bpchar',-1,'S',0,1014), (1043,'varchar',-1,'S',0,1015), (1082,'date',4,'D',0,1182),
  (1083,'time',8,'D',0,1183), (1114,'timestamp',8,'D',0,1115),
  (1184,'timestamptz',8,'D',0,1185), (1186,'interval',16,'T',0,1187),
  (1700,'numeric',-1,'N',0,1231), (2950,'uuid',16,'U',0,2951), (3802,'jsonb',-1,'U',0,3807),
  (1000,'_bool',-1,'A',16,0), (1001,'_bytea',-1,'A',17,0), (1002,'_char',-1,'A',18,0),
  (1003,'_name',-1,'A',19,0), (1005,'_int2',-1,'A',21,0), (1007,'_int4',-1,'A',23,0),
  (1009,'_text',-1,'A',25,0), (1014,'_bpchar',-1,'A',1042,0), (1015,'_varchar',-1,'A',1043,0),
  (1016,'_int8',-1,'A',20,0), (1021,'_float4',-1,'A',700,0), (1022,'_float8',-1,'A',701,0),
  (1028,'_oid',-1,'A',26,0), (1115,'_timestamp',-1,'A',1114,0), (1182,'_date',-1,'A',1082,0),
  (1183,'_time',-1,'A',1083,0), (1185,'_timestamptz',-1,'A',1184,0),
  (1187,'_interval',-1,'A',1186,0), (1231,'_numeric',-1,'A',1700,0),
  (2951,'_uuid',-1,'A',2950,0), (199,'_json',-1,'A',114,0), (3807,'_jsonb',-1,'A',3802,0),
  (705,'unknown',-2,'X',0,0), (2249,'record',-1,'P',0,2287), (2287,'_record',-1,'A',2249,0)
)sql";

// The schema, OID alias types and pg_type (macros below read it).
void DefineSchemaAndTypes(std::vector<std::string>* sql) {
  auto add = [sql](std::string s) { sql->push_back(std::move(s)); };
  add("CREATE SCHEMA IF NOT EXISTS rill_pg");
  // PostgreSQL's OID alias types, for CAST(x AS regclass) in client SQL (the
  // :: form is rewritten to lookups instead).
  for (const char* t : {"regclass", "regtype", "regproc", "regnamespace", "regrole", "oid",
                        "xid"}) {
    add(std::string("CREATE TYPE IF NOT EXISTS ") + t + " AS BIGINT");
  }
  add("CREATE TYPE IF NOT EXISTS name AS VARCHAR");
  add(std::string("CREATE OR REPLACE VIEW rill_pg.pg_type AS SELECT t.oid, t.typname, "
                  "CAST(11 AS BIGINT) AS typnamespace, CAST(10 AS BIGINT) AS typowner, "
                  "CAST(t.typlen AS SMALLINT) AS typlen, t.typlen > 0 AND t.typlen <= 8 AS typbyval, "
                  "CASE WHEN t.typcategory = 'P' THEN 'p' ELSE 'b' END AS typtype, "
                  "t.typcategory, false AS typispreferred, true AS typisdefined, ',' AS typdelim, "
                  "CAST(0 AS BIGINT) AS typrelid, CAST(t.typelem AS BIGINT) AS typelem, "
                  "CAST(t.typarray AS BIGINT) AS typarray, t.typname || 'in' AS typinput, "
                  "t.typname || 'out' AS typoutput, t.typname || 'recv' AS typreceive, "
                  "t.typname || 'send' AS typsend, '-' AS typmodin, '-' AS typmodout, "
                  "'-' AS typanalyze, 'i' AS typalign, 'p' AS typstorage, false AS typnotnull, "
                  "CAST(0 AS BIGINT) AS typbasetype, -1 AS typtypmod, 0 AS typndims, "
                  "CAST(0 AS BIGINT) AS typcollation, CAST(NULL AS VARCHAR) AS typdefaultbin, "
                  "CAST(NULL AS VARCHAR) AS typdefault, CAST(NULL AS VARCHAR[]) AS typacl, "
                  "'-' AS typsubscript "
                  "FROM (VALUES ") + kTypeRows +
      ") AS t(oid, typname, typlen, typcategory, typelem, typarray)");
}

// PostgreSQL functions clients call.
void DefineFunctions(std::vector<std::string>* sql) {
  auto add = [sql](std::string s) { sql->push_back(std::move(s)); };
  // ---- functions ----------------------------------------------------------
  add("CREATE OR REPLACE MACRO rill_pg.rel_oid(name) AS "
      "CAST(16384 + hash(name) % 1000000000 AS BIGINT)");
  add(R"sql(CREATE OR REPLACE MACRO rill_pg.duck_scalar_oid(t) AS CASE
      WHEN t = 'BOOLEAN' THEN 16
      WHEN t IN ('TINYINT', 'SMALLINT', 'UTINYINT') THEN 21
      WHEN t IN ('INTEGER', 'USMALLINT') THEN 23
      WHEN t IN ('BIGINT', 'UINTEGER') THEN 20
      WHEN t = 'FLOAT' THEN 700 WHEN t = 'DOUBLE' THEN 701
      WHEN t LIKE 'DECIMAL%' OR t IN ('UBIGINT', 'HUGEINT') THEN 1700
      WHEN t = 'BLOB' THEN 17 WHEN t = 'DATE' THEN 1082 WHEN t = 'TIME' THEN 1083
      WHEN t = 'TIMESTAMP WITH TIME ZONE' THEN 1184
      WHEN t LIKE 'TIMESTAMP%' THEN 1114 WHEN t = 'INTERVAL' THEN 1186
      ELSE 25 END)sql");
  add(R"sql(CREATE OR REPLACE MACRO rill_pg.duck_type_oid(t) AS CASE
      WHEN t LIKE '%[]' THEN coalesce((SELECT typarray FROM rill_pg.pg_type
          WHERE oid = rill_pg.duck_scalar_oid(t[1:-3]) AND typarray <> 0
            AND t[1:-3] NOT LIKE '%[%' AND t[1:-3] NOT LIKE '%(%'), 25)
      ELSE rill_pg.duck_scalar_oid(t) END)sql");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_userbyid(id) AS 'rill'");
  add("CREATE OR REPLACE MACRO rill_pg.pg_table_is_visible(id) AS true");
  add("CREATE OR REPLACE MACRO rill_pg.pg_type_is_visible(id) AS true");
  // Sessions ignore server settings they do not have (asyncpg turns jit off).
  add("CREATE OR REPLACE MACRO rill_pg.set_config(setting_name, new_value, is_local) AS "
      "CAST(new_value AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_function_is_visible(id) AS true");
  add("CREATE OR REPLACE MACRO rill_pg.pg_encoding_to_char(e) AS 'UTF8'");
  add("CREATE OR REPLACE MACRO rill_pg.version() AS "
      "'PostgreSQL 16.4 (Rill, DuckDB ' || main.version() || ') on x86_64-pc-linux-gnu, 64-bit'");
  add(R"sql(CREATE OR REPLACE MACRO rill_pg.scalar_type_name(type_oid) AS CASE type_oid
      WHEN 16 THEN 'boolean' WHEN 17 THEN 'bytea' WHEN 18 THEN '"char"' WHEN 19 THEN 'name'
      WHEN 20 THEN 'bigint' WHEN 21 THEN 'smallint' WHEN 23 THEN 'integer' WHEN 25 THEN 'text'
      WHEN 26 THEN 'oid' WHEN 114 THEN 'json' WHEN 700 THEN 'real'
      WHEN 701 THEN 'double precision' WHEN 1042 THEN 'character'
      WHEN 1043 THEN 'character varying' WHEN 1082 THEN 'date'
      WHEN 1083 THEN 'time without time zone' WHEN 1114 THEN 'timestamp without time zone'
      WHEN 1184 THEN 'timestamp with time zone' WHEN 1186 THEN 'interval'
      WHEN 1700 THEN 'numeric' WHEN 2950 THEN 'uuid' WHEN 3802 THEN 'jsonb' END)sql");
  add(R"sql(CREATE OR REPLACE MACRO rill_pg.format_type(type_oid, typmod) AS coalesce(
      rill_pg.scalar_type_name(type_oid),
      (SELECT rill_pg.scalar_type_name(typelem) || '[]' FROM rill_pg.pg_type
       WHERE oid = type_oid AND typelem <> 0), 'text'))sql");
  add("CREATE OR REPLACE MACRO rill_pg.pg_size_pretty(n) AS format_bytes(CAST(n AS BIGINT))");
  add(R"sql(CREATE OR REPLACE MACRO rill_pg.quote_ident(s) AS CASE
      WHEN regexp_full_match(s, '[a-z_][a-z0-9_$]*') AND lower(s) NOT IN
        (SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category = 'reserved')
      THEN s ELSE '"' || replace(s, '"', '""') || '"' END)sql");
  add(R"sql(CREATE OR REPLACE MACRO rill_pg.parse_ident(s) AS
      list_transform(regexp_extract_all(s, '("([^"]|"")*"|[^.]+)'),
        x -> CASE WHEN x[1] = '"' THEN replace(x[2:-2], '""', '"') ELSE lower(trim(x)) END))sql");
  add("CREATE OR REPLACE MACRO rill_pg.obj_description(o, c := NULL) AS CAST(NULL AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.col_description(o, n) AS CAST(NULL AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.shobj_description(o, c) AS CAST(NULL AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.has_table_privilege(a, b, c := NULL) AS true");
  add("CREATE OR REPLACE MACRO rill_pg.has_schema_privilege(a, b, c := NULL) AS true");
  add("CREATE OR REPLACE MACRO rill_pg.has_database_privilege(a, b, c := NULL) AS true");
  add("CREATE OR REPLACE MACRO rill_pg.has_column_privilege(a, b, c, d := NULL) AS true");
  add("CREATE OR REPLACE MACRO rill_pg.pg_has_role(a, b, c := NULL) AS true");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_indexdef(a, b := 0, c := false) AS CAST(NULL AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_constraintdef(a, b := false) AS CAST(NULL AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_viewdef(a, b := false) AS CAST(NULL AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_triggerdef(a, b := false) AS CAST(NULL AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_ruledef(a, b := false) AS CAST(NULL AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_expr(a, b, c := false) AS CAST(NULL AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_partkeydef(a) AS CAST(NULL AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_statisticsobjdef_columns(a) AS CAST(NULL AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_function_identity_arguments(a) AS ''");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_function_result(a) AS ''");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_serial_sequence(a, b) AS CAST(NULL AS VARCHAR)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_tablespace_location(a) AS ''");
  add("CREATE OR REPLACE MACRO rill_pg.current_schema() AS 'public'");
  add("CREATE OR REPLACE MACRO rill_pg.current_schemas(b) AS ['pg_catalog', 'public']");
  add("CREATE OR REPLACE MACRO rill_pg.pg_is_in_recovery() AS false");
  add("CREATE OR REPLACE MACRO rill_pg.pg_relation_is_publishable(r) AS false");
  add("CREATE OR REPLACE MACRO rill_pg.txid_current() AS CAST(1 AS BIGINT)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_postmaster_start_time() AS get_current_timestamp()");
  add("CREATE OR REPLACE MACRO rill_pg.inet_server_addr() AS '127.0.0.1'");
  add("CREATE OR REPLACE MACRO rill_pg.inet_server_port() AS CAST(NULL AS INTEGER)");
  add("CREATE OR REPLACE MACRO rill_pg.array_lower(a, d) AS CASE WHEN len(a) > 0 THEN 1 END");
  add("CREATE OR REPLACE MACRO rill_pg.array_upper(a, d) AS CASE WHEN len(a) > 0 THEN len(a) END");
  add("CREATE OR REPLACE MACRO rill_pg.pg_relation_size(a, b := 'main') AS CAST(0 AS BIGINT)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_total_relation_size(a) AS CAST(0 AS BIGINT)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_table_size(a) AS CAST(0 AS BIGINT)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_indexes_size(a) AS CAST(0 AS BIGINT)");
  add("CREATE OR REPLACE MACRO rill_pg.pg_get_function_arguments(a) AS ''");
  add("CREATE OR REPLACE MACRO rill_pg.pg_collation_is_visible(a) AS true");
  add("CREATE OR REPLACE MACRO rill_pg.pg_conversion_is_visible(a) AS true");
}

// Catalog relations with rows: live tables, databases, roles, ...
void DefineRelations(CatalogTables tables, std::vector<std::string>* sql) {
  auto add = [sql](std::string s) { sql->push_back(std::move(s)); };
  // ---- relations ----------------------------------------------------------
  if (tables == CatalogTables::kLiveViews) {
    add("CREATE OR REPLACE VIEW rill_pg.live_tables AS SELECT view_name AS name, "
        "rill_pg.rel_oid(view_name) AS oid, column_count FROM duckdb_views() "
        "WHERE temporary AND NOT internal");
  } else {
    add("CREATE OR REPLACE VIEW rill_pg.live_tables AS SELECT table_name AS name, "
        "rill_pg.rel_oid(table_name) AS oid, column_count FROM duckdb_tables() "
        "WHERE NOT internal AND NOT temporary AND schema_name = 'main' "
        "AND database_name = current_database()");
  }
  add("CREATE OR REPLACE VIEW rill_pg.pg_namespace AS SELECT * FROM (VALUES "
      "(CAST(11 AS BIGINT), 'pg_catalog', CAST(10 AS BIGINT), CAST(NULL AS VARCHAR[])), "
      "(2200, 'public', 10, NULL), (13000, 'information_schema', 10, NULL)) "
      "AS t(oid, nspname, nspowner, nspacl)");
  add(R"sql(CREATE OR REPLACE VIEW rill_pg.pg_class AS SELECT oid, name AS relname,
      CAST(2200 AS BIGINT) AS relnamespace, CAST(0 AS BIGINT) AS reltype,
      CAST(0 AS BIGINT) AS reloftype, CAST(10 AS BIGINT) AS relowner, CAST(2 AS BIGINT) AS relam,
      oid AS relfilenode, CAST(0 AS BIGINT) AS reltablespace, 0 AS relpages,
      CAST(-1 AS FLOAT) AS reltuples, 0 AS relallvisible, CAST(0 AS BIGINT) AS reltoastrelid,
      false AS relhasindex, false AS relisshared, 'p' AS relpersistence, 'r' AS relkind,
      CAST(column_count AS SMALLINT) AS relnatts, CAST(0 AS SMALLINT) AS relchecks,
      false AS relhasrules, false AS relhastriggers, false AS relhassubclass,
      false AS relrowsecurity, false AS relforcerowsecurity, true AS relispopulated,
      'd' AS relreplident, false AS relispartition, CAST(0 AS BIGINT) AS relrewrite,
      CAST(0 AS BIGINT) AS relfrozenxid, CAST(0 AS BIGINT) AS relminmxid,
      CAST(NULL AS VARCHAR[]) AS relacl, CAST(NULL AS VARCHAR[]) AS reloptions,
      CAST(NULL AS VARCHAR) AS relpartbound, false AS relhasoids
      FROM rill_pg.live_tables)sql");
  add(R"sql(CREATE OR REPLACE MACRO rill_pg.regclass_oid(rel) AS
      (SELECT oid FROM rill_pg.live_tables
       WHERE name = replace(string_split(CAST(rel AS VARCHAR), '.')[-1], '"', '') LIMIT 1))sql");
  add("CREATE OR REPLACE MACRO rill_pg.regclass_name(o) AS "
      "coalesce((SELECT name FROM rill_pg.live_tables WHERE oid = o), CAST(o AS VARCHAR))");
  add(R"sql(CREATE OR REPLACE MACRO rill_pg.regtype_oid(n) AS
      (SELECT oid FROM rill_pg.pg_type WHERE typname = lower(replace(CAST(n AS VARCHAR), 'pg_catalog.', ''))
         OR rill_pg.scalar_type_name(oid) = lower(CAST(n AS VARCHAR)) LIMIT 1))sql");
  add("CREATE OR REPLACE MACRO rill_pg.regtype_name(o) AS rill_pg.format_type(o, -1)");
  add("CREATE OR REPLACE MACRO rill_pg.to_regtype(n) AS rill_pg.regtype_oid(n)");
  add("CREATE OR REPLACE MACRO rill_pg.to_regclass(n) AS rill_pg.regclass_oid(n)");
  add(R"sql(CREATE OR REPLACE VIEW rill_pg.pg_attribute AS SELECT
      rill_pg.rel_oid(c.table_name) AS attrelid, c.column_name AS attname,
      CAST(rill_pg.duck_type_oid(c.data_type) AS BIGINT) AS atttypid, 0 AS attstattarget,
      CAST(-1 AS SMALLINT) AS attlen, CAST(c.column_index AS SMALLINT) AS attnum,
      0 AS attndims, -1 AS attcacheoff, -1 AS atttypmod, false AS attbyval, 'x' AS attstorage,
      'i' AS attalign, NOT c.is_nullable AS attnotnull, false AS atthasdef,
      false AS atthasmissing, '' AS attidentity, '' AS attgenerated, false AS attisdropped,
      true AS attislocal, 0 AS attinhcount, CAST(0 AS BIGINT) AS attcollation,
      '' AS attcompression, CAST(NULL AS VARCHAR[]) AS attacl,
      CAST(NULL AS VARCHAR[]) AS attoptions, CAST(NULL AS VARCHAR[]) AS attfdwoptions,
      CAST(NULL AS VARCHAR) AS attmissingval
      FROM duckdb_columns() c JOIN rill_pg.live_tables t ON t.name = c.table_name
      WHERE c.database_name = 'temp')sql");
  add("CREATE OR REPLACE VIEW rill_pg.pg_database AS SELECT * FROM (VALUES "
      "(CAST(16384 AS BIGINT), 'rill', CAST(10 AS BIGINT), 6, 'c', false, true, -1, "
      "CAST(1663 AS BIGINT), 'C.UTF-8', 'C.UTF-8', CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), "
      "CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR[])), "
      "(16385, 'rill_metrics', 10, 6, 'c', false, true, -1, 1663, 'C.UTF-8', 'C.UTF-8', NULL, "
      "NULL, NULL, NULL)) AS t(oid, datname, datdba, encoding, datlocprovider, datistemplate, "
      "datallowconn, datconnlimit, dattablespace, datcollate, datctype, daticulocale, "
      "daticurules, datcollversion, datacl)");
  add("CREATE OR REPLACE VIEW rill_pg.pg_collation AS SELECT CAST(100 AS BIGINT) AS oid, "
      "'default' AS collname, CAST(11 AS BIGINT) AS collnamespace, CAST(10 AS BIGINT) AS collowner, "
      "'d' AS collprovider, true AS collisdeterministic, -1 AS collencoding, "
      "CAST(NULL AS VARCHAR) AS collcollate, CAST(NULL AS VARCHAR) AS collctype, "
      "CAST(NULL AS VARCHAR) AS colliculocale, CAST(NULL AS VARCHAR) AS collicurules, "
      "CAST(NULL AS VARCHAR) AS collversion");
  add("CREATE OR REPLACE VIEW rill_pg.pg_am AS SELECT CAST(2 AS BIGINT) AS oid, 'heap' AS amname, "
      "'heap_tableam_handler' AS amhandler, 't' AS amtype");
  add("CREATE OR REPLACE VIEW rill_pg.pg_roles AS SELECT CAST(10 AS BIGINT) AS oid, 'rill' AS rolname, "
      "false AS rolsuper, false AS rolinherit, false AS rolcreaterole, false AS rolcreatedb, "
      "true AS rolcanlogin, false AS rolreplication, -1 AS rolconnlimit, "
      "CAST(NULL AS VARCHAR) AS rolpassword, CAST(NULL AS TIMESTAMP) AS rolvaliduntil, "
      "false AS rolbypassrls, CAST(NULL AS VARCHAR[]) AS rolconfig");
  add("CREATE OR REPLACE VIEW rill_pg.pg_user AS SELECT 'rill' AS usename, CAST(10 AS BIGINT) AS usesysid, "
      "false AS usecreatedb, false AS usesuper, false AS userepl, false AS usebypassrls");
  add("CREATE OR REPLACE VIEW rill_pg.pg_authid AS SELECT * FROM rill_pg.pg_roles");
  add("CREATE OR REPLACE VIEW rill_pg.pg_tables AS SELECT 'public' AS schemaname, name AS tablename, "
      "'rill' AS tableowner, CAST(NULL AS VARCHAR) AS tablespace, false AS hasindexes, "
      "false AS hasrules, false AS hastriggers, false AS rowsecurity FROM rill_pg.live_tables");
  add("CREATE OR REPLACE VIEW rill_pg.pg_settings AS SELECT name, value AS setting FROM "
      "duckdb_settings() WHERE false");
}

// Catalogs Rill has nothing for, with the columns clients read.
void DefineEmptyCatalogs(std::vector<std::string>* sql) {
  auto add = [sql](std::string s) { sql->push_back(std::move(s)); };
  // Empty catalogs with the columns clients read.
  auto empty = [&](const char* name, const char* columns) {
    add(std::string("CREATE OR REPLACE VIEW rill_pg.") + name + " AS SELECT * FROM (SELECT " +
        columns + ") WHERE false");
  };
  empty("pg_index",
        "CAST(0 AS BIGINT) AS indexrelid, CAST(0 AS BIGINT) AS indrelid, 0 AS indnatts, "
        "0 AS indnkeyatts, false AS indisunique, false AS indnullsnotdistinct, "
        "false AS indisprimary, false AS indisexclusion, true AS indimmediate, "
        "false AS indisclustered, true AS indisvalid, false AS indcheckxmin, true AS indisready, "
        "true AS indislive, false AS indisreplident, CAST([] AS INTEGER[]) AS indkey, "
        "CAST([] AS BIGINT[]) AS indcollation, CAST([] AS BIGINT[]) AS indclass, "
        "CAST([] AS INTEGER[]) AS indoption, CAST(NULL AS VARCHAR) AS indexprs, "
        "CAST(NULL AS VARCHAR) AS indpred");
  empty("pg_constraint",
        "CAST(0 AS BIGINT) AS oid, '' AS conname, CAST(0 AS BIGINT) AS connamespace, "
        "'' AS contype, false AS condeferrable, false AS condeferred, true AS convalidated, "
        "CAST(0 AS BIGINT) AS conrelid, CAST(0 AS BIGINT) AS contypid, "
        "CAST(0 AS BIGINT) AS conindid, CAST(0 AS BIGINT) AS conparentid, "
        "CAST(0 AS BIGINT) AS confrelid, '' AS confupdtype, '' AS confdeltype, "
        "'' AS confmatchtype, true AS conislocal, 0 AS coninhcount, false AS connoinherit, "
        "CAST([] AS INTEGER[]) AS conkey, CAST([] AS INTEGER[]) AS confkey, "
        "CAST(NULL AS VARCHAR) AS conbin");
  empty("pg_inherits", "CAST(0 AS BIGINT) AS inhrelid, CAST(0 AS BIGINT) AS inhparent, "
                       "0 AS inhseqno, false AS inhdetachpending");
  empty("pg_attrdef", "CAST(0 AS BIGINT) AS oid, CAST(0 AS BIGINT) AS adrelid, "
                      "CAST(0 AS SMALLINT) AS adnum, CAST(NULL AS VARCHAR) AS adbin");
  empty("pg_description", "CAST(0 AS BIGINT) AS objoid, CAST(0 AS BIGINT) AS classoid, "
                          "0 AS objsubid, '' AS description");
  empty("pg_shdescription", "CAST(0 AS BIGINT) AS objoid, CAST(0 AS BIGINT) AS classoid, "
                            "'' AS description");
  empty("pg_trigger", "CAST(0 AS BIGINT) AS oid, CAST(0 AS BIGINT) AS tgrelid, "
                      "CAST(0 AS BIGINT) AS tgparentid, '' AS tgname, false AS tgisinternal, "
                      "'' AS tgenabled");
  empty("pg_policy", "CAST(0 AS BIGINT) AS oid, '' AS polname, CAST(0 AS BIGINT) AS polrelid, "
                     "'' AS polcmd, true AS polpermissive, CAST([] AS BIGINT[]) AS polroles, "
                     "CAST(NULL AS VARCHAR) AS polqual, CAST(NULL AS VARCHAR) AS polwithcheck");
  empty("pg_proc", "CAST(0 AS BIGINT) AS oid, '' AS proname, CAST(0 AS BIGINT) AS pronamespace, "
                   "CAST(0 AS BIGINT) AS prorettype, '' AS prokind");
  empty("pg_enum", "CAST(0 AS BIGINT) AS oid, CAST(0 AS BIGINT) AS enumtypid, "
                   "CAST(0 AS FLOAT) AS enumsortorder, '' AS enumlabel");
  empty("pg_range", "CAST(0 AS BIGINT) AS rngtypid, CAST(0 AS BIGINT) AS rngsubtype, "
                    "CAST(0 AS BIGINT) AS rngmultitypid");
  empty("pg_tablespace", "CAST(0 AS BIGINT) AS oid, '' AS spcname, CAST(0 AS BIGINT) AS spcowner");
  empty("pg_statistic_ext", "CAST(0 AS BIGINT) AS oid, CAST(0 AS BIGINT) AS stxrelid, "
                            "'' AS stxname, CAST(0 AS BIGINT) AS stxnamespace, "
                            "CAST([] AS INTEGER[]) AS stxkeys, CAST([] AS VARCHAR[]) AS stxkind, "
                            "-1 AS stxstattarget");
  empty("pg_publication", "CAST(0 AS BIGINT) AS oid, '' AS pubname, false AS puballtables");
  empty("pg_publication_rel", "CAST(0 AS BIGINT) AS oid, CAST(0 AS BIGINT) AS prpubid, "
                              "CAST(0 AS BIGINT) AS prrelid, CAST(NULL AS VARCHAR) AS prqual, "
                              "CAST(NULL AS INTEGER[]) AS prattrs");
  empty("pg_publication_namespace", "CAST(0 AS BIGINT) AS oid, CAST(0 AS BIGINT) AS pnpubid, "
                                    "CAST(0 AS BIGINT) AS pnnspid");
  empty("pg_publication_tables", "'' AS pubname, '' AS schemaname, '' AS tablename");
  empty("pg_rewrite", "CAST(0 AS BIGINT) AS oid, '' AS rulename, CAST(0 AS BIGINT) AS ev_class");
  empty("pg_partitioned_table", "CAST(0 AS BIGINT) AS partrelid, '' AS partstrat");
  empty("pg_foreign_table", "CAST(0 AS BIGINT) AS ftrelid, CAST(0 AS BIGINT) AS ftserver");
  empty("pg_extension", "CAST(0 AS BIGINT) AS oid, '' AS extname, '' AS extversion, "
                        "CAST(0 AS BIGINT) AS extnamespace");
  empty("pg_matviews", "'' AS schemaname, '' AS matviewname, '' AS definition");
  empty("pg_views", "'' AS schemaname, '' AS viewname, '' AS viewowner, '' AS definition");
  empty("pg_sequence", "CAST(0 AS BIGINT) AS seqrelid, CAST(0 AS BIGINT) AS seqtypid, "
                       "CAST(0 AS BIGINT) AS seqstart, CAST(0 AS BIGINT) AS seqincrement, "
                       "CAST(0 AS BIGINT) AS seqmax, CAST(0 AS BIGINT) AS seqmin, "
                       "CAST(0 AS BIGINT) AS seqcache, false AS seqcycle");
  empty("pg_depend", "CAST(0 AS BIGINT) AS classid, CAST(0 AS BIGINT) AS objid, "
                     "0 AS objsubid, CAST(0 AS BIGINT) AS refclassid, "
                     "CAST(0 AS BIGINT) AS refobjid, 0 AS refobjsubid, '' AS deptype");
  empty("pg_opclass", "CAST(0 AS BIGINT) AS oid, '' AS opcname");
  empty("pg_event_trigger", "CAST(0 AS BIGINT) AS oid, '' AS evtname");
  empty("pg_stat_activity", "0 AS pid, '' AS datname, '' AS usename, '' AS state, '' AS query");
  empty("pg_auth_members", "CAST(0 AS BIGINT) AS roleid, CAST(0 AS BIGINT) AS member");
  empty("pg_language", "CAST(0 AS BIGINT) AS oid, '' AS lanname");
  empty("pg_cast", "CAST(0 AS BIGINT) AS oid, CAST(0 AS BIGINT) AS castsource, "
                   "CAST(0 AS BIGINT) AS casttarget");
  empty("pg_operator", "CAST(0 AS BIGINT) AS oid, '' AS oprname");
}

// information_schema over the live tables.
void DefineInformationSchema(std::vector<std::string>* sql) {
  auto add = [sql](std::string s) { sql->push_back(std::move(s)); };
  // information_schema over the live tables.
  add("CREATE OR REPLACE VIEW rill_pg.information_schema_schemata AS SELECT * FROM (VALUES "
      "('rill', 'public', 'rill'), ('rill', 'pg_catalog', 'rill'), "
      "('rill', 'information_schema', 'rill')) AS t(catalog_name, schema_name, schema_owner)");
  add("CREATE OR REPLACE VIEW rill_pg.information_schema_tables AS SELECT "
      "'rill' AS table_catalog, 'public' AS table_schema, name AS table_name, "
      "'BASE TABLE' AS table_type, CAST(NULL AS VARCHAR) AS self_referencing_column_name, "
      "CAST(NULL AS VARCHAR) AS reference_generation, CAST(NULL AS VARCHAR) AS user_defined_type_catalog, "
      "CAST(NULL AS VARCHAR) AS user_defined_type_schema, CAST(NULL AS VARCHAR) AS user_defined_type_name, "
      "'NO' AS is_insertable_into, 'NO' AS is_typed, CAST(NULL AS VARCHAR) AS commit_action "
      "FROM rill_pg.live_tables");
  add("CREATE OR REPLACE VIEW rill_pg.information_schema_views AS SELECT 'rill' AS table_catalog, "
      "'public' AS table_schema, '' AS table_name, '' AS view_definition WHERE false");
  add(R"sql(CREATE OR REPLACE VIEW rill_pg.information_schema_columns AS SELECT
      'rill' AS table_catalog, 'public' AS table_schema, c.table_name, c.column_name,
      c.column_index AS ordinal_position, CAST(NULL AS VARCHAR) AS column_default,
      CASE WHEN c.is_nullable THEN 'YES' ELSE 'NO' END AS is_nullable,
      rill_pg.format_type(rill_pg.duck_type_oid(c.data_type), -1) AS data_type,
      CAST(NULL AS INTEGER) AS character_maximum_length,
      CAST(NULL AS INTEGER) AS character_octet_length,
      c.numeric_precision, c.numeric_precision_radix, c.numeric_scale,
      CAST(NULL AS INTEGER) AS datetime_precision,
      (SELECT typname FROM rill_pg.pg_type WHERE oid = rill_pg.duck_type_oid(c.data_type)) AS udt_name,
      'rill' AS udt_catalog, 'pg_catalog' AS udt_schema, 'NO' AS is_identity,
      'NEVER' AS is_generated, 'NO' AS is_updatable
      FROM duckdb_columns() c JOIN rill_pg.live_tables t ON t.name = c.table_name
      WHERE c.database_name = 'temp')sql");
}

}  // namespace

std::vector<std::string> CatalogDefinitionSql(CatalogTables tables) {
  std::vector<std::string> sql;
  DefineSchemaAndTypes(&sql);
  DefineFunctions(&sql);
  DefineRelations(tables, &sql);
  DefineEmptyCatalogs(&sql);
  DefineInformationSchema(&sql);
  if (tables == CatalogTables::kMainTables) {
    // Columns of the main schema's tables instead of the connection's temporary views.
    const std::string live = "c.database_name = 'temp'";
    for (auto& statement : sql) {
      for (size_t at = statement.find(live); at != std::string::npos;
           at = statement.find(live, at)) {
        statement.replace(at, live.size(),
                          "c.database_name = current_database() AND c.schema_name = 'main'");
      }
    }
  }
  return sql;
}

}  // namespace rill::pgwire
