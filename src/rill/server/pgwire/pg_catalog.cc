// The rewrite of client SQL for the catalog layer. One pass over the text:
// strings, quoted identifiers and comments are copied unchanged; words are
// looked at with their neighbours (a preceding '.' or "pg_catalog.", a
// following '(').
#include "rill/server/pgwire/pg_catalog.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "rill/server/pgwire/pg_sql.h"
#include "rill/server/pgwire/pg_types.h"

namespace rill::pgwire {
namespace {

bool IsWordStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool IsWordChar(char c) {
  return IsWordStart(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '$';
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), ::tolower);
  return out;
}

// Relations defined in rill_pg (replacing DuckDB's pg_catalog ones).
const std::set<std::string>& CatalogRelations() {
  static const std::set<std::string> kNames = {
      "pg_class",     "pg_namespace",  "pg_attribute",   "pg_type",       "pg_database",
      "pg_collation", "pg_am",         "pg_index",       "pg_constraint", "pg_inherits",
      "pg_attrdef",   "pg_description", "pg_trigger",    "pg_policy",     "pg_roles",
      "pg_user",      "pg_settings",   "pg_proc",        "pg_enum",       "pg_range",
      "pg_tablespace", "pg_statistic_ext", "pg_publication", "pg_publication_rel",
      "pg_publication_tables", "pg_rewrite", "pg_partitioned_table", "pg_foreign_table",
      "pg_extension", "pg_matviews",   "pg_views",       "pg_tables",     "pg_sequence",
      "pg_depend",    "pg_opclass",    "pg_event_trigger", "pg_authid",   "pg_stat_activity",
      "pg_shdescription", "pg_auth_members", "pg_language", "pg_cast", "pg_operator",
      "pg_publication_namespace"};
  return kNames;
}

// Functions defined in rill_pg (called as name(...)).
const std::set<std::string>& CatalogFunctions() {
  static const std::set<std::string> kNames = {
      "pg_get_userbyid", "pg_table_is_visible", "pg_type_is_visible", "format_type",
      "pg_encoding_to_char", "version", "quote_ident", "parse_ident", "obj_description",
      "col_description", "shobj_description", "has_table_privilege",
      "has_schema_privilege", "has_database_privilege", "has_column_privilege",
      "pg_get_indexdef", "pg_get_constraintdef", "pg_get_viewdef", "pg_get_expr",
      "pg_get_statisticsobjdef_columns", "current_schema", "current_schemas",
      "pg_function_is_visible", "pg_relation_size", "pg_total_relation_size",
      "pg_size_pretty", "pg_get_partkeydef", "pg_is_in_recovery", "txid_current",
      "pg_postmaster_start_time", "inet_server_addr", "inet_server_port",
      "pg_get_serial_sequence", "array_lower", "array_upper", "pg_tablespace_location",
      "to_regclass", "to_regtype", "pg_get_function_identity_arguments", "pg_get_function_result",
      "pg_get_triggerdef", "pg_get_ruledef", "pg_has_role", "pg_relation_is_publishable",
      "pg_table_size", "pg_indexes_size", "pg_get_function_arguments", "pg_get_keywords",
      "pg_get_userbyid", "pg_collation_is_visible", "pg_conversion_is_visible",
      "set_config"};
  return kNames;
}

// Casts to PostgreSQL-only types, as DuckDB types.
const char* CastReplacement(const std::string& type) {
  if (type == "regclass" || type == "regtype" || type == "regproc" ||
      type == "regnamespace" || type == "regrole" || type == "regprocedure" ||
      type == "regoper" || type == "regconfig") {
    return nullptr;  // handled separately
  }
  if (type == "oid" || type == "xid" || type == "cid" || type == "int2vector" ||
      type == "oidvector") {
    return "BIGINT";
  }
  if (type == "name" || type == "char" || type == "bpchar" || type == "text") {
    return "VARCHAR";
  }
  return "";
}

class Rewriter {
 public:
  Rewriter(std::string_view sql, const CatalogSessionInfo& session)
      : sql_(sql), session_(session) {}

  std::string Run() {
    size_t i = 0;
    while (i < sql_.size()) {
      char c = sql_[i];
      size_t skipped = SkipOpaque(i);
      if (skipped != i) {
        out_.append(sql_.substr(i, skipped - i));
        i = skipped;
        continue;
      }
      if (c == ':' && i + 1 < sql_.size() && sql_[i + 1] == ':') {
        i = Cast(i);
        continue;
      }
      if (IsWordStart(c) && (i == 0 || !IsWordChar(sql_[i - 1]))) {
        i = Word(i);
        continue;
      }
      out_.push_back(c);
      ++i;
    }
    return out_;
  }

 private:
  // Strings, quoted identifiers, comments: index after them, or i.
  size_t SkipOpaque(size_t i) const {
    char c = sql_[i];
    if (c == '\'' || c == '"' || (c == '-' && i + 1 < sql_.size() && sql_[i + 1] == '-') ||
        (c == '/' && i + 1 < sql_.size() && sql_[i + 1] == '*') || c == '$') {
      // Reuse the statement splitter's lexer through TrimStatement's rules:
      // find the end by scanning for the closing delimiter.
      if (c == '\'' || c == '"') {
        bool backslash = c == '\'' && i > 0 && (sql_[i - 1] == 'E' || sql_[i - 1] == 'e');
        size_t j = i + 1;
        while (j < sql_.size()) {
          if (backslash && sql_[j] == '\\') {
            j += 2;
            continue;
          }
          if (sql_[j] == c) {
            if (j + 1 < sql_.size() && sql_[j + 1] == c) {
              j += 2;
              continue;
            }
            return j + 1;
          }
          ++j;
        }
        return sql_.size();
      }
      if (c == '-') {
        size_t end = sql_.find('\n', i);
        return end == std::string_view::npos ? sql_.size() : end + 1;
      }
      if (c == '/') {
        size_t end = sql_.find("*/", i + 2);
        return end == std::string_view::npos ? sql_.size() : end + 2;
      }
    }
    return i;
  }

  size_t SkipSpace(size_t i) const {
    while (i < sql_.size() && std::isspace(static_cast<unsigned char>(sql_[i]))) ++i;
    return i;
  }

  size_t WordEnd(size_t i) const {
    while (i < sql_.size() && IsWordChar(sql_[i])) ++i;
    return i;
  }

  bool PrecededByDot() const {
    size_t k = out_.size();
    while (k > 0 && std::isspace(static_cast<unsigned char>(out_[k - 1]))) --k;
    return k > 0 && out_[k - 1] == '.';
  }

  // "::type" → a DuckDB cast, or a lookup for ::regclass.
  size_t Cast(size_t i) {
    size_t t = SkipSpace(i + 2);
    bool quoted = t < sql_.size() && sql_[t] == '"';
    size_t start = quoted ? t + 1 : t;
    size_t end = quoted ? sql_.find('"', start) : WordEnd(t);
    if (end == std::string_view::npos || end == start) {
      out_.append("::");
      return i + 2;
    }
    std::string type = Lower(sql_.substr(start, end - start));
    size_t after = quoted ? end + 1 : end;
    if (type == "pg_catalog" && after < sql_.size() && sql_[after] == '.') {
      size_t t2 = after + 1;
      bool q2 = t2 < sql_.size() && sql_[t2] == '"';
      size_t s2 = q2 ? t2 + 1 : t2;
      size_t e2 = q2 ? sql_.find('"', s2) : WordEnd(t2);
      if (e2 == std::string_view::npos) e2 = sql_.size();
      type = Lower(sql_.substr(s2, e2 - s2));
      after = q2 ? e2 + 1 : e2;
    }
    const char* replacement = CastReplacement(type);
    if (replacement == nullptr) {
      // 'name'::regclass → the OID named (schema prefix ignored); oid::regclass
      // → the name of the OID (as its text form is used).
      size_t operand = LastOperandStart();
      bool literal = operand < out_.size() && out_[operand] == '\'';
      std::string kind = type == "regtype" ? "regtype" : "regclass";
      out_.insert(operand, std::string(kCatalogSchema) + "." + kind +
                               (literal ? "_oid(" : "_name("));
      out_.append(")");
      return after;
    }
    out_.append("::");
    out_.append(*replacement != '\0' ? std::string(replacement) : type);
    return after;
  }

  // Where the operand of a trailing cast starts in out_: a string literal, a
  // word (possibly dotted) or a parenthesized expression.
  size_t LastOperandStart() const {
    size_t k = out_.size();
    while (k > 0 && std::isspace(static_cast<unsigned char>(out_[k - 1]))) --k;
    if (k == 0) return 0;
    char last = out_[k - 1];
    if (last == '\'') {
      size_t j = k - 1;
      while (j > 0) {
        --j;
        if (out_[j] == '\'' && (j == 0 || out_[j - 1] != '\'')) return j;
        if (out_[j] == '\'') --j;
      }
      return 0;
    }
    if (last == ')') {
      int depth = 0;
      for (size_t j = k; j > 0; --j) {
        if (out_[j - 1] == ')') ++depth;
        if (out_[j - 1] == '(' && --depth == 0) return j - 1;
      }
      return 0;
    }
    size_t j = k;
    while (j > 0 && (IsWordChar(out_[j - 1]) || out_[j - 1] == '.' || out_[j - 1] == '"')) --j;
    return j;
  }

  size_t Word(size_t i) {
    size_t end = WordEnd(i);
    std::string word = Lower(sql_.substr(i, end - i));
    size_t next = SkipSpace(end);
    const bool call = next < sql_.size() && sql_[next] == '(';
    const bool dotted = next < sql_.size() && sql_[next] == '.' && end == next;
    if (PrecededByDot()) {
      out_.append(sql_.substr(i, end - i));
      return end;
    }
    if (word == "operator" && call) {
      // OPERATOR(pg_catalog.~) → ~
      size_t close = sql_.find(')', next);
      if (close != std::string_view::npos) {
        std::string_view inner = sql_.substr(next + 1, close - next - 1);
        size_t dot = inner.rfind('.');
        out_.append(" ");
        out_.append(dot == std::string_view::npos ? inner : inner.substr(dot + 1));
        out_.append(" ");
        return close + 1;
      }
    }
    if (word == "generate_series" && call) {
      return GenerateSeries(i, end, next);
    }
    if (word == "string_to_array" && call && InFromList()) {
      return ScalarInFrom(i, end, next);
    }
    if (word == "user" && !call && (LastWord() == "then" || LastWord() == "else")) {
      out_.append(QuoteLiteral(session_.user));  // PostgreSQL's bare `user`
      return end;
    }
    if (word == "collate") {
      // COLLATE pg_catalog.default / "default" / "C": DuckDB has no such collations.
      size_t t = next;
      size_t e = t;
      while (e < sql_.size() && (IsWordChar(sql_[e]) || sql_[e] == '.' || sql_[e] == '"')) ++e;
      std::string target = Lower(sql_.substr(t, e - t));
      if (target.find("default") != std::string::npos || target == "\"c\"" ||
          target == "pg_catalog.\"c\"" || target == "\"posix\"") {
        return e;
      }
    }
    if ((word == "pg_catalog" || word == "public" || word == "information_schema") &&
        dotted) {
      return Qualified(word, end + 1);
    }
    return Unqualified(word, i, end, call);
  }

  // The previous word written (lower case), "" if the last token is not a word.
  std::string LastWord() const {
    size_t k = out_.size();
    while (k > 0 && std::isspace(static_cast<unsigned char>(out_[k - 1]))) --k;
    size_t e = k;
    while (k > 0 && IsWordChar(out_[k - 1])) --k;
    return Lower(std::string_view(out_).substr(k, e - k));
  }

  // True when the next item is a FROM item: after FROM or a ',' (PostgreSQL's
  // grammar is needed to be sure; callers only use it for scalar calls).
  bool InFromList() const {
    size_t k = out_.size();
    while (k > 0 && std::isspace(static_cast<unsigned char>(out_[k - 1]))) --k;
    return (k > 0 && out_[k - 1] == ',') || LastWord() == "from";
  }

  // A scalar function as a FROM item, `f(...) alias`: DuckDB wants a table,
  // so it becomes `(SELECT f(...) AS alias) alias`.
  size_t ScalarInFrom(size_t i, size_t end, size_t open) {
    size_t close = MatchingParen(open);
    if (close >= sql_.size()) {
      out_.append(sql_.substr(i, end - i));
      return end;
    }
    size_t a = SkipSpace(close + 1);
    size_t alias_end = WordEnd(a);
    std::string alias(sql_.substr(a, alias_end - a));
    if (alias.empty() || !IsWordStart(sql_[a])) {
      out_.append(sql_.substr(i, end - i));
      return end;
    }
    out_.append("(SELECT " + std::string(sql_.substr(i, end - i)));
    out_.append(Rewriter(sql_.substr(end, close + 1 - end), session_).Run());
    out_.append(" AS " + alias + ") " + alias);
    return alias_end;
  }

  // Index of the ')' closing the '(' at `open` (strings skipped), or size.
  size_t MatchingParen(size_t open) const {
    int depth = 0;
    for (size_t k = open; k < sql_.size(); ++k) {
      size_t skipped = SkipOpaque(k);
      if (skipped != k) {
        k = skipped - 1;
        continue;
      }
      if (sql_[k] == '(') ++depth;
      if (sql_[k] == ')' && --depth == 0) return k;
    }
    return sql_.size();
  }

  // generate_series(...) alias → generate_series(...) alias(alias), so that the
  // alias names the value as in PostgreSQL (DuckDB binds it to a row).
  size_t GenerateSeries(size_t i, size_t end, size_t open) {
    int depth = 0;
    size_t close = open;
    for (; close < sql_.size(); ++close) {
      size_t skipped = SkipOpaque(close);
      if (skipped != close) {
        close = skipped - 1;
        continue;
      }
      if (sql_[close] == '(') ++depth;
      if (sql_[close] == ')' && --depth == 0) break;
    }
    if (close >= sql_.size()) {
      out_.append(sql_.substr(i, end - i));
      return end;
    }
    out_.append(sql_.substr(i, end - i));
    out_.append(Rewriter(sql_.substr(end, close + 1 - end), session_).Run());
    size_t a = SkipSpace(close + 1);
    size_t alias_start = a;
    if (Lower(sql_.substr(a, 3)) == "as " ) {
      alias_start = SkipSpace(a + 2);
    }
    size_t alias_end = WordEnd(alias_start);
    std::string alias = Lower(sql_.substr(alias_start, alias_end - alias_start));
    size_t after = SkipSpace(alias_end);
    static const std::set<std::string> kNotAliases = {"where", "join", "on", "group", "order",
                                                      "limit", "left", "right", "inner",
                                                      "cross", "union", "as", "full", "natural",
                                                      "with", "having", "window", "offset"};
    if (alias.empty() || !IsWordStart(sql_[alias_start]) || kNotAliases.count(alias) > 0 ||
        (after < sql_.size() && sql_[after] == '(')) {
      return close + 1;
    }
    out_.append(sql_.substr(close + 1, alias_end - close - 1));
    out_.append("(" + alias + ")");
    return alias_end;
  }

  // schema.name: point catalog names at rill_pg, drop "public." and
  // "pg_catalog." before functions DuckDB knows unqualified.
  size_t Qualified(const std::string& schema, size_t name_start) {
    bool quoted = name_start < sql_.size() && sql_[name_start] == '"';
    size_t s = quoted ? name_start + 1 : name_start;
    size_t e = quoted ? sql_.find('"', s) : WordEnd(s);
    if (e == std::string_view::npos) e = sql_.size();
    std::string name = quoted ? std::string(sql_.substr(s, e - s)) : Lower(sql_.substr(s, e - s));
    size_t after = quoted ? e + 1 : e;
    size_t next = SkipSpace(after);
    bool call = next < sql_.size() && sql_[next] == '(';
    std::string original(sql_.substr(name_start, after - name_start));
    if (schema == "public") {
      out_.append(original);
      return after;
    }
    if (schema == "information_schema") {
      if (name == "tables" || name == "columns" || name == "schemata" || name == "views") {
        out_.append(std::string(kCatalogSchema) + ".information_schema_" + name);
      } else {
        out_.append("information_schema." + original);
      }
      return after;
    }
    if (call && !quoted) {
      return Word(s);  // pg_catalog.f(...) is f(...), ours or DuckDB's
    }
    if (CatalogRelations().count(name) > 0) {
      out_.append(std::string(kCatalogSchema) + "." + name);
    } else {
      out_.append("pg_catalog." + original);
    }
    return after;
  }

  size_t Unqualified(const std::string& word, size_t i, size_t end, bool call) {
    if (call && CatalogFunctions().count(word) > 0) {
      out_.append(std::string(kCatalogSchema) + "." + word);
      return end;
    }
    if (call && word == "json_build_object") {
      out_.append("json_object");
      return end;
    }
    if (call && word == "current_database") {
      return InlineCall(end, QuoteLiteral(session_.database));
    }
    if (call && word == "pg_backend_pid") {
      return InlineCall(end, std::to_string(session_.pid));
    }
    if (call && word == "current_setting") {
      return CurrentSetting(end);
    }
    if (!call && (word == "current_user" || word == "session_user")) {
      out_.append(QuoteLiteral(session_.user));
      return end;
    }
    if (!call && CatalogRelations().count(word) > 0) {
      out_.append(std::string(kCatalogSchema) + "." + word);
      return end;
    }
    out_.append(sql_.substr(i, end - i));
    return end;
  }

  // name() with no arguments → literal.
  size_t InlineCall(size_t end, const std::string& literal) {
    size_t open = SkipSpace(end);
    size_t close = SkipSpace(open + 1);
    if (close < sql_.size() && sql_[close] == ')') {
      out_.append(literal);
      return close + 1;
    }
    return end;
  }

  // current_setting('name' [, missing_ok]) → the session's value.
  size_t CurrentSetting(size_t end) {
    size_t open = SkipSpace(end);
    size_t q = SkipSpace(open + 1);
    if (q < sql_.size() && sql_[q] == '\'' && session_.settings != nullptr) {
      size_t close_quote = sql_.find('\'', q + 1);
      size_t close = close_quote == std::string_view::npos
                         ? std::string_view::npos
                         : sql_.find(')', close_quote);
      if (close != std::string_view::npos) {
        std::string name = Lower(sql_.substr(q + 1, close_quote - q - 1));
        auto it = session_.settings->find(name);
        out_.append(it == session_.settings->end() ? std::string("NULL::VARCHAR")
                                                   : QuoteLiteral(it->second));
        return close + 1;
      }
    }
    out_.append("current_setting");
    return end;
  }

  std::string_view sql_;
  const CatalogSessionInfo& session_;
  std::string out_;
};

}  // namespace

std::string RewriteCatalogSql(std::string_view sql, const CatalogSessionInfo& session) {
  return Rewriter(sql, session).Run();
}

std::optional<std::string> DriverIntrospectionSql(std::string_view sql) {
  if (sql.find("typeinfo_tree") == std::string_view::npos ||
      sql.find("$1::oid[]") == std::string_view::npos) {
    return std::nullopt;
  }
  // The columns of asyncpg's INTRO_LOOKUP_TYPES. Rill has no domains,
  // composites, ranges or enums: only arrays have an element type. The
  // element rows are left out (asyncpg knows every scalar type here), and
  // attrtypoids / attrnames are NULL text (asyncpg only tests them).
  return std::string(R"sql(SELECT t.oid AS oid, 'pg_catalog' AS ns, t.typname AS name,
  t.typtype AS kind, CAST(NULL AS BIGINT) AS basetype,
  CASE WHEN t.typelem = 0 THEN NULL ELSE t.typelem END AS elemtype,
  e.typdelim AS elemdelim, CAST(NULL AS BIGINT) AS range_subtype,
  CAST(NULL AS VARCHAR) AS attrtypoids, CAST(NULL AS VARCHAR) AS attrnames, 0 AS depth,
  CAST(NULL AS VARCHAR) AS basetype_name, e.typname AS elemtype_name,
  CAST(NULL AS VARCHAR) AS range_subtype_name
FROM pg_type AS t LEFT JOIN pg_type AS e ON t.typelem <> 0 AND e.oid = t.typelem
WHERE list_contains($1, t.oid)
ORDER BY t.oid)sql");
}

}  // namespace rill::pgwire
