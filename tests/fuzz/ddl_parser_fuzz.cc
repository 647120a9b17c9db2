// libFuzzer target: the SQL DDL parser (src/rill/pipeline/ddl.h).
//
// The input is a statement's text. The target aborts when:
//   - a refusal is not Invalid, has no message, or carries no SQLSTATE of
//     42601 (syntax) / 42704 (unknown type) / 42701 (a column given twice) /
//     42703 (a key column that is not a column);
//   - an accepted statement is inconsistent: a CREATE with an empty name, a
//     CREATE TABLE without columns or with a key column it does not have, a
//     view or KPI without its query text, an option with an empty name;
//   - IsDdl says no to a statement ParseDdl accepted.
// Quoting a parsed name and parsing `DROP TABLE <quoted>` must give the name
// back (QuoteName round trip).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "rill/pipeline/ddl.h"

namespace {

[[noreturn]] void Fail(const char* what, std::string_view sql) {
  std::fprintf(stderr, "ddl_parser_fuzz: %s\n  statement: %.*s\n", what,
               static_cast<int>(sql.size()), sql.data());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rill::pipeline;
  const std::string_view sql(reinterpret_cast<const char*>(data), size);
  auto st = ParseDdl(sql);
  if (!st.ok()) {
    const std::string state = SqlStateOf(st.status());
    if (!st.status().IsInvalid() || st.status().message().empty()) Fail("bad refusal", sql);
    // 42701 / 42703: a column given twice / a key column that is not a column.
    if (state != kSqlStateSyntax && state != kSqlStateUndefined && state != "42701" &&
        state != "42703") {
      Fail("no SQLSTATE", sql);
    }
    return 0;
  }
  if (!IsDdl(sql)) Fail("IsDdl disagrees with ParseDdl", sql);
  if (st->verb != DdlStatement::Verb::kShow && st->name.empty()) Fail("empty name", sql);
  if (st->verb == DdlStatement::Verb::kCreate) {
    if (st->object == DdlObject::kTable) {
      if (st->columns.empty()) Fail("a table without columns", sql);
      std::set<std::string> names;
      for (const auto& c : st->columns) {
        if (c.name.empty() || c.type.empty()) Fail("a column without name or type", sql);
        names.insert(c.name);
      }
      for (const auto& k : st->primary_key) {
        if (names.count(k) == 0) Fail("a key column the table lacks", sql);
      }
    }
    const bool has_query = st->object == DdlObject::kMaterializedView ||
                           st->object == DdlObject::kStreamView || st->object == DdlObject::kKpi;
    if (has_query && st->query.empty()) Fail("a view without its query", sql);
    for (const auto& [k, v] : st->with) {
      if (k.empty()) Fail("an option without a name", sql);
    }
  }
  if (!st->name.empty()) {
    auto back = ParseDdl("DROP TABLE " + QuoteName(st->name));
    if (!back.ok() || back->name != st->name) Fail("QuoteName round trip", sql);
  }
  return 0;
}
