#include "rill/sql/string_dictionary_internal.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>
#include <vector>

#include <arrow/array.h>
#include <arrow/array/builder_binary.h>
#include <arrow/buffer.h>
#include <arrow/util/bit_util.h>

namespace rill::sql_internal {
namespace {

// Return the first `n` <= 8 bytes at `p` as a word (the rest zero). Reads a
// whole word when the buffer ends at least 8 bytes after `p`.
inline uint64_t LoadWord(const char* p, size_t n, const char* end) {
  uint64_t w = 0;
  if (end - p >= 8) {
    std::memcpy(&w, p, 8);
    return n >= 8 ? w : w & ((uint64_t{1} << (8 * n)) - 1);  // little-endian
  }
  std::memcpy(&w, p, n);
  return w;
}

// True if `a` and `b` (both in the buffer ending at `end`) are equal.
inline bool Equal(std::string_view a, std::string_view b, const char* end) {
  const size_t n = a.size();
  if (n != b.size()) {
    return false;
  }
  if (n > 8) {
    return std::memcmp(a.data(), b.data(), n) == 0;
  }
  return LoadWord(a.data(), n, end) == LoadWord(b.data(), n, end);
}

// A well-mixed hash (every output bit depends on every input bit; slots take
// the low bits): two word loads for short strings, which most dictionary-worthy
// values are, the standard library's hash for longer ones.
inline uint64_t HashString(std::string_view value, const char* end) {
  const size_t n = value.size();
  uint64_t h;
  if (n > 16) {
    h = std::hash<std::string_view>{}(value);
  } else {
    const uint64_t a = LoadWord(value.data(), std::min<size_t>(n, 8), end);
    const uint64_t b = n > 8 ? LoadWord(value.data() + 8, n - 8, end) : 0;
    h = a * 0x9E3779B97F4A7C15ULL ^ (b + n) * 0xC2B2AE3D27D4EB4FULL;
  }
  // MurmurHash3's finalizer.
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ULL;
  return h ^ (h >> 33);
}

// The distinct values seen so far, in an open-addressing table kept at most
// half full.
class DistinctStrings {
 public:
  explicit DistinctStrings(int64_t max_values) : max_values_(max_values) { Rehash(64); }

  // Return the index of `value`, adding it if new; -1 if adding it would
  // exceed the maximum. `end` is the end of the buffer holding `value`.
  int32_t Find(std::string_view value, const char* end) {
    const size_t mask = slots_.size() - 1;
    const uint64_t hash = HashString(value, end);
    for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
      const int32_t index = slots_[slot];
      if (index < 0) {
        if (static_cast<int64_t>(values_.size()) >= max_values_) {
          return -1;
        }
        const auto added = static_cast<int32_t>(values_.size());
        slots_[slot] = added;
        hashes_[slot] = hash;
        values_.push_back(value);
        if (2 * values_.size() > slots_.size()) {
          Rehash(2 * slots_.size());
        }
        return added;
      }
      if (hashes_[slot] == hash && Equal(values_[index], value, end)) {
        return index;
      }
    }
  }

  // Return the index of the entry standing for null, adding it if new; -1 if
  // adding it would exceed the maximum.
  int32_t FindNull() {
    if (null_index_ < 0) {
      if (static_cast<int64_t>(values_.size()) >= max_values_) {
        return -1;
      }
      null_index_ = static_cast<int32_t>(values_.size());
      values_.emplace_back();
    }
    return null_index_;
  }

  // Values in index order; the null entry (if any) holds an empty view.
  const std::vector<std::string_view>& values() const { return values_; }
  int32_t null_index() const { return null_index_; }

 private:
  // Grow the table to `capacity` slots (a power of two), reinserting all.
  void Rehash(size_t capacity) {
    std::vector<int32_t> old_slots(capacity, -1);
    std::vector<uint64_t> old_hashes(capacity, 0);
    old_slots.swap(slots_);
    old_hashes.swap(hashes_);
    const size_t mask = capacity - 1;
    for (size_t i = 0; i < old_slots.size(); ++i) {
      if (old_slots[i] < 0) {
        continue;
      }
      size_t slot = old_hashes[i] & mask;
      while (slots_[slot] >= 0) {
        slot = (slot + 1) & mask;
      }
      slots_[slot] = old_slots[i];
      hashes_[slot] = old_hashes[i];
    }
  }

  int64_t max_values_;
  int32_t null_index_ = -1;
  std::vector<int32_t> slots_;    // index into values_, or -1
  std::vector<uint64_t> hashes_;  // per slot
  std::vector<std::string_view> values_;
};

template <typename ArrowType>
Result<std::shared_ptr<arrow::Array>> Encode(const arrow::Array& strings,
                                             arrow::MemoryPool* pool) {
  using Offset = typename ArrowType::offset_type;
  const arrow::ArrayData& data = *strings.data();
  const int64_t n = strings.length();
  const int64_t max_values = std::min(kMaxDictionaryValues, (n + 64) / 2);
  const Offset* offsets = data.GetValues<Offset>(1);
  const uint8_t* bytes = data.GetValues<uint8_t>(2, /*absolute_offset=*/0);
  static const uint8_t kEmpty = 0;
  const char* end;
  if (bytes != nullptr) {
    end = reinterpret_cast<const char*>(bytes) + data.buffers[2]->size();
  } else {
    bytes = &kEmpty;  // every value is empty
    end = reinterpret_cast<const char*>(bytes);
  }
  RILL_ASSIGN_OR_RAISE(auto indices_buffer,
                       arrow::AllocateBuffer(n * static_cast<int64_t>(sizeof(int16_t)), pool));
  auto* indices = reinterpret_cast<int16_t*>(indices_buffer->mutable_data());
  DistinctStrings distinct(max_values);
  const bool has_nulls = strings.null_count() > 0;
  for (int64_t i = 0; i < n; ++i) {
    if (has_nulls && strings.IsNull(i)) {
      const int32_t index = distinct.FindNull();
      if (index < 0) {
        return nullptr;
      }
      indices[i] = static_cast<int16_t>(index);
      continue;
    }
    const std::string_view value(reinterpret_cast<const char*>(bytes + offsets[i]),
                                 static_cast<size_t>(offsets[i + 1] - offsets[i]));
    const int32_t index = distinct.Find(value, end);
    if (index < 0) {
      return nullptr;
    }
    indices[i] = static_cast<int16_t>(index);
  }

  typename arrow::TypeTraits<ArrowType>::BuilderType builder(pool);
  int64_t total = 0;
  for (const auto& value : distinct.values()) {
    total += static_cast<int64_t>(value.size());
  }
  RILL_RETURN_NOT_OK(builder.Reserve(static_cast<int64_t>(distinct.values().size())));
  RILL_RETURN_NOT_OK(builder.ReserveData(total));
  const auto& values = distinct.values();
  for (int32_t i = 0; i < static_cast<int32_t>(values.size()); ++i) {
    if (i == distinct.null_index()) {
      builder.UnsafeAppendNull();
    } else {
      builder.UnsafeAppend(values[i]);
    }
  }
  RILL_ASSIGN_OR_RAISE(auto dictionary, builder.Finish());
  // Nulls are a dictionary entry, so the indices have none (DuckDB identifies
  // only dictionaries whose indices are all valid).
  auto index_data = arrow::ArrayData::Make(arrow::int16(), n,
                                           {nullptr, std::move(indices_buffer)}, /*null_count=*/0);
  return std::make_shared<arrow::DictionaryArray>(EncodedStringType(strings.type()),
                                                  arrow::MakeArray(index_data), dictionary);
}

}  // namespace

std::shared_ptr<arrow::DataType> EncodedStringType(
    const std::shared_ptr<arrow::DataType>& value_type) {
  return arrow::dictionary(arrow::int16(), value_type);
}

Result<std::shared_ptr<arrow::Array>> EncodeStringDictionary(const arrow::Array& strings,
                                                             arrow::MemoryPool* pool) {
  switch (strings.type_id()) {
    case arrow::Type::STRING:
      return Encode<arrow::StringType>(strings, pool);
    case arrow::Type::LARGE_STRING:
      return Encode<arrow::LargeStringType>(strings, pool);
    default:
      return Status::Invalid("cannot dictionary-encode a column of type ",
                             strings.type()->ToString());
  }
}


}  // namespace rill::sql_internal
