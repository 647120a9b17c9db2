#include "rill/pipeline/windows.h"

#include "rill/pipeline/option_docs.h"

#include <cctype>
#include <string_view>
#include <utility>
#include <vector>

namespace rill::pipeline {

namespace {

using Def = OptionDef<WindowDecl>;
using Table = OptionTable<WindowDecl>;


Status NotEmpty(const char* what, const std::string& v) {
  if (v.empty()) return Status::Invalid(what, " must not be empty");
  return Status::OK();
}

/// A 22023 error at `value`'s place (or `fallback`'s when it has none).
Status BadAt(const OptionValue& value, const OptionValue& fallback,
             const std::string& message) {
  return options_internal::At(value.where.empty() ? fallback.where : value.where,
                              DeclError(kSqlStateBadValue, message));
}

std::string Quoted(const std::string& column) {
  std::string out = "\"";
  for (char c : column) {
    out.push_back(c);
    if (c == '"') out.push_back('"');
  }
  return out + "\"";
}

/// `name` without its double quotes ("" is a quote) when it is quoted.
std::string Unquoted(const std::string& name) {
  if (name.size() < 2 || name.front() != '"' || name.back() != '"') return name;
  std::string out;
  for (size_t i = 1; i + 1 < name.size(); ++i) {
    out.push_back(name[i]);
    if (name[i] == '"' && name[i + 1] == '"') ++i;
  }
  return out;
}

/// The places in `text` where `stop` occurs outside quotes ('...' or "...")
/// and parentheses; Invalid for unbalanced ones. A doubled quote inside quotes
/// leaves and re-enters them, which keeps the scan right.
Result<std::vector<size_t>> TopLevel(std::string_view text, char stop) {
  std::vector<size_t> out;
  int depth = 0;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      if (--depth < 0) return Status::Invalid("unbalanced ')' in '", std::string(text), "'");
    } else if (c == stop && depth == 0) {
      out.push_back(i);
    }
  }
  if (quote != 0) return Status::Invalid("unclosed quote in '", std::string(text), "'");
  if (depth != 0) return Status::Invalid("unbalanced '(' in '", std::string(text), "'");
  return out;
}

/// "n=count(*), revenue=sum(price)" as (output, expression) pairs: items at
/// the commas outside parentheses and quotes, each split at its first `=`
/// outside them (a "quoted" output name keeps its case and characters).
Result<std::vector<std::pair<std::string, std::string>>> SplitAggregations(
    std::string_view text) {
  RILL_ASSIGN_OR_RAISE(std::vector<size_t> commas, TopLevel(text, ','));
  commas.push_back(text.size());
  std::vector<std::pair<std::string, std::string>> out;
  size_t begin = 0;
  for (size_t end : commas) {
    const std::string item = Trim(text.substr(begin, end - begin));
    begin = end + 1;
    if (item.empty()) {
      return Status::Invalid("an empty aggregation in '", std::string(text),
                             "' (expected output=expression, ...)");
    }
    RILL_ASSIGN_OR_RAISE(std::vector<size_t> eq, TopLevel(item, '='));
    if (eq.empty()) {
      return Status::Invalid("aggregation '", item, "' is not written output=expression");
    }
    out.emplace_back(Unquoted(Trim(std::string_view(item).substr(0, eq[0]))),
                     Trim(std::string_view(item).substr(eq[0] + 1)));
  }
  return out;
}

/// The `aggregations` option in its three forms (see windows.h).
Status ReadAggregations(const OptionValue& value, WindowSpec* spec) {
  spec->aggregations.clear();
  auto add = [&](const OptionValue& at, std::string output, std::string expression) {
    auto parsed = ParseWindowAggregation(std::move(output), std::move(expression));
    if (!parsed.ok()) return BadAt(at, value, parsed.status().message());
    spec->aggregations.push_back(std::move(*parsed));
    return Status::OK();
  };
  switch (value.kind) {
    case OptionValue::Kind::kScalar: {
      auto pairs = SplitAggregations(value.text);
      if (!pairs.ok()) return BadAt(value, value, pairs.status().message());
      for (auto& [output, expression] : *pairs) {
        RILL_RETURN_NOT_OK(add(value, std::move(output), std::move(expression)));
      }
      break;
    }
    case OptionValue::Kind::kMap:
      for (const OptionValue& entry : value.items) {
        if (entry.kind != OptionValue::Kind::kScalar) {
          return BadAt(entry, value,
                       "expected an expression (a string) for '" + entry.key + "'");
        }
        RILL_RETURN_NOT_OK(add(entry, entry.key, entry.text));
      }
      break;
    case OptionValue::Kind::kList:
      // [{column, function}] as rills.WindowTask's (column, function) pairs.
      for (const OptionValue& item : value.items) {
        if (item.kind != OptionValue::Kind::kMap) {
          return BadAt(item, value, "expected a mapping {column, function}");
        }
        std::string column;
        std::string function;
        for (const OptionValue& field : item.items) {
          std::string* target = field.key == "column"     ? &column
                                : field.key == "function" ? &function
                                                          : nullptr;
          if (target == nullptr) {
            return options_internal::At(
                field.where.empty() ? item.where : field.where,
                DeclError(kSqlStateSyntax, "unknown key '" + field.key +
                                               "' (expected one of: column, function)"));
          }
          if (field.kind != OptionValue::Kind::kScalar) {
            return BadAt(field, item, "expected a string");
          }
          *target = Trim(field.text);
        }
        using Field = std::pair<const char*, const std::string*>;
        for (const auto& [key, text] :
             {Field{"column", &column}, Field{"function", &function}}) {
          if (text->empty()) {
            return options_internal::At(
                item.where.empty() ? value.where : item.where,
                DeclError(kSqlStateSyntax, std::string("missing required key '") + key + "'"));
          }
        }
        if (column == "*") {
          RILL_RETURN_NOT_OK(add(item, function, function + "(*)"));
        } else {
          RILL_RETURN_NOT_OK(
              add(item, column + "_" + function, function + "(" + Quoted(column) + ")"));
        }
      }
      break;
  }
  if (spec->aggregations.empty()) {
    return BadAt(value, value, "a window needs at least one aggregation");
  }
  return Status::OK();
}

/// The keys of `retention: {...}`.
const OptionTable<RetentionPolicy>& RetentionTable() {
  static const auto* table = new OptionTable<RetentionPolicy>{
      "window's retention",
      {{"max_rows", OptionType::kInt, "rows kept (the oldest go first)",
        [](const Converted& v, RetentionPolicy* r) {
          r->max_rows = v.i;
          return Status::OK();
        }},
       {"max_age_seconds", OptionType::kNumber, "rows older than this go",
        [](const Converted& v, RetentionPolicy* r) {
          r->max_age_seconds = v.d;
          return Status::OK();
        }},
       {"time_column", OptionType::kString, "the column ages are measured by (z_insert_ts)",
        [](const Converted& v, RetentionPolicy* r) {
          r->time_column = v.s;
          return Status::OK();
        }}}};
  return *table;
}

Status ReadRetention(const OptionValue& value, WindowDecl* d) {
  if (value.kind != OptionValue::Kind::kMap) {
    return BadAt(value, value, "expected a mapping {max_rows, max_age_seconds, time_column}");
  }
  Options keys;
  for (const OptionValue& entry : value.items) keys.emplace_back(entry.key, entry);
  RetentionPolicy policy;
  RILL_RETURN_NOT_OK(ReadOptions(RetentionTable(), keys, value.where, &policy));
  if (Status st = policy.Validate(); !st.ok()) return BadAt(value, value, st.message());
  d->options.retention = policy;
  return Status::OK();
}

/// A setter storing a number into the field `field` of the declaration.
Def Number(const char* name, std::string description, double* (*field)(WindowDecl*)) {
  return {name, OptionType::kNumber, std::move(description),
          [field](const Converted& v, WindowDecl* d) {
            *field(d) = v.d;
            return Status::OK();
          }};
}

Table MakeTable() {
  Table t{"window", {}};
  auto& defs = t.defs;
  defs.push_back({"name", OptionType::kString, "the task's name (SQL: the statement's name)",
                  [](const Converted& v, WindowDecl* d) {
                    RILL_RETURN_NOT_OK(NotEmpty("name", v.s));
                    if (!d->options.name.empty() && d->options.name != v.s) {
                      return DeclError(kSqlStateSyntax, "'" + v.s + "' differs from the " +
                                                            "window's name '" + d->options.name +
                                                            "'");
                    }
                    d->options.name = v.s;
                    return Status::OK();
                  }});
  defs.push_back({"source", OptionType::kString, "the input table",
                  [](const Converted& v, WindowDecl* d) {
                    RILL_RETURN_NOT_OK(NotEmpty("source", v.s));
                    d->options.source_table = v.s;
                    return Status::OK();
                  },
                  true, "source_table"});
  defs.push_back({"output", OptionType::kString, "the output table (default: the name)",
                  [](const Converted& v, WindowDecl* d) {
                    RILL_RETURN_NOT_OK(NotEmpty("output", v.s));
                    d->options.output_table = v.s;
                    return Status::OK();
                  },
                  false, "output_table"});
  defs.push_back({"time_column", OptionType::kString,
                  "the event-time column (seconds, timestamp or date; omit: processing time)",
                  [](const Converted& v, WindowDecl* d) {
                    d->options.spec.time_column = v.s;
                    return Status::OK();
                  }});
  defs.push_back({"window", OptionType::kString,
                  "tumbling (default) | hopping (or sliding) | session",
                  [](const Converted& v, WindowDecl* d) {
                    RILL_ASSIGN_OR_RAISE(d->options.spec.kind, ParseWindowKind(v.s));
                    return Status::OK();
                  }});
  defs.push_back(Number("size_seconds", "tumbling and hopping: the window's length (default 60)",
                        [](WindowDecl* d) { return &d->options.spec.size_seconds; }));
  defs.push_back(Number("slide_seconds", "hopping: the step between windows (default: size)",
                        [](WindowDecl* d) { return &d->options.spec.slide_seconds; }));
  defs.push_back(Number("gap_seconds", "session: the silence that ends a session",
                        [](WindowDecl* d) { return &d->options.spec.gap_seconds; }));
  defs.push_back({"group_by", OptionType::kNames, "key columns ('a' or 'a, b' or a list)",
                  [](const Converted& v, WindowDecl* d) {
                    d->options.spec.group_by = v.names;
                    return Status::OK();
                  }});
  defs.push_back({"aggregations", OptionType::kAny,
                  "'n=count(*), revenue=sum(price)', a mapping {output: expression} or a list "
                  "of {column, function} (default count=count(*))",
                  [](const Converted& v, WindowDecl* d) {
                    return ReadAggregations(*v.raw, &d->options.spec);
                  }});
  defs.push_back(Number("allowed_lateness_seconds",
                        "the watermark trails the latest event time by this (default 0)",
                        [](WindowDecl* d) {
                          return &d->options.spec.allowed_lateness_seconds;
                        }));
  defs.push_back(Number("idle_timeout_seconds",
                        "> 0: with no rows for this long the watermark follows the clock",
                        [](WindowDecl* d) { return &d->options.spec.idle_timeout_seconds; }));
  defs.push_back({"emit", OptionType::kString,
                  "on_close (default: once per window, append) | on_update (every run, "
                  "snapshot with is_final)",
                  [](const Converted& v, WindowDecl* d) {
                    RILL_ASSIGN_OR_RAISE(d->options.spec.emit, ParseEmitMode(v.s));
                    return Status::OK();
                  }});
  defs.push_back({"retention", OptionType::kAny,
                  "output retention {max_rows, max_age_seconds, time_column} "
                  "(default max_rows 1000000)",
                  [](const Converted& v, WindowDecl* d) {
                    return ReadRetention(*v.raw, d);
                  }});
  defs.push_back({"max_rows", OptionType::kInt, "retention's max_rows, flat (as SQL writes it)",
                  [](const Converted& v, WindowDecl* d) {
                    if (!d->options.retention) d->options.retention.emplace();
                    d->options.retention->max_rows = v.i;
                    return Status::OK();
                  }});
  defs.push_back({"max_age_seconds", OptionType::kNumber, "retention's max_age_seconds, flat",
                  [](const Converted& v, WindowDecl* d) {
                    if (!d->options.retention) d->options.retention.emplace();
                    d->options.retention->max_age_seconds = v.d;
                    return Status::OK();
                  }});
  defs.push_back({"late_table", OptionType::kString,
                  "the side table of late rows (default <output>_late)",
                  [](const Converted& v, WindowDecl* d) {
                    RILL_RETURN_NOT_OK(NotEmpty("late_table", v.s));
                    d->options.late_table = v.s;
                    return Status::OK();
                  }});
  defs.push_back({"late_max_rows", OptionType::kInt,
                  "late rows kept (all are counted; default 100000)",
                  [](const Converted& v, WindowDecl* d) {
                    d->options.late_max_rows = v.i;
                    return Status::OK();
                  }});
  defs.push_back(Number("interval_seconds", "run period (default 0: every tick)",
                        [](WindowDecl* d) { return &d->options.interval_seconds; }));
  return t;
}

bool Given(const Options& options, std::string_view name) {
  for (const auto& [n, v] : options) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace

const OptionTable<WindowDecl>& WindowOptionTable() {
  static const auto* table = new Table(MakeTable());
  return *table;
}

Result<WindowDecl> ReadWindow(const Options& options, const std::string& where,
                              std::string name) {
  WindowDecl decl;
  decl.options.name = std::move(name);
  decl.options.spec.aggregations.push_back(
      ParseWindowAggregation("count", "count(*)").ValueOrDie());
  RILL_RETURN_NOT_OK(ReadOptions(WindowOptionTable(), options, where, &decl));
  if (decl.options.name.empty()) {
    return options_internal::At(
        where, DeclError(kSqlStateSyntax, "missing required option 'name' of a window"));
  }
  if (Given(options, "retention") && (Given(options, "max_rows") ||
                                      Given(options, "max_age_seconds"))) {
    return options_internal::At(
        where, DeclError(kSqlStateSyntax,
                         "give either 'retention' or 'max_rows' / 'max_age_seconds', not both"));
  }
  if (decl.options.output_table.empty()) decl.options.output_table = decl.options.name;
  // WindowTask::Make's checks (sizes, names, lateness, retention), now, so the
  // declaration is refused before anything is created.
  if (auto made = WindowTask::Make(decl.options); !made.ok()) {
    return options_internal::At(where, DeclError(kSqlStateBadValue, made.status().message()));
  }
  decl.given = options;
  return decl;
}

std::string WindowOptionsMarkdown() {
  return OptionTableMarkdown(WindowOptionTable(), "#### `windows:` and `CREATE WINDOW`");
}

Result<std::shared_ptr<WindowTask>> MakeWindow(const WindowDecl& decl) {
  return WindowTask::Make(decl.options);
}

}  // namespace rill::pipeline
