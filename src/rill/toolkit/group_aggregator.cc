#include "rill/toolkit/group_aggregator.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <arrow/api.h>
#include <arrow/compute/api.h>

namespace rill::toolkit {

namespace {

Result<std::shared_ptr<arrow::DataType>> CanonicalKeyType(const arrow::DataType& type,
                                                          const std::string& column) {
  if (arrow::is_integer(type.id()) || type.id() == arrow::Type::BOOL) return arrow::int64();
  if (arrow::is_floating(type.id())) return arrow::float64();
  if (arrow::is_string(type.id()) || type.id() == arrow::Type::DICTIONARY) return arrow::utf8();
  return Status::TypeError("group_by column '", column, "' has type ", type.ToString(),
                           "; expected integers, floats, booleans or strings");
}

Result<std::shared_ptr<arrow::Array>> CastTo(const std::shared_ptr<arrow::Array>& array,
                                             const std::shared_ptr<arrow::DataType>& type) {
  if (array->type()->Equals(*type)) return array;
  RILL_ASSIGN_OR_RAISE(arrow::Datum cast, arrow::compute::Cast(array, type));
  return cast.make_array();
}

// Encoded key part: a tag byte (0 null, 1 value) then the value bytes
// (strings length-prefixed so that concatenations cannot collide).
void AppendKey(const arrow::Array& array, int64_t row, std::string* out) {
  if (array.IsNull(row)) {
    out->push_back('\0');
    return;
  }
  out->push_back('\1');
  switch (array.type_id()) {
    case arrow::Type::INT64: {
      int64_t v = static_cast<const arrow::Int64Array&>(array).Value(row);
      out->append(reinterpret_cast<const char*>(&v), sizeof(v));
      break;
    }
    case arrow::Type::DOUBLE: {
      double v = static_cast<const arrow::DoubleArray&>(array).Value(row);
      if (v == 0) v = 0;  // -0.0 groups with 0.0
      out->append(reinterpret_cast<const char*>(&v), sizeof(v));
      break;
    }
    default: {
      std::string_view v = static_cast<const arrow::StringArray&>(array).GetView(row);
      uint32_t n = static_cast<uint32_t>(v.size());
      out->append(reinterpret_cast<const char*>(&n), sizeof(n));
      out->append(v.data(), v.size());
    }
  }
}

}  // namespace

Result<GroupAggFn> ParseGroupAggFn(std::string_view name, std::string_view column) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "count") return column == "*" ? GroupAggFn::kCountStar : GroupAggFn::kCount;
  GroupAggFn fn;
  if (lower == "sum") {
    fn = GroupAggFn::kSum;
  } else if (lower == "avg" || lower == "mean") {
    fn = GroupAggFn::kAvg;
  } else if (lower == "min") {
    fn = GroupAggFn::kMin;
  } else if (lower == "max") {
    fn = GroupAggFn::kMax;
  } else {
    return Status::Invalid("unknown aggregation '", std::string(name),
                           "': expected count, sum, avg, min or max");
  }
  if (column == "*") return Status::Invalid(std::string(name), "('*') needs a column");
  return fn;
}

Result<std::unique_ptr<GroupAggregator>> GroupAggregator::Make(
    std::vector<std::string> group_by, std::vector<GroupAggSpec> aggs) {
  if (aggs.empty()) return Status::Invalid("an aggregation pipeline needs an aggregation");
  std::set<std::string> names;
  for (const auto& a : aggs) {
    if (a.output.empty() || !names.insert(a.output).second) {
      return Status::Invalid("aggregation output names must be unique and non-empty, got '",
                             a.output, "'");
    }
  }
  return std::unique_ptr<GroupAggregator>(
      new GroupAggregator(std::move(group_by), std::move(aggs)));
}

Status GroupAggregator::Consume(const arrow::RecordBatch& batch) {
  const int64_t n = batch.num_rows();
  std::vector<std::shared_ptr<arrow::Array>> keys;
  for (size_t k = 0; k < group_by_.size(); ++k) {
    auto column = batch.GetColumnByName(group_by_[k]);
    if (column == nullptr) return Status::KeyError("no column named '", group_by_[k], "'");
    if (key_types_.size() <= k) {
      RILL_ASSIGN_OR_RAISE(auto type, CanonicalKeyType(*column->type(), group_by_[k]));
      key_types_.push_back(type);
    }
    RILL_ASSIGN_OR_RAISE(auto cast, CastTo(column, key_types_[k]));
    keys.push_back(std::move(cast));
  }
  std::vector<std::shared_ptr<arrow::DoubleArray>> values(aggs_.size());
  for (size_t a = 0; a < aggs_.size(); ++a) {
    if (aggs_[a].fn == GroupAggFn::kCountStar) continue;
    auto column = batch.GetColumnByName(aggs_[a].column);
    if (column == nullptr) return Status::KeyError("no column named '", aggs_[a].column, "'");
    if (!arrow::is_numeric(column->type_id()) && column->type_id() != arrow::Type::BOOL) {
      if (aggs_[a].fn != GroupAggFn::kCount) {
        return Status::TypeError("column '", aggs_[a].column, "' (", column->type()->ToString(),
                                 ") is not numeric");
      }
      // count(x) of a non-numeric column: only its validity matters.
      auto original = column;
      arrow::DoubleBuilder b;
      RILL_RETURN_NOT_OK(b.Reserve(n));
      for (int64_t i = 0; i < n; ++i) {
        if (original->IsNull(i)) {
          b.UnsafeAppendNull();
        } else {
          b.UnsafeAppend(0);
        }
      }
      RILL_RETURN_NOT_OK(b.Finish(&column));
    }
    RILL_ASSIGN_OR_RAISE(auto cast, CastTo(column, arrow::float64()));
    values[a] = std::static_pointer_cast<arrow::DoubleArray>(cast);
  }
  const size_t naggs = aggs_.size();
  std::string key;
  for (int64_t i = 0; i < n; ++i) {
    key.clear();
    for (const auto& k : keys) AppendKey(*k, i, &key);
    auto [it, inserted] = index_.try_emplace(key, static_cast<int64_t>(keys_.size()));
    if (inserted) {
      keys_.push_back(key);
      states_.resize(states_.size() + naggs);
    }
    State* s = &states_[it->second * naggs];
    for (size_t a = 0; a < naggs; ++a, ++s) {
      if (aggs_[a].fn == GroupAggFn::kCountStar) {
        ++s->count;
        continue;
      }
      const auto& v = *values[a];
      if (v.IsNull(i)) continue;
      double x = v.Value(i);
      if (s->count == 0) {
        s->min = s->max = x;
      } else {
        s->min = std::min(s->min, x);
        s->max = std::max(s->max, x);
      }
      ++s->count;
      s->sum += x;
    }
  }
  rows_ += n;
  return Status::OK();
}

Result<std::shared_ptr<arrow::Table>> GroupAggregator::Finish() const {
  const int64_t groups = static_cast<int64_t>(keys_.size());
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::shared_ptr<arrow::Array>> columns;
  // Decode the key columns from the encoded keys.
  std::vector<size_t> offsets(keys_.size(), 0);
  for (size_t k = 0; k < key_types_.size(); ++k) {
    std::unique_ptr<arrow::ArrayBuilder> builder;
    RILL_RETURN_NOT_OK(arrow::MakeBuilder(arrow::default_memory_pool(), key_types_[k], &builder));
    for (int64_t g = 0; g < groups; ++g) {
      const std::string& enc = keys_[g];
      size_t& at = offsets[g];
      if (enc[at++] == '\0') {
        RILL_RETURN_NOT_OK(builder->AppendNull());
        continue;
      }
      switch (key_types_[k]->id()) {
        case arrow::Type::INT64: {
          int64_t v;
          std::memcpy(&v, enc.data() + at, sizeof(v));
          at += sizeof(v);
          RILL_RETURN_NOT_OK(static_cast<arrow::Int64Builder&>(*builder).Append(v));
          break;
        }
        case arrow::Type::DOUBLE: {
          double v;
          std::memcpy(&v, enc.data() + at, sizeof(v));
          at += sizeof(v);
          RILL_RETURN_NOT_OK(static_cast<arrow::DoubleBuilder&>(*builder).Append(v));
          break;
        }
        default: {
          uint32_t len;
          std::memcpy(&len, enc.data() + at, sizeof(len));
          at += sizeof(len);
          RILL_RETURN_NOT_OK(static_cast<arrow::StringBuilder&>(*builder)
                                 .Append(enc.data() + at, static_cast<int32_t>(len)));
          at += len;
        }
      }
    }
    std::shared_ptr<arrow::Array> array;
    RILL_RETURN_NOT_OK(builder->Finish(&array));
    fields.push_back(arrow::field(group_by_[k], key_types_[k]));
    columns.push_back(std::move(array));
  }
  const size_t naggs = aggs_.size();
  for (size_t a = 0; a < naggs; ++a) {
    const GroupAggFn fn = aggs_[a].fn;
    std::shared_ptr<arrow::Array> array;
    if (fn == GroupAggFn::kCountStar || fn == GroupAggFn::kCount) {
      arrow::Int64Builder b;
      RILL_RETURN_NOT_OK(b.Reserve(groups));
      for (int64_t g = 0; g < groups; ++g) b.UnsafeAppend(states_[g * naggs + a].count);
      RILL_RETURN_NOT_OK(b.Finish(&array));
      fields.push_back(arrow::field(aggs_[a].output, arrow::int64()));
    } else {
      arrow::DoubleBuilder b;
      RILL_RETURN_NOT_OK(b.Reserve(groups));
      for (int64_t g = 0; g < groups; ++g) {
        const State& s = states_[g * naggs + a];
        if (s.count == 0) {
          b.UnsafeAppendNull();
          continue;
        }
        double v = fn == GroupAggFn::kSum   ? s.sum
                   : fn == GroupAggFn::kAvg ? s.sum / static_cast<double>(s.count)
                   : fn == GroupAggFn::kMin ? s.min
                                            : s.max;
        b.UnsafeAppend(v);
      }
      RILL_RETURN_NOT_OK(b.Finish(&array));
      fields.push_back(arrow::field(aggs_[a].output, arrow::float64()));
    }
    columns.push_back(std::move(array));
  }
  return arrow::Table::Make(arrow::schema(fields), columns, groups);
}

void GroupAggregator::Reset() {
  index_.clear();
  keys_.clear();
  states_.clear();
  rows_ = 0;
}

}  // namespace rill::toolkit
