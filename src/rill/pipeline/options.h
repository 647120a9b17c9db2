// Declared options: the one table of options per kind that the pipeline
// file (YAML) and the SQL DDL (`WITH (...)`) both read.
//
// A declaration's options arrive as an ordered list of (name, OptionValue):
// from a YAML mapping (apps/rill/pipeline.cc converts the nodes) or from a
// DDL statement's WITH list. A kind's OptionTable names every option it takes
// with its type and a one-line description, and a setter that stores the
// converted value into the kind's spec. ReadOptions checks the names (an
// unknown option is an error listing the ones the kind takes), the required
// ones, converts each value to the option's type and calls its setter, so
// YAML and SQL accept exactly the same options with the same checks and
// messages, and the docs list is generated from the same table.
//
// Errors carry a PostgreSQL SQLSTATE (DeclError / SqlStateOf) so the DDL can
// answer psql with the right code: 42601 for an unknown or missing option,
// 22023 for a value of the wrong type, 42704 for a dependency that does not
// exist, 42710 for a name that exists, 0A000 for a feature the object
// cannot have.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rill/common/status.h"

namespace rill::pipeline {

/// SQLSTATEs of declaration errors.
inline constexpr char kSqlStateSyntax[] = "42601";     ///< unknown or missing option, bad syntax
inline constexpr char kSqlStateBadValue[] = "22023";   ///< a value of the wrong type or range
inline constexpr char kSqlStateUndefined[] = "42704";  ///< depends on an object that is missing
inline constexpr char kSqlStateDuplicate[] = "42710";  ///< the name is taken
inline constexpr char kSqlStateDependent[] = "2BP01";  ///< DROP of an object others depend on
inline constexpr char kSqlStatePrivilege[] = "42501";  ///< DDL without the admin credential
/// A declared feature the object cannot have (incremental = true on a query
/// that cannot be maintained incrementally).
inline constexpr char kSqlStateNotSupported[] = "0A000";

/// An Invalid status whose detail carries `sqlstate`.
Status DeclError(const char* sqlstate, std::string message);
/// The SQLSTATE of a DeclError (also through WithMessage copies); "" for any
/// other status.
std::string SqlStateOf(const Status& status);
/// `status` with `prefix` in front of its message, keeping its SQLSTATE.
Status PrefixError(const Status& status, const std::string& prefix);

/// A value as declared: a scalar (its text), a list or a mapping.
struct OptionValue {
  enum class Kind { kScalar, kList, kMap };
  Kind kind = Kind::kScalar;
  std::string text;                ///< kScalar
  /// kList: the items; kMap: the entries, in order, each with its `key`.
  std::vector<OptionValue> items;
  std::string key;                 ///< an entry of a kMap: its name
  /// Where it was declared, put in front of messages: "orders.yaml:12:
  /// connectors[0].topics" or "option 'topics'".
  std::string where;

  static OptionValue Scalar(std::string text, std::string where = "");
  /// A list of scalars (a `names` option made in code, e.g. key columns).
  static OptionValue List(const std::vector<std::string>& items);
};

/// A declaration's options in the order given.
using Options = std::vector<std::pair<std::string, OptionValue>>;

/// The types options convert to.
enum class OptionType {
  kString,
  kInt,
  kNumber,
  kBool,
  kNames,      ///< a list of names, or one string "a, b"
  kStringMap,  ///< a mapping of strings (YAML), or dotted names in SQL (see OptionTable)
  /// Any value (a scalar, a list or a mapping): the setter reads Converted::raw
  /// and places its own errors (at raw->where or at one of its items' places),
  /// for options written in several forms (a window's `aggregations`).
  kAny,
};

/// "string", "integer", "number", "boolean", "names", "mapping", "any".
const char* OptionTypeName(OptionType type);

/// An option's value converted to its type (the field of the type is set).
struct Converted {
  std::string s;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::vector<std::string> names;
  std::map<std::string, std::string> map;
  /// The value as given, set by Convert for every type (kAny setters read it).
  /// Borrowed: it points into the Options being read and is valid only while
  /// the setter runs. Null for the gathered dotted names.
  const OptionValue* raw = nullptr;
};

template <typename Spec>
struct OptionDef {
  std::string name;
  OptionType type;
  std::string description;
  /// Store the value into the spec; an error is wrapped with the value's place.
  std::function<Status(const Converted&, Spec*)> set;
  bool required = false;
  /// Another accepted name (older pipeline files), e.g. max_records.
  std::string alias = {};
};

template <typename Spec>
struct OptionTable {
  std::string kind;  ///< e.g. "kafka source", for messages
  std::vector<OptionDef<Spec>> defs;
  /// An option of type kStringMap that also gathers every given name with a
  /// dot in it (librdkafka properties such as "bootstrap.servers" written
  /// among the options, as the DDL does); empty: none.
  std::string dotted_map = {};
};

/// Convert `value` to `type`; Invalid (22023) naming the value's place. The
/// result's `raw` points to `value` (which must outlive its use).
Result<Converted> Convert(const OptionValue& value, OptionType type);

/// `s` without leading and trailing blanks.
std::string Trim(std::string_view s);

/// Parse a boolean as written in YAML or SQL: true/false, yes/no, on/off, 1/0.
Result<bool> ParseBoolText(std::string_view text);

/// Apply `options` to `spec` by `table`: each name must be one of the
/// table's (or its alias, or a dotted name gathered by dotted_map), given
/// once; each value converts to the option's type; every required option is
/// given. `where` is put in front of messages about the whole declaration
/// (a missing option). A setter's error is put at the value's place with
/// SQLSTATE 22023 unless it has a SQLSTATE already; a kAny setter's error is
/// kept as it is (the setter placed it), given 22023 if it has none. Stops at
/// the first error.
template <typename Spec>
Status ReadOptions(const OptionTable<Spec>& table, const Options& options, const std::string& where,
                   Spec* spec);

/// The table's options as "name (type): description" lines, for docs and
/// for the message of an unknown option.
template <typename Spec>
std::string OptionNames(const OptionTable<Spec>& table);

// Implementation ---------------------------------------------------------------

namespace options_internal {
/// Prefix `status` with `where` (when not empty), keeping its SQLSTATE.
Status At(const std::string& where, const Status& status);
}  // namespace options_internal

template <typename Spec>
std::string OptionNames(const OptionTable<Spec>& table) {
  std::string out;
  for (const auto& d : table.defs) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out;
}

template <typename Spec>
Status ReadOptions(const OptionTable<Spec>& table, const Options& options, const std::string& where,
                   Spec* spec) {
  std::map<std::string, const OptionDef<Spec>*> by_name;
  for (const auto& d : table.defs) {
    by_name[d.name] = &d;
    if (!d.alias.empty()) by_name[d.alias] = &d;
  }
  std::map<const OptionDef<Spec>*, std::string> given;  // def -> the name used
  Converted dotted;
  bool any_dotted = false;
  for (const auto& [name, value] : options) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      if (!table.dotted_map.empty() && name.find('.') != std::string::npos) {
        auto text = Convert(value, OptionType::kString);
        if (!text.ok()) return text.status();
        if (!dotted.map.emplace(name, text->s).second) {
          return options_internal::At(
              value.where, DeclError(kSqlStateSyntax, "option '" + name + "' is given twice"));
        }
        any_dotted = true;
        continue;
      }
      return options_internal::At(
          value.where.empty() ? where : value.where,
          DeclError(kSqlStateSyntax, "unknown option '" + name + "' of a " + table.kind +
                                         " (expected one of: " + OptionNames(table) + ")"));
    }
    const OptionDef<Spec>* def = it->second;
    auto [at, fresh] = given.emplace(def, name);
    if (!fresh) {
      return options_internal::At(
          value.where.empty() ? where : value.where,
          DeclError(kSqlStateSyntax, "option '" + def->name + "' is given twice" +
                                         (at->second != name ? " (as '" + at->second + "')" : "")));
    }
    auto converted = Convert(value, def->type);
    if (!converted.ok()) return converted.status();
    if (def->type == OptionType::kStringMap && def->name == table.dotted_map) {
      for (auto& [k, v] : converted->map) dotted.map[k] = v;
      any_dotted = true;
      continue;  // set once, below, with the dotted names
    }
    Status st = def->set(*converted, spec);
    if (!st.ok()) {
      Status coded =
          SqlStateOf(st).empty() ? DeclError(kSqlStateBadValue, st.message()) : st;
      if (def->type == OptionType::kAny) return coded;  // placed by the setter
      return options_internal::At(value.where, coded);
    }
  }
  for (const auto& d : table.defs) {
    if (d.required && given.count(&d) == 0) {
      return options_internal::At(
          where, DeclError(kSqlStateSyntax,
                           "missing required option '" + d.name + "' of a " + table.kind));
    }
  }
  if (any_dotted) {
    for (const auto& d : table.defs) {
      if (d.name != table.dotted_map) continue;
      Status st = d.set(dotted, spec);
      if (!st.ok()) return options_internal::At(where, st);
    }
  }
  return Status::OK();
}

}  // namespace rill::pipeline
