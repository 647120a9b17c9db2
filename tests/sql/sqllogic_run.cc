// Running the records of a .test file against a rill::Engine.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <arrow/io/memory.h>
#include <arrow/json/api.h>

#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/engine/task.h"
#include "rill/table/schema.h"
#include "sqllogic.h"

namespace rill::sqllogic {

namespace {

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

/// Split "a, b,c" into {"a", "b", "c"}.
std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

/// The text of `line` after its first `n` words.
std::string AfterWords(const std::string& line, size_t n) {
  size_t pos = 0;
  for (size_t i = 0; i < n; ++i) {
    pos = line.find_first_not_of(" \t", pos);
    if (pos == std::string::npos) return "";
    pos = line.find_first_of(" \t", pos);
    if (pos == std::string::npos) return "";
  }
  const size_t start = line.find_first_not_of(" \t", pos);
  return start == std::string::npos ? "" : line.substr(start);
}

/// Return the text after ` error ` in a directive (the expected error), if any,
/// and cut it from `line`. The search starts at `from` (after push's column list).
std::optional<std::string> TakeExpectedError(std::string* line, size_t from = 0) {
  size_t pos = line->find(" error", from);
  if (pos == std::string::npos) return std::nullopt;
  const size_t end = pos + 6;
  if (end < line->size() && (*line)[end] != ' ') return std::nullopt;
  std::string expected = end < line->size() ? line->substr(end + 1) : "";
  line->resize(pos);
  return expected;
}

/// Split an expected row into cells: on tabs when it has one, else on runs of
/// spaces; a line that does not split into `columns` cells is one cell when
/// the query has one column.
std::vector<std::string> ExpectedCells(const std::string& line, size_t columns) {
  std::vector<std::string> cells;
  if (line.find('\t') != std::string::npos) {
    std::istringstream in(line);
    for (std::string cell; std::getline(in, cell, '\t');) cells.push_back(cell);
  } else {
    std::istringstream in(line);
    for (std::string cell; in >> cell;) cells.push_back(cell);
  }
  if (cells.size() != columns && columns == 1) return {line};
  return cells;
}

class Runner {
 public:
  explicit Runner(std::string path) : path_(std::move(path)) {}

  Status Init() {
    EngineOptions options;
    options.clock = [this] { return now_.load(); };
    RILL_ASSIGN_OR_RAISE(engine_, Engine::Make(std::move(options)));
    return Status::OK();
  }

  Status Run(const Record& r) {
    const std::string& d = r.words[0];
    if (d == "statement") return Statement(r);
    if (d == "query") return Query(r);
    if (d == "create" && r.words.size() >= 3 && r.words[1] == "table") return CreateTable(r);
    if (d == "push") return Push(r);
    if (d == "tick") return Tick(r);
    if (d == "clock") return SetClock(r);
    if (d == "join") return AddJoin(r);
    if (d == "task") return AddTask(r);
    if (d == "maintenance") return Maintenance(r);
    return Status::Invalid("unknown directive '", r.directive_line, "'");
  }

 private:
  /// Compare what a directive did with what the file expects.
  static Status Expect(const Status& st, const std::optional<std::string>& error) {
    if (!error) {
      if (!st.ok()) return Status::Invalid("unexpected error: ", st.ToString());
      return Status::OK();
    }
    if (st.ok()) {
      return Status::Invalid("expected an error containing '", *error, "', but it succeeded");
    }
    if (st.message().find(*error) == std::string::npos) {
      return Status::Invalid("expected an error containing '", *error, "', got: ",
                             st.ToString());
    }
    return Status::OK();
  }

  Status Statement(const Record& r) {
    std::string line = r.directive_line;
    auto error = TakeExpectedError(&line);
    if (!error && line != "statement ok") {
      return Status::Invalid("expected 'statement ok' or 'statement error <message>'");
    }
    return Expect(engine_->Query(Join(r.body, "\n")).status(), error);
  }

  Status Query(const Record& r) {
    if (r.words.size() < 2 || !r.has_expected) {
      return Status::Invalid("a query needs column types (query II) and a ---- line");
    }
    const size_t columns = r.words[1].size();
    const bool rowsort = r.words.size() > 2 && r.words[2] == "rowsort";
    const std::string sql = Join(r.body, "\n");
    auto result = engine_->Query(sql);
    if (!result.ok()) return Status::Invalid("query failed: ", result.status().ToString());
    if (static_cast<size_t>((*result)->num_columns()) != columns) {
      return Status::Invalid("query returned ", (*result)->num_columns(),
                             " column(s); the record declares ", columns, " (", r.words[1], ")");
    }
    RILL_ASSIGN_OR_RAISE(auto actual, FormatRows(**result));
    std::vector<std::vector<std::string>> expected;
    for (const auto& line : r.expected) expected.push_back(ExpectedCells(line, columns));
    if (rowsort) {
      std::sort(actual.begin(), actual.end());
      std::sort(expected.begin(), expected.end());
    }
    if (actual == expected) return Status::OK();
    std::string message = "query result differs\n" + sql + "\n-- expected:\n";
    for (const auto& row : expected) message += Join(row, "\t") + "\n";
    message += "-- actual:\n";
    for (const auto& row : actual) message += Join(row, "\t") + "\n";
    return Status::Invalid(message);
  }

  /// Build the schema and options of `create table` from its body.
  static Status TableSpec(const Record& r, std::shared_ptr<arrow::Schema>* schema,
                          TableOptions* options) {
    arrow::FieldVector fields;
    for (const auto& line : r.body) {
      std::istringstream in(line);
      std::vector<std::string> w;
      for (std::string s; in >> s;) w.push_back(s);
      if (w.size() >= 2 && w[0] == "primary" && w[1] == "key") {
        options->primary_key = SplitList(AfterWords(line, 2));
      } else if (w.size() == 2 && w[0] == "mode") {
        RILL_ASSIGN_OR_RAISE(auto mode, ParseTableMode(w[1]));
        options->mode = mode;
      } else if (!w.empty() && w[0] == "retention") {
        RetentionPolicy policy;
        for (size_t i = 1; i + 1 < w.size(); i += 2) {
          if (w[i] == "max_rows") {
            policy.max_rows = std::stoll(w[i + 1]);
          } else if (w[i] == "max_age") {
            policy.max_age_seconds = std::stod(w[i + 1]);
          } else if (w[i] == "time_column") {
            policy.time_column = w[i + 1];
          } else {
            return Status::Invalid("unknown retention setting '", w[i], "'");
          }
        }
        options->retention = policy;
      } else if (w.size() == 2 || (w.size() == 4 && w[2] == "NOT" && w[3] == "NULL")) {
        RILL_ASSIGN_OR_RAISE(auto type, ParseTypeName(w[1]));
        fields.push_back(arrow::field(w[0], type, /*nullable=*/w.size() == 2));
      } else {
        return Status::Invalid("cannot read table line '", line, "'");
      }
    }
    *schema = arrow::schema(std::move(fields));
    return Status::OK();
  }

  Status CreateTable(const Record& r) {
    std::string line = r.directive_line;
    auto error = TakeExpectedError(&line);
    std::shared_ptr<arrow::Schema> schema;
    TableOptions options;
    RILL_RETURN_NOT_OK(TableSpec(r, &schema, &options));
    return Expect(engine_->RegisterTable(r.words[2], schema, options).status(), error);
  }

  /// Parse the NDJSON body of `push`, with the column types of `types` ("a
  /// BIGINT, b VARCHAR") fixed and in that order, the rest inferred.
  static Result<std::shared_ptr<arrow::RecordBatch>> ReadRows(const std::string& types,
                                                              const std::string& ndjson) {
    auto parse = arrow::json::ParseOptions::Defaults();
    std::vector<std::string> dictionary_columns;  // read as strings, then encoded
    if (!types.empty()) {
      arrow::FieldVector fields;
      for (const auto& column : SplitList(types)) {
        std::istringstream in(column);
        std::string name, type_name;
        in >> name >> type_name;
        RILL_ASSIGN_OR_RAISE(auto type, ParseTypeName(type_name));
        if (type->id() == arrow::Type::DICTIONARY) {
          dictionary_columns.push_back(name);
          type = arrow::utf8();
        }
        fields.push_back(arrow::field(name, type));
      }
      parse.explicit_schema = arrow::schema(std::move(fields));
      parse.unexpected_field_behavior = arrow::json::UnexpectedFieldBehavior::InferType;
    }
    auto read = arrow::json::ReadOptions::Defaults();
    read.use_threads = false;
    auto input = std::make_shared<arrow::io::BufferReader>(arrow::Buffer::FromString(ndjson));
    RILL_ASSIGN_OR_RAISE(auto reader, arrow::json::TableReader::Make(
                                          arrow::default_memory_pool(), input, read, parse));
    RILL_ASSIGN_OR_RAISE(auto table, reader->Read());
    RILL_ASSIGN_OR_RAISE(auto batch, table->CombineChunksToBatch());
    for (const auto& name : dictionary_columns) {
      const int i = batch->schema()->GetFieldIndex(name);
      RILL_ASSIGN_OR_RAISE(auto encoded, arrow::compute::DictionaryEncode(batch->column(i)));
      RILL_ASSIGN_OR_RAISE(
          batch, batch->SetColumn(i, arrow::field(name, encoded.type()), encoded.make_array()));
    }
    return batch;
  }

  Status Push(const Record& r) {
    std::string line = r.directive_line;
    const size_t close_paren = line.rfind(')');
    auto error = TakeExpectedError(&line, close_paren == std::string::npos ? 0 : close_paren);
    if (r.words.size() < 2) return Status::Invalid("push needs a table name");
    const std::string& table = r.words[1];
    std::string types;
    const size_t open = line.find('(');
    if (open != std::string::npos) {
      const size_t close = line.rfind(')');
      if (close == std::string::npos || close < open) return Status::Invalid("unclosed (");
      types = line.substr(open + 1, close - open - 1);
    }
    if (r.body.empty()) return Status::Invalid("push needs rows (one JSON object a line)");
    auto batch = ReadRows(types, Join(r.body, "\n") + "\n");
    Status st = batch.status();
    if (st.ok()) {
      auto& connector = connectors_[table];
      if (!connector) {
        connector = std::make_shared<MemoryConnector>(table);
        RILL_RETURN_NOT_OK(engine_->AddConnector(connector));
      }
      st = connector->Push(*batch);
    }
    return Expect(st, error);
  }

  Status Tick(const Record& r) {
    const int n = r.words.size() > 1 ? std::stoi(r.words[1]) : 1;
    for (int i = 0; i < n; ++i) RILL_RETURN_NOT_OK(engine_->Step().status());
    return Status::OK();
  }

  Status SetClock(const Record& r) {
    if (r.words.size() != 2) return Status::Invalid("clock <seconds> or clock +<seconds>");
    const std::string& v = r.words[1];
    now_ = v[0] == '+' ? now_.load() + std::stod(v.substr(1)) : std::stod(v);
    return Status::OK();
  }

  Status AddJoin(const Record& r) {
    std::string line = r.directive_line;
    auto error = TakeExpectedError(&line);
    if (r.words.size() < 2) return Status::Invalid("join needs a task name");
    JoinTaskOptions o;
    o.name = r.words[1];
    for (const auto& body_line : r.body) {
      std::istringstream in(body_line);
      std::string key;
      in >> key;
      const std::string value = AfterWords(body_line, 1);
      if (key == "left") o.left_table = value;
      else if (key == "right") o.right_table = value;
      else if (key == "on") o.keys = SplitList(value);
      else if (key == "right_on") o.right_keys = SplitList(value);
      else if (key == "into") o.output_table = value;
      else if (key == "type") { RILL_ASSIGN_OR_RAISE(o.join_type, ParseJoinType(value)); }
      else if (key == "group_by") o.group_by = SplitList(value);
      else if (key == "key") o.primary_key = SplitList(value);
      else if (key == "every") o.interval_seconds = std::stod(value);
      else if (key == "incremental") o.incremental = true;
      else if (key == "aggregate") {
        for (const auto& item : SplitList(value)) {
          std::istringstream parts(item);
          std::string column, fn;
          parts >> column >> fn;
          RILL_ASSIGN_OR_RAISE(auto f, ParseAggregateFunction(fn));
          o.aggregations.emplace_back(column, f);
        }
      } else {
        return Status::Invalid("unknown join setting '", key, "'");
      }
    }
    auto task = TableJoinTask::Make(std::move(o));
    Status st = task.status();
    if (st.ok()) st = engine_->AddJoinTask(*task);
    return Expect(st, error);
  }

  /// task <name> into <table> [every <seconds>] [key <a,b>]
  /// [incremental auto|true|false] [error <text>], the SQL as body. With
  /// incremental true the query is checked now (ScheduledSqlTask::
  /// CheckIncremental, over the tables registered so far), as the task's first
  /// run would; with `error`, the check or Engine::AddSqlTask must refuse the
  /// task with a message containing <text>, and the task is not added.
  Status AddTask(const Record& r) {
    std::string line = r.directive_line;
    auto error = TakeExpectedError(&line);
    std::vector<std::string> w;
    std::istringstream in(line);
    for (std::string word; in >> word;) w.push_back(word);
    if (w.size() < 4 || w[2] != "into" || w.size() % 2 != 0) {
      return Status::Invalid(
          "task <name> into <table> [every <seconds>] [key <columns>] "
          "[incremental auto|true|false] [error <text>]");
    }
    double every = 1.0;
    std::vector<std::string> key;
    IncrementalMode incremental = IncrementalMode::kAuto;
    for (size_t i = 4; i + 1 < w.size(); i += 2) {
      if (w[i] == "every") {
        every = std::stod(w[i + 1]);
      } else if (w[i] == "key") {
        key = SplitList(w[i + 1]);
      } else if (w[i] == "incremental") {
        RILL_ASSIGN_OR_RAISE(incremental, ParseIncrementalMode(w[i + 1]));
      } else {
        return Status::Invalid("unknown task setting '", w[i], "'");
      }
    }
    const std::string sql = Join(r.body, "\n");
    Status st;
    if (incremental == IncrementalMode::kOn) {
      st = ScheduledSqlTask::CheckIncremental(engine_->sql(), sql);
    }
    if (st.ok()) {
      st = engine_->AddSqlTask(std::make_shared<ScheduledSqlTask>(
          w[1], sql, w[3], every, key, /*use_prepared_statements=*/true,
          /*retention=*/std::nullopt, incremental));
    }
    return Expect(st, error);
  }

  /// maintenance <task>, then one line: how the task keeps its output
  /// (TaskStats::maintenance) starts with that line.
  Status Maintenance(const Record& r) {
    if (r.words.size() != 2 || r.body.size() != 1 || r.has_expected) {
      return Status::Invalid("maintenance <task>, then one line of expected text");
    }
    const auto stats = engine_->TaskStatistics();
    auto it = stats.find(r.words[1]);
    if (it == stats.end()) return Status::KeyError("no task '", r.words[1], "'");
    const TaskStats& s = it->second;
    const std::string& want = r.body[0];
    if (s.maintenance.rfind(want, 0) == 0) return Status::OK();
    std::string message = "task '" + r.words[1] + "': maintenance is '" + s.maintenance +
                          "', expected it to start with '" + want + "'";
    if (s.errors > 0) {
      message += " (" + std::to_string(s.errors) + " failed run(s), the last: " +
                 s.last_error + ")";
    }
    return Status::Invalid(message);
  }

  std::string path_;
  std::atomic<double> now_{0};
  std::unique_ptr<Engine> engine_;
  std::map<std::string, std::shared_ptr<MemoryConnector>> connectors_;
};

}  // namespace

Status RunFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::IOError("cannot open ", path);
  std::stringstream text;
  text << in.rdbuf();
  RILL_ASSIGN_OR_RAISE(auto records, ParseRecords(text.str()));
  Runner runner(path);
  RILL_RETURN_NOT_OK(runner.Init());
  // RILL_SQLLOGIC_ALL=1: report every failing record, not only the first
  // (for writing a file; the exit status still says whether all passed).
  const char* all_env = std::getenv("RILL_SQLLOGIC_ALL");
  const bool all = all_env != nullptr && std::string(all_env) == "1";
  Status first_failure;
  for (const auto& r : records) {
    Status st;
    try {
      st = runner.Run(r);
    } catch (const std::exception& e) {  // std::stoi and friends on a bad number
      st = Status::Invalid("cannot read '", r.directive_line, "': ", e.what());
    }
    if (!st.ok()) {
      st = Status::Invalid(path, ":", r.line, ": ", r.directive_line, ": ", st.message());
      if (!all) return st;
      std::cerr << st.message() << "\n";
      if (first_failure.ok()) first_failure = st;
    }
  }
  return first_failure;
}

}  // namespace rill::sqllogic
