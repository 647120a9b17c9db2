// Catalog: the statements and pipeline files it dumps, and the options docs.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "rill/common/json_text.h"
#include "rill/pipeline/catalog_internal.h"
#include "rill/pipeline/option_docs.h"

namespace rill::pipeline {

namespace catalog_internal {

std::string FormatNumber(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

Options Without(const Options& given, const std::vector<std::string>& drop) {
  Options out;
  for (const auto& option : given) {
    if (std::find(drop.begin(), drop.end(), option.first) == drop.end()) {
      out.push_back(option);
    }
  }
  return out;
}

namespace {

std::string Join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const std::string& p : parts) {
    if (!out.empty()) out += separator;
    out += p;
  }
  return out;
}

/// A value as one text: a list as "a, b"; a mapping as "k=v,k2=v2" (the
/// form of a window's aggregations); a list of {column, function} as the
/// aggregations they name.
std::string FlatText(const OptionValue& v) {
  switch (v.kind) {
    case OptionValue::Kind::kScalar: return v.text;
    case OptionValue::Kind::kList: {
      std::vector<std::string> parts;
      for (const OptionValue& item : v.items) {
        if (item.kind != OptionValue::Kind::kMap) {
          parts.push_back(FlatText(item));
          continue;
        }
        std::string column, function;
        for (const OptionValue& e : item.items) {
          if (e.key == "column") column = e.text;
          if (e.key == "function") function = e.text;
        }
        parts.push_back(column == "*" ? function + "=" + function + "(*)"
                                      : column + "_" + function + "=" + function + "(" +
                                            column + ")");
      }
      bool aggregations = !v.items.empty() && v.items.front().kind == OptionValue::Kind::kMap;
      return Join(parts, aggregations ? "," : ", ");
    }
    case OptionValue::Kind::kMap: {
      std::vector<std::string> parts;
      for (const OptionValue& e : v.items) parts.push_back(e.key + "=" + FlatText(e));
      return Join(parts, ",");
    }
  }
  return v.text;
}

/// The options as SQL writes them: a mapping of librdkafka properties or of
/// a retention policy becomes one option per entry; a webhook {url, format}
/// becomes webhook and webhook_format.
std::vector<std::pair<std::string, std::string>> SqlOptions(const Options& given) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, value] : given) {
    if (value.kind == OptionValue::Kind::kMap &&
        (name == "kafka_config" || name == "retention")) {
      for (const OptionValue& e : value.items) out.emplace_back(e.key, FlatText(e));
      continue;
    }
    if (value.kind == OptionValue::Kind::kMap && name == "webhook") {
      for (const OptionValue& e : value.items) {
        out.emplace_back(e.key == "url" ? "webhook" : "webhook_" + e.key, FlatText(e));
      }
      continue;
    }
    out.emplace_back(name, FlatText(value));
  }
  return out;
}

std::string WithClause(const Options& given) {
  std::vector<std::string> parts;
  for (const auto& [name, text] : SqlOptions(given)) {
    parts.push_back(QuoteName(name) + " = " + QuoteLiteral(text));
  }
  if (parts.empty()) return "";
  return " WITH (" + Join(parts, ", ") + ")";
}

/// A YAML scalar: always double-quoted (JSON's escapes are YAML's).
std::string Y(std::string_view text) { return JsonString(text); }

void YamlOptions(const Options& given, const std::string& indent, std::string* out) {
  for (const auto& [name, text] : SqlOptions(given)) {
    *out += indent + Y(name) + ": " + Y(text) + "\n";
  }
}

}  // namespace

std::string OptionsText(const Options& given) {
  std::vector<std::string> parts;
  for (const auto& [name, text] : SqlOptions(given)) {
    parts.push_back(name + " = " + QuoteLiteral(text));
  }
  return Join(parts, ", ");
}

std::string CreateSql(const DdlStatement& s) {
  std::string out = std::string("CREATE ") + DdlObjectName(s.object) + " " + QuoteName(s.name);
  switch (s.object) {
    case DdlObject::kTable: {
      std::vector<std::string> columns;
      for (const DdlColumn& c : s.columns) {
        columns.push_back(QuoteName(c.name) + " " + c.sql_type + (c.not_null ? " NOT NULL" : ""));
      }
      if (!s.primary_key.empty()) {
        std::vector<std::string> key;
        for (const std::string& k : s.primary_key) key.push_back(QuoteName(k));
        columns.push_back("PRIMARY KEY (" + Join(key, ", ") + ")");
      }
      return out + " (" + Join(columns, ", ") + ")" + WithClause(s.with);
    }
    case DdlObject::kSource: return out + " INTO " + QuoteName(s.into) + WithClause(s.with);
    case DdlObject::kSink: return out + " FROM " + QuoteName(s.from) + WithClause(s.with);
    case DdlObject::kWindow:
    case DdlObject::kAlertRule: return out + WithClause(s.with);
    case DdlObject::kMaterializedView:
    case DdlObject::kStreamView:
    case DdlObject::kKpi: return out + WithClause(s.with) + " AS " + s.query;
  }
  return out;
}

std::string CatalogImpl::DumpSql() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const CatalogEntry& e : entries_) out += e.sql + ";\n";
  return out;
}

std::string CatalogImpl::DumpYaml() const {
  std::lock_guard<std::mutex> lock(mu_);
  // One section per kind, in the order a pipeline file applies them.
  struct Section {
    DdlObject kind;
    const char* key;
  };
  static const Section kSections[] = {
      {DdlObject::kTable, "tables"},        {DdlObject::kSource, "connectors"},
      {DdlObject::kMaterializedView, "tasks"}, {DdlObject::kStreamView, "stream_tasks"},
      {DdlObject::kWindow, "windows"},       {DdlObject::kKpi, "kpis"},
      {DdlObject::kAlertRule, "alert_rules"}, {DdlObject::kSink, "sinks"}};
  std::string out = "# rill pipeline dump\n";
  for (const Section& section : kSections) {
    bool any = false;
    for (const CatalogEntry& e : entries_) {
      if (e.kind != section.kind) continue;
      if (!any) out += std::string(section.key) + ":\n";
      any = true;
      const DdlStatement& s = e.statement;
      out += "  - name: " + Y(e.name) + "\n";
      const std::string in = "    ";
      std::vector<std::string> skip;
      switch (e.kind) {
        case DdlObject::kTable: {
          out += in + "columns:\n";
          for (const DdlColumn& c : s.columns) {
            out += in + "  - {name: " + Y(c.name) + ", type: " + Y(c.type) +
                   ", nullable: " + (c.not_null ? "false" : "true") + "}\n";
          }
          if (!s.primary_key.empty()) {
            std::vector<std::string> key;
            for (const std::string& k : s.primary_key) key.push_back(Y(k));
            out += in + "primary_key: [" + Join(key, ", ") + "]\n";
          }
          std::string retention;
          for (const auto& [name, value] : s.with) {
            if (name == "mode") {
              out += in + "mode: " + Y(value.text) + "\n";
            } else {
              retention += std::string(retention.empty() ? "" : ", ") + name + ": " +
                           Y(FlatText(value));
            }
          }
          if (!retention.empty()) out += in + "retention: {" + retention + "}\n";
          continue;
        }
        case DdlObject::kSource: {
          std::string kind = s.with.empty() ? "" : s.with.front().second.text;
          out += in + "type: " + Y(kind) + "\n";
          out += in + (kind == "postgres_cdc" ? "target_table: " : "table: ") + Y(s.into) + "\n";
          skip = {"connector"};
          break;
        }
        case DdlObject::kSink:
          out += in + "type: " + Y(s.with.empty() ? "" : s.with.front().second.text) + "\n";
          out += in + "table: " + Y(s.from) + "\n";
          skip = {"connector"};
          break;
        case DdlObject::kMaterializedView:
          out += in + "type: \"sql\"\n";
          [[fallthrough]];
        case DdlObject::kStreamView:
        case DdlObject::kKpi:
          out += in + "sql: " + Y(s.query) + "\n";
          break;
        default:
          break;
      }
      YamlOptions(Without(s.with, skip), in, &out);
    }
  }
  return out;
}

}  // namespace catalog_internal

std::string PipelineFileOptionsMarkdown() {
  std::string out = SourceOptionsMarkdown();
  out += OptionTableMarkdown(MaterializedViewOptionTable(), "#### `tasks:` (`type: sql`)");
  out += OptionTableMarkdown(StreamViewOptionTable(), "#### `stream_tasks:`");
  out += OptionTableMarkdown(WindowOptionTable(), "#### `windows:`");
  for (const std::string& kind : SinkKinds()) {
    out += OptionTableMarkdown(*SinkOptionTable(kind), "#### `sinks:` (`type: " + kind + "`)");
  }
  out += OptionTableMarkdown(KpiOptionTable(), "#### `kpis:`");
  out += OptionTableMarkdown(AlertRuleOptionTable(), "#### `alert_rules:`");
  return out;
}

std::string DdlOptionsMarkdown() {
  std::string out;
  out += TableOptionsMarkdown();
  for (const std::string& kind : SourceKinds()) {
    out += OptionTableMarkdown(*SourceOptionTable(kind),
                               "#### `CREATE SOURCE ... WITH (connector = '" + kind + "', ...)`");
  }
  out += OptionTableMarkdown(MaterializedViewOptionTable(),
                             "#### `CREATE MATERIALIZED VIEW ... WITH (...) AS SELECT ...`");
  out += OptionTableMarkdown(StreamViewOptionTable(),
                             "#### `CREATE STREAM VIEW ... WITH (...) AS SELECT ...`");
  out += OptionTableMarkdown(WindowOptionTable(), "#### `CREATE WINDOW ... WITH (...)`");
  for (const std::string& kind : SinkKinds()) {
    out += OptionTableMarkdown(*SinkOptionTable(kind),
                               "#### `CREATE SINK ... FROM table WITH (connector = '" + kind +
                                   "', ...)`");
  }
  out += OptionTableMarkdown(KpiOptionTable(), "#### `CREATE KPI ... WITH (...) AS SELECT ...`");
  out += OptionTableMarkdown(AlertRuleOptionTable(), "#### `CREATE ALERT RULE ... WITH (...)`");
  return out;
}

}  // namespace rill::pipeline
