#include "rill/table/key_index_internal.h"

#include "rill/table/bytes_location_map_internal.h"
#include "rill/table/int_location_map_internal.h"

#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include <arrow/array.h>
#include <arrow/compute/api.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <arrow/type_traits.h>
#include <arrow/util/bit_util.h>

namespace rill {

namespace {

bool IsIntegerLike(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::INT8: case arrow::Type::INT16: case arrow::Type::INT32:
    case arrow::Type::INT64: case arrow::Type::UINT8: case arrow::Type::UINT16:
    case arrow::Type::UINT32: case arrow::Type::UINT64: case arrow::Type::DATE32:
    case arrow::Type::DATE64: case arrow::Type::TIMESTAMP: case arrow::Type::TIME32:
    case arrow::Type::TIME64: case arrow::Type::DURATION:
      return true;
    default:
      return false;
  }
}

bool IsStringLike(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::STRING: case arrow::Type::LARGE_STRING: case arrow::Type::BINARY:
    case arrow::Type::LARGE_BINARY: case arrow::Type::STRING_VIEW:
    case arrow::Type::BINARY_VIEW:
      return true;
    case arrow::Type::DICTIONARY:
      return IsStringLike(*static_cast<const arrow::DictionaryType&>(type).value_type());
    default:
      return false;
  }
}

/// Reads row i of a string-like array as a view (nullopt for null).
class StringReader {
 public:
  Status Bind(const std::shared_ptr<arrow::Array>& array) {
    array_ = array;
    dict_ = nullptr;
    values_ = array;
    if (array->type_id() == arrow::Type::DICTIONARY) {
      dict_ = std::static_pointer_cast<arrow::DictionaryArray>(array);
      values_ = dict_->dictionary();
    }
    kind_ = values_->type_id();
    return Status::OK();
  }
  std::optional<std::string_view> Get(int64_t i) const {
    if (array_->IsNull(i)) return std::nullopt;
    int64_t j = dict_ ? dict_->GetValueIndex(i) : i;
    if (dict_ && values_->IsNull(j)) return std::nullopt;
    switch (kind_) {
      case arrow::Type::STRING: case arrow::Type::BINARY:
        return static_cast<const arrow::BinaryArray&>(*values_).GetView(j);
      case arrow::Type::LARGE_STRING: case arrow::Type::LARGE_BINARY:
        return static_cast<const arrow::LargeBinaryArray&>(*values_).GetView(j);
      default:
        return static_cast<const arrow::BinaryViewArray&>(*values_).GetView(j);
    }
  }

 private:
  std::shared_ptr<arrow::Array> array_;
  std::shared_ptr<arrow::DictionaryArray> dict_;
  std::shared_ptr<arrow::Array> values_;
  arrow::Type::type kind_ = arrow::Type::STRING;
};

class IntKeyIndex final : public KeyIndex {
 public:
  explicit IntKeyIndex(int column) : column_(column) {}

  Status Bind(const arrow::RecordBatch& batch) override {
    auto array = batch.column(column_);
    if (array->type()->byte_width() != 8) {
      // Narrow integers (and date32/time32) are widened; the values keep their identity.
      auto target = arrow::is_unsigned_integer(array->type_id()) ? arrow::uint64() : arrow::int64();
      std::shared_ptr<arrow::Array> storage = array;
      if (!arrow::is_integer(array->type_id())) {
        auto width = array->type()->byte_width();
        auto int_type = width == 4 ? arrow::int32() : arrow::int16();
        RILL_ASSIGN_OR_RAISE(storage, array->View(int_type));
      }
      RILL_ASSIGN_OR_RAISE(auto cast, arrow::compute::Cast(*storage, target));
      array = cast;
    }
    array_ = array;
    values_ = array->data()->GetValues<int64_t>(1);
    has_nulls_ = array->null_count() > 0;
    return Status::OK();
  }

  uint64_t Upsert(int64_t row, uint64_t location) override {
    if (has_nulls_ && array_->IsNull(row)) {
      uint64_t prev = null_location_;
      null_location_ = location;
      return prev;
    }
    return map_.Upsert(values_[row], location);
  }

  void UpsertAll(int64_t n, uint64_t base, uint64_t* prev) override {
    const auto& data = *array_->data();
    const uint8_t* validity = has_nulls_ && data.buffers[0] ? data.buffers[0]->data() : nullptr;
    map_.UpsertBatch(values_, n, base, prev, validity, data.offset);
    if (!validity) return;
    // Null keys form one key of their own, upserted in row order.
    for (int64_t i = 0; i < n; ++i) {
      if (!arrow::bit_util::GetBit(validity, data.offset + i)) {
        prev[i] = null_location_;
        null_location_ = base + static_cast<uint64_t>(i);
      }
    }
  }

  void UpsertAllReplaced(int64_t n, uint64_t base,
                         std::vector<std::pair<int64_t, uint64_t>>* replaced) override {
    if (has_nulls_) {
      // The null key's rows go between the others in row order: the dense path.
      KeyIndex::UpsertAllReplaced(n, base, replaced);
      return;
    }
    map_.UpsertBatchReplaced(values_, n, base, replaced);
  }

  void Erase(int64_t row, uint64_t location) override {
    if (has_nulls_ && array_->IsNull(row)) {
      if (null_location_ == location) null_location_ = kNone;
      return;
    }
    map_.Erase(values_[row], location);
  }

  void FindAll(int64_t n, uint64_t* out) override {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = has_nulls_ && array_->IsNull(i) ? null_location_ : map_.Find(values_[i]);
    }
  }

  void Clear() override {
    map_.Clear();
    null_location_ = kNone;
  }
  size_t size() const override { return map_.size() + (null_location_ != kNone ? 1 : 0); }

 private:
  const int column_;
  IntLocationMap map_;
  uint64_t null_location_ = kNone;
  std::shared_ptr<arrow::Array> array_;
  const int64_t* values_ = nullptr;
  bool has_nulls_ = false;
};

/// Views and hashes of the keys of one bound batch, computed once per batch
/// in a tight loop, then probed in BytesLocationMap with prefetching.
struct KeyBatch {
  std::vector<std::string_view> views;
  std::vector<uint64_t> hashes;
  std::vector<uint8_t> nulls;  // 1 = null key (single-column string keys only)

  void Resize(int64_t n) {
    views.resize(n);
    hashes.resize(n);
  }
  void HashAll() {
    const size_t n = views.size();
    for (size_t i = 0; i < n; ++i) hashes[i] = BytesLocationMap::Hash(views[i]);
  }
};

class StringKeyIndex final : public KeyIndex {
 public:
  explicit StringKeyIndex(int column) : column_(column) {}

  Status Bind(const arrow::RecordBatch& batch) override {
    array_ = batch.column(column_);
    plain_ = nullptr;
    if (array_->type_id() == arrow::Type::STRING || array_->type_id() == arrow::Type::BINARY) {
      plain_ = static_cast<const arrow::BinaryArray*>(array_.get());
    }
    return reader_.Bind(array_);
  }

  uint64_t Upsert(int64_t row, uint64_t location) override {
    auto key = reader_.Get(row);
    if (!key) {
      uint64_t prev = null_location_;
      null_location_ = location;
      return prev;
    }
    return map_.Upsert(*key, BytesLocationMap::Hash(*key), location);
  }

  void UpsertAll(int64_t n, uint64_t base, uint64_t* prev) override {
    const bool any_null = ViewAndHash(n);
    map_.UpsertBatch(keys_.views.data(), keys_.hashes.data(), n, base, prev,
                     any_null ? keys_.nulls.data() : nullptr);
    if (!any_null) return;
    // Null keys form one key of their own, upserted in row order.
    for (int64_t i = 0; i < n; ++i) {
      if (keys_.nulls[i]) {
        prev[i] = null_location_;
        null_location_ = base + static_cast<uint64_t>(i);
      }
    }
  }

  void RelocateAll(int64_t n, const uint64_t* old, uint64_t base, uint64_t*) override {
    const bool any_null = ViewAndHash(n);
    map_.RelocateBatch(keys_.views.data(), keys_.hashes.data(), old, n, base,
                       any_null ? keys_.nulls.data() : nullptr);
    if (!any_null) return;
    // The null key, as UpsertAll maps it (a table holds at most one live row of it).
    for (int64_t i = 0; i < n; ++i) {
      if (keys_.nulls[i]) null_location_ = base + static_cast<uint64_t>(i);
    }
  }

  void Erase(int64_t row, uint64_t location) override {
    auto key = reader_.Get(row);
    if (!key) {
      if (null_location_ == location) null_location_ = kNone;
      return;
    }
    map_.Erase(*key, BytesLocationMap::Hash(*key), location);
  }

  void FindAll(int64_t n, uint64_t* out) override {
    for (int64_t i = 0; i < n; ++i) {
      auto key = reader_.Get(i);
      out[i] = key ? map_.Find(*key, BytesLocationMap::Hash(*key)) : null_location_;
    }
  }

  void Clear() override {
    map_.Clear();
    null_location_ = kNone;
  }
  size_t size() const override { return map_.size() + (null_location_ != kNone ? 1 : 0); }

 private:
  /// Fill keys_ with the views and hashes of rows [0, n); return whether any is null.
  bool ViewAndHash(int64_t n) {
    keys_.Resize(n);
    keys_.nulls.assign(n, 0);
    bool any_null = false;
    if (plain_ != nullptr && plain_->null_count() == 0) {
      // The common case: offsets and bytes read directly, no per-row dispatch.
      const int32_t* offsets = plain_->raw_value_offsets();
      const char* data = reinterpret_cast<const char*>(plain_->raw_data());
      for (int64_t i = 0; i < n; ++i) {
        keys_.views[i] = std::string_view(data + offsets[i], offsets[i + 1] - offsets[i]);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        auto key = reader_.Get(i);
        if (key) {
          keys_.views[i] = *key;
        } else {
          keys_.views[i] = std::string_view();
          keys_.nulls[i] = 1;
          any_null = true;
        }
      }
    }
    keys_.HashAll();
    return any_null;
  }

  const int column_;
  BytesLocationMap map_;
  uint64_t null_location_ = kNone;
  std::shared_ptr<arrow::Array> array_;
  const arrow::BinaryArray* plain_ = nullptr;
  StringReader reader_;
  KeyBatch keys_;
};

/// Composite keys and other fixed-width types: each column is encoded as a tag
/// byte (0 null, 1 value) followed by its bytes (length-prefixed for strings).
/// A batch is encoded into one buffer, hashed once, then probed as string keys.
class EncodedKeyIndex final : public KeyIndex {
 public:
  explicit EncodedKeyIndex(std::vector<int> columns) : columns_(std::move(columns)) {}

  Status Bind(const arrow::RecordBatch& batch) override {
    parts_.clear();
    for (int c : columns_) {
      Part part;
      part.array = batch.column(c);
      const auto& type = *part.array->type();
      if (IsStringLike(type)) {
        part.is_string = true;
        RILL_RETURN_NOT_OK(part.strings.Bind(part.array));
      } else if (type.id() == arrow::Type::BOOL) {
        part.is_bool = true;
      } else {
        part.width = type.byte_width();
        part.data = part.array->data()->GetValues<uint8_t>(1, 0);
        part.offset = part.array->offset();
      }
      parts_.push_back(std::move(part));
    }
    return Status::OK();
  }

  uint64_t Upsert(int64_t row, uint64_t location) override {
    scratch_.clear();
    Encode(row, &scratch_);
    return map_.Upsert(scratch_, BytesLocationMap::Hash(scratch_), location);
  }

  void UpsertAll(int64_t n, uint64_t base, uint64_t* prev) override {
    EncodeAndHash(n);
    map_.UpsertBatch(keys_.views.data(), keys_.hashes.data(), n, base, prev);
  }

  void RelocateAll(int64_t n, const uint64_t* old, uint64_t base, uint64_t*) override {
    EncodeAndHash(n);
    map_.RelocateBatch(keys_.views.data(), keys_.hashes.data(), old, n, base);
  }

  void Erase(int64_t row, uint64_t location) override {
    scratch_.clear();
    Encode(row, &scratch_);
    map_.Erase(scratch_, BytesLocationMap::Hash(scratch_), location);
  }

  void FindAll(int64_t n, uint64_t* out) override {
    for (int64_t i = 0; i < n; ++i) {
      scratch_.clear();
      Encode(i, &scratch_);
      out[i] = map_.Find(scratch_, BytesLocationMap::Hash(scratch_));
    }
  }

  void Clear() override { map_.Clear(); }
  size_t size() const override { return map_.size(); }

 private:
  struct Part {
    std::shared_ptr<arrow::Array> array;
    bool is_string = false;
    bool is_bool = false;
    int width = 0;
    const uint8_t* data = nullptr;
    int64_t offset = 0;
    StringReader strings;
  };

  /// Fill keys_ with the encoded keys of rows [0, n) and their hashes.
  void EncodeAndHash(int64_t n) {
    scratch_.clear();
    ends_.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      Encode(i, &scratch_);
      ends_[i] = scratch_.size();
    }
    // Views only once the buffer has stopped growing.
    keys_.Resize(n);
    size_t begin = 0;
    for (int64_t i = 0; i < n; ++i) {
      keys_.views[i] = std::string_view(scratch_.data() + begin, ends_[i] - begin);
      begin = ends_[i];
    }
    keys_.HashAll();
  }

  void Encode(int64_t row, std::string* out) const {
    for (const auto& part : parts_) {
      if (part.is_string) {
        auto v = part.strings.Get(row);
        if (!v) {
          out->push_back('\0');
          continue;
        }
        out->push_back('\1');
        uint32_t len = static_cast<uint32_t>(v->size());
        out->append(reinterpret_cast<const char*>(&len), sizeof(len));
        out->append(v->data(), v->size());
      } else if (part.array->IsNull(row)) {
        out->push_back('\0');
      } else if (part.is_bool) {
        out->push_back('\1');
        out->push_back(static_cast<const arrow::BooleanArray&>(*part.array).Value(row) ? 1 : 0);
      } else {
        out->push_back('\1');
        out->append(reinterpret_cast<const char*>(part.data + (part.offset + row) * part.width),
                    part.width);
      }
    }
  }

  std::vector<int> columns_;
  std::vector<Part> parts_;
  std::string scratch_;
  std::vector<size_t> ends_;
  KeyBatch keys_;
  BytesLocationMap map_;
};

}  // namespace

Result<std::unique_ptr<KeyIndex>> KeyIndex::Make(const arrow::Schema& schema,
                                                 std::vector<int> key_columns) {
  if (key_columns.empty()) {
    return Status::Invalid("A key index needs at least one column");
  }
  for (int c : key_columns) {
    const auto& field = schema.field(c);
    const auto& type = *field->type();
    bool fixed = type.byte_width() > 0 && type.id() != arrow::Type::DICTIONARY;
    if (!IsStringLike(type) && !fixed && type.id() != arrow::Type::BOOL) {
      return Status::TypeError("Primary key column '", field->name(), "' has type ",
                               type.ToString(), ", which cannot be used as a key");
    }
  }
  if (key_columns.size() == 1) {
    const auto& type = *schema.field(key_columns[0])->type();
    if (IsIntegerLike(type)) {
      return std::make_unique<IntKeyIndex>(key_columns[0]);
    }
    if (IsStringLike(type)) {
      return std::make_unique<StringKeyIndex>(key_columns[0]);
    }
  }
  return std::make_unique<EncodedKeyIndex>(std::move(key_columns));
}

}  // namespace rill
