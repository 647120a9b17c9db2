// The pipeline-file parser shared by pipeline.cc (top level, engine, metrics,
// server, tables) and pipeline_sections.cc (connectors, tasks, KPIs, rules).
// Private to apps/rill.
#pragma once

#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "pipeline.h"
#include "rill/pipeline/options.h"
#include "rill/pipeline/sources.h"
#include "rill/table/schema.h"

namespace rill::app::pipeline_internal {

/// A YAML node with its key path, e.g. "tables[0].columns".
struct At {
  YAML::Node node;
  std::string path;
};

class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}

  SourceRef Ref(const At& at) const {
    return SourceRef{file_, at.node.Mark().line + 1, at.path};
  }

  template <typename... Args>
  Status Error(const At& at, Args&&... args) const {
    return Ref(at).Wrap(Status::Invalid(std::forward<Args>(args)...));
  }

  At Child(const At& parent, const std::string& key) const {
    return At{parent.node[key], parent.path.empty() ? key : parent.path + "." + key};
  }

  /// Invalid unless `at` is a mapping whose keys are all in `allowed`.
  Status Keys(const At& at, std::initializer_list<const char*> allowed) const {
    return Keys(at, std::vector<std::string>(allowed.begin(), allowed.end()));
  }
  Status Keys(const At& at, const std::vector<std::string>& allowed) const {
    if (!at.node.IsMap()) {
      return Error(at, "expected a mapping");
    }
    std::set<std::string> ok(allowed.begin(), allowed.end());
    for (const auto& kv : at.node) {
      const std::string key = kv.first.Scalar();
      if (ok.count(key) == 0) {
        std::string list;
        for (const std::string& a : allowed) {
          list += list.empty() ? a : ", " + a;
        }
        At bad{kv.first, (at.path.empty() ? "" : at.path + ".") + key};
        return Error(bad, "unknown key (expected one of: ", list, ")");
      }
    }
    return Status::OK();
  }

  Result<std::string> Str(const At& at) const {
    if (!at.node.IsScalar()) {
      return Error(at, "expected a string");
    }
    return at.node.Scalar();
  }
  Result<std::string> RequiredStr(const At& parent, const std::string& key) const {
    At at = Child(parent, key);
    if (!at.node.IsDefined() || at.node.IsNull()) {
      return Error(parent, "missing required key '", key, "'");
    }
    RILL_ASSIGN_OR_RAISE(std::string value, Str(at));
    if (value.empty()) {
      return Error(at, "must not be empty");
    }
    return value;
  }
  Result<double> Num(const At& at) const {
    double value = 0;
    if (!at.node.IsScalar() || !YAML::convert<double>::decode(at.node, value) ||
        !std::isfinite(value)) {
      return Error(at, "expected a number, got '", at.node.IsScalar() ? at.node.Scalar() : "",
                   "'");
    }
    return value;
  }
  Result<int64_t> Int(const At& at) const {
    int64_t value = 0;
    if (!at.node.IsScalar() || !YAML::convert<int64_t>::decode(at.node, value)) {
      return Error(at, "expected an integer, got '",
                   at.node.IsScalar() ? at.node.Scalar() : "", "'");
    }
    return value;
  }
  Result<bool> Bool(const At& at) const {
    bool value = false;
    if (!at.node.IsScalar() || !YAML::convert<bool>::decode(at.node, value)) {
      return Error(at, "expected true or false");
    }
    return value;
  }
  /// "a", "a,b" or [a, b].
  Result<std::vector<std::string>> Names(const At& at) const {
    if (at.node.IsScalar()) {
      return SplitKey(at.node.Scalar());
    }
    if (!at.node.IsSequence()) {
      return Error(at, "expected a name or a list of names");
    }
    std::vector<std::string> out;
    for (size_t i = 0; i < at.node.size(); ++i) {
      RILL_ASSIGN_OR_RAISE(std::string name, Str(Item(at, i)));
      out.push_back(std::move(name));
    }
    return out;
  }
  /// The YAML value `at` as a declared option (scalar, list or mapping), with
  /// its place for messages.
  pipeline::OptionValue ToOption(const At& at) const {
    pipeline::OptionValue v;
    v.where = Ref(at).ToString();
    if (at.node.IsSequence()) {
      v.kind = pipeline::OptionValue::Kind::kList;
      for (size_t i = 0; i < at.node.size(); ++i) v.items.push_back(ToOption(Item(at, i)));
    } else if (at.node.IsMap()) {
      v.kind = pipeline::OptionValue::Kind::kMap;
      for (const auto& kv : at.node) {
        const std::string key = kv.first.Scalar();
        v.items.push_back(ToOption(At{kv.second, at.path + "." + key}));
        v.items.back().key = key;
      }
    } else if (at.node.IsScalar()) {
      v.text = at.node.Scalar();
    }
    return v;
  }
  At Item(const At& at, size_t i) const {
    return At{at.node[i], at.path + "[" + std::to_string(i) + "]"};
  }
  bool Has(const At& parent, const char* key) const {
    YAML::Node n = parent.node[key];
    return n.IsDefined() && !n.IsNull();
  }

  /// Call `fn(item)` for each item of the list `key` of the top level.
  template <typename Fn>
  Status ForEach(const At& root, const char* key, Fn&& fn) const {
    if (!Has(root, key)) {
      return Status::OK();
    }
    At list = Child(root, key);
    if (!list.node.IsSequence()) {
      return Error(list, "expected a list");
    }
    for (size_t i = 0; i < list.node.size(); ++i) {
      RILL_RETURN_NOT_OK(fn(Item(list, i)));
    }
    return Status::OK();
  }

  /// Walk an aggregation list: a map {key: value} (on_entry(where, key, value)
  /// per entry) or a list of {column, function} (on_item(item, column,
  /// function) per item); anything else is an error naming `map_form`.
  template <typename OnEntry, typename OnItem>
  Status ForEachAggregation(const At& aggs, const char* map_form, OnEntry&& on_entry,
                            OnItem&& on_item) const {
    if (aggs.node.IsMap()) {
      for (const auto& kv : aggs.node) {
        At where{kv.second, aggs.path + "." + kv.first.Scalar()};
        RILL_ASSIGN_OR_RAISE(std::string value, Str(where));
        RILL_RETURN_NOT_OK(on_entry(where, kv.first.Scalar(), value));
      }
      return Status::OK();
    }
    if (aggs.node.IsSequence()) {
      for (size_t i = 0; i < aggs.node.size(); ++i) {
        At item = Item(aggs, i);
        RILL_RETURN_NOT_OK(Keys(item, {"column", "function"}));
        RILL_ASSIGN_OR_RAISE(std::string column, RequiredStr(item, "column"));
        RILL_ASSIGN_OR_RAISE(std::string fn, RequiredStr(item, "function"));
        RILL_RETURN_NOT_OK(on_item(item, column, fn));
      }
      return Status::OK();
    }
    return Error(aggs, "expected ", map_form, " or a list of {column, function}");
  }

  Status ParseEngine(const At& at, Pipeline* p) const;
  Status ParseMetrics(const At& at, Pipeline* p) const;
  Status ParseServer(const At& at, Pipeline* p) const;
  Status ParseCheckpoint(const At& at, Pipeline* p) const;
  Status ParseCluster(const At& at, Pipeline* p) const;
  Status ParseStreamTask(const At& at, Pipeline* p) const;  // pipeline_sections.cc
  Status ParseTable(const At& at, Pipeline* p) const;
  Status ParseConnector(const At& at, Pipeline* p) const;
  Status ParseGenerator(const At& at, const TableSpec& table, GeneratorSpec* spec) const;
  Status ParseGeneratorColumn(const At& c, GeneratorColumnSpec* col) const;
  Status ParseTask(const At& at, Pipeline* p) const;
  Status ParseJoin(const At& at, JoinTaskSpec* spec) const;
  Status ParseKpi(const At& at, Pipeline* p) const;
  Status ParseRule(const At& at, Pipeline* p) const;
  Status ParseWindow(const At& at, Pipeline* p) const;  // pipeline_windows.cc
  Status ParseSink(const At& at, Pipeline* p) const;    // pipeline_sinks.cc
  Result<std::optional<RetentionPolicy>> ParseRetention(const At& at) const;
  Result<std::shared_ptr<arrow::Schema>> ParseColumns(const At& at) const;

 private:
  std::string file_;
};

}  // namespace rill::app::pipeline_internal
