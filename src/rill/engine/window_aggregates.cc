// Incremental window aggregates. See window_aggregates_internal.h.
#include "rill/engine/window_aggregates_internal.h"

#include <cmath>
#include <new>
#include <cstring>
#include <functional>
#include <string_view>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/compute/cast.h>
#include <arrow/type.h>
#include <arrow/type_traits.h>
#include <arrow/util/bit_util.h>
#include <boost/unordered/unordered_flat_set.hpp>

namespace rill::window_internal {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

uint64_t DoubleBits(double d) {
  if (d == 0) d = 0;  // -0.0 and 0.0 are one value
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof(bits));
  return bits;
}

// How each storage type reads an input row and builds its output.
template <typename T>
struct Traits;

template <>
struct Traits<int64_t> {
  using Builder = arrow::Int64Builder;
  static int64_t Get(const InputColumn& in, int64_t i) { return in.i64[i]; }
  static int64_t Bytes(const int64_t&) { return 0; }
};

template <>
struct Traits<double> {
  using Builder = arrow::DoubleBuilder;
  static double Get(const InputColumn& in, int64_t i) {
    return in.kind == ValueKind::kInt ? static_cast<double>(in.i64[i]) : in.f64[i];
  }
  static int64_t Bytes(const double&) { return 0; }
};

template <>
struct Traits<std::string> {
  using Builder = arrow::StringBuilder;
  static std::string_view Get(const InputColumn& in, int64_t i) { return in.str->GetView(i); }
  static int64_t Bytes(const std::string& s) {
    return s.capacity() > 15 ? static_cast<int64_t>(s.capacity()) : 0;
  }
};

// Build the values of `gids`: value(g) where has(g), null elsewhere.
template <typename T, typename H, typename F>
Result<std::shared_ptr<arrow::Array>> BuildArray(const std::vector<uint32_t>& gids,
                                                 arrow::MemoryPool* pool, H&& has, F&& value) {
  const int64_t n = static_cast<int64_t>(gids.size());
  if constexpr (std::is_same_v<T, std::string>) {
    typename Traits<T>::Builder builder(pool);
    RILL_RETURN_NOT_OK(builder.Reserve(n));
    for (uint32_t g : gids) {
      RILL_RETURN_NOT_OK(has(g) ? builder.Append(value(g)) : builder.AppendNull());
    }
    std::shared_ptr<arrow::Array> out;
    RILL_RETURN_NOT_OK(builder.Finish(&out));
    return out;
  } else {
    // Values straight into the buffer; a validity bitmap only when some group
    // has no value (rare: most aggregates saw a row).
    RILL_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> values,
                         arrow::AllocateBuffer(n * static_cast<int64_t>(sizeof(T)), pool));
    T* out = reinterpret_cast<T*>(values->mutable_data());
    int64_t nulls = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t g = gids[i];
      const bool h = has(g);
      out[i] = h ? T(value(g)) : T();
      nulls += h ? 0 : 1;
    }
    std::shared_ptr<arrow::Buffer> validity;
    if (nulls > 0) {
      RILL_ASSIGN_OR_RAISE(validity, arrow::AllocateBitmap(n, pool));
      uint8_t* bits = validity->mutable_data();
      for (int64_t i = 0; i < n; ++i) arrow::bit_util::SetBitTo(bits, i, has(gids[i]));
    }
    using ArrowType = typename arrow::CTypeTraits<T>::ArrowType;
    return arrow::MakeArray(arrow::ArrayData::Make(
        arrow::TypeTraits<ArrowType>::type_singleton(), n, {std::move(validity), std::move(values)},
        nulls));
  }
}

class CountState : public AggState {
 public:
  explicit CountState(bool star) : star_(star) {}
  void Grow(size_t n) override { n_.resize(n, 0); }
  void Reset(uint32_t g) override { n_[g] = 0; }
  void ResetRange(uint32_t first, uint32_t n) override {
    for (uint32_t g = first; g < first + n; ++g) CountState::Reset(g);
  }
  void Update(const uint32_t* gids, const int64_t* rows, size_t n, const InputColumn* in,
              const int64_t*, int64_t) override {
    if (star_ || !in->has_nulls) {
      for (size_t i = 0; i < n; ++i) ++n_[gids[i]];
      return;
    }
    for (size_t i = 0; i < n; ++i) n_[gids[i]] += in->IsValid(rows[i]) ? 1 : 0;
  }
  void Merge(uint32_t into, uint32_t from) override { n_[into] += n_[from]; }
  Result<std::shared_ptr<arrow::Array>> Finish(const std::vector<uint32_t>& gids,
                                               arrow::MemoryPool* pool) override {
    return BuildArray<int64_t>(gids, pool, [](uint32_t) { return true; },
                               [&](uint32_t g) { return n_[g]; });
  }
  int64_t variable_bytes() const override { return 0; }
  int64_t slot_bytes() const override { return sizeof(int64_t); }

 private:
  bool star_;
  std::vector<int64_t> n_;
};

// sum (T = int64 or double, the input's kind) and avg (T = double, divided on output).
template <typename T, bool kAvg>
class SumState : public AggState {
 public:
  void Grow(size_t n) override {
    sum_.resize(n, 0);
    nn_.resize(n, 0);
  }
  void Reset(uint32_t g) override {
    sum_[g] = 0;
    nn_[g] = 0;
  }
  void ResetRange(uint32_t first, uint32_t n) override {
    for (uint32_t g = first; g < first + n; ++g) SumState::Reset(g);
  }
  void Update(const uint32_t* gids, const int64_t* rows, size_t n, const InputColumn* in,
              const int64_t*, int64_t) override {
    for (size_t i = 0; i < n; ++i) {
      if (in->has_nulls && !in->IsValid(rows[i])) continue;
      sum_[gids[i]] += Traits<T>::Get(*in, rows[i]);
      ++nn_[gids[i]];
    }
  }
  void Merge(uint32_t into, uint32_t from) override {
    sum_[into] += sum_[from];
    nn_[into] += nn_[from];
  }
  Result<std::shared_ptr<arrow::Array>> Finish(const std::vector<uint32_t>& gids,
                                               arrow::MemoryPool* pool) override {
    auto has = [&](uint32_t g) { return nn_[g] > 0; };
    if constexpr (kAvg) {
      return BuildArray<double>(gids, pool, has,
                                [&](uint32_t g) { return sum_[g] / nn_[g]; });
    } else {
      return BuildArray<T>(gids, pool, has, [&](uint32_t g) { return sum_[g]; });
    }
  }
  int64_t variable_bytes() const override { return 0; }
  int64_t slot_bytes() const override { return sizeof(T) + sizeof(int64_t); }

 private:
  std::vector<T> sum_;
  std::vector<int64_t> nn_;
};

template <typename T, bool kMax>
class MinMaxState : public AggState {
 public:
  void Grow(size_t n) override {
    v_.resize(n);
    has_.resize(n, 0);
  }
  void Reset(uint32_t g) override {
    bytes_ -= Traits<T>::Bytes(v_[g]);
    v_[g] = T();
    has_[g] = 0;
  }
  void ResetRange(uint32_t first, uint32_t n) override {
    for (uint32_t g = first; g < first + n; ++g) MinMaxState::Reset(g);
  }
  void Update(const uint32_t* gids, const int64_t* rows, size_t n, const InputColumn* in,
              const int64_t*, int64_t) override {
    for (size_t i = 0; i < n; ++i) {
      if (in->has_nulls && !in->IsValid(rows[i])) continue;
      if constexpr (std::is_same_v<T, std::string>) {
        Offer(gids[i], Traits<T>::Get(*in, rows[i]));
      } else {
        // Numbers: a select instead of a branch (new groups and better values
        // come in no predictable order).
        const uint32_t g = gids[i];
        const T value = Traits<T>::Get(*in, rows[i]);
        const bool take = !has_[g] || Better(value, v_[g]);
        v_[g] = take ? value : v_[g];
        has_[g] = 1;
      }
    }
  }
  void Merge(uint32_t into, uint32_t from) override {
    if (has_[from]) Offer(into, v_[from]);
    Reset(from);
  }
  Result<std::shared_ptr<arrow::Array>> Finish(const std::vector<uint32_t>& gids,
                                               arrow::MemoryPool* pool) override {
    return BuildArray<T>(gids, pool, [&](uint32_t g) { return has_[g] != 0; },
                         [&](uint32_t g) -> const T& { return v_[g]; });
  }
  int64_t variable_bytes() const override { return bytes_; }
  int64_t slot_bytes() const override { return sizeof(T) + 1; }

 private:
  // Whether `value` replaces `current`. NaN compares false both ways; like
  // DuckDB, treat it as the largest value.
  template <typename V>
  static bool Better(const V& value, const T& current) {
    if constexpr (std::is_same_v<T, double>) {
      const bool vn = std::isnan(value), cn = std::isnan(current);
      return kMax ? (vn && !cn) || (!vn && !cn && value > current)
                  : (cn && !vn) || (!vn && !cn && value < current);
    } else {
      return kMax ? value > current : value < current;
    }
  }
  template <typename V>
  void Offer(uint32_t g, const V& value) {
    const bool better = Better(value, v_[g]);
    if (!has_[g] || better) {
      bytes_ -= Traits<T>::Bytes(v_[g]);
      v_[g] = T(value);
      bytes_ += Traits<T>::Bytes(v_[g]);
      has_[g] = 1;
    }
  }
  std::vector<T> v_;
  std::vector<uint8_t> has_;
  int64_t bytes_ = 0;
};

// first / last non-null value by event time; ties go to the earlier (first) or
// later (last) arrival.
template <typename T, bool kLast>
class FirstLastState : public AggState {
 public:
  void Grow(size_t n) override {
    v_.resize(n);
    t_.resize(n, 0);
    seq_.resize(n, 0);
    has_.resize(n, 0);
  }
  void Reset(uint32_t g) override {
    bytes_ -= Traits<T>::Bytes(v_[g]);
    v_[g] = T();
    has_[g] = 0;
  }
  void ResetRange(uint32_t first, uint32_t n) override {
    for (uint32_t g = first; g < first + n; ++g) FirstLastState::Reset(g);
  }
  void Update(const uint32_t* gids, const int64_t* rows, size_t n, const InputColumn* in,
              const int64_t* times, int64_t seq0) override {
    for (size_t i = 0; i < n; ++i) {
      const int64_t r = rows[i];
      if (in->has_nulls && !in->IsValid(r)) continue;
      Offer(gids[i], Traits<T>::Get(*in, r), times[r], seq0 + r);
    }
  }
  void Merge(uint32_t into, uint32_t from) override {
    if (has_[from]) Offer(into, v_[from], t_[from], seq_[from]);
    Reset(from);
  }
  Result<std::shared_ptr<arrow::Array>> Finish(const std::vector<uint32_t>& gids,
                                               arrow::MemoryPool* pool) override {
    return BuildArray<T>(gids, pool, [&](uint32_t g) { return has_[g] != 0; },
                         [&](uint32_t g) -> const T& { return v_[g]; });
  }
  int64_t variable_bytes() const override { return bytes_; }
  int64_t slot_bytes() const override { return sizeof(T) + 17; }

 private:
  template <typename V>
  void Offer(uint32_t g, const V& value, int64_t t, int64_t seq) {
    const bool better = kLast ? (t > t_[g] || (t == t_[g] && seq > seq_[g]))
                              : (t < t_[g] || (t == t_[g] && seq < seq_[g]));
    if (!has_[g] || better) {
      bytes_ -= Traits<T>::Bytes(v_[g]);
      v_[g] = T(value);
      bytes_ += Traits<T>::Bytes(v_[g]);
      t_[g] = t;
      seq_[g] = seq;
      has_[g] = 1;
    }
  }
  std::vector<T> v_;
  std::vector<int64_t> t_;
  std::vector<int64_t> seq_;
  std::vector<uint8_t> has_;
  int64_t bytes_ = 0;
};

// Exact distinct count. Numbers are kept as their 64-bit patterns (ints as
// themselves, floats as bits), strings as strings.
template <typename T>
class DistinctState : public AggState {
 public:
  using Set = boost::unordered_flat_set<T>;
  void Grow(size_t n) override { sets_.resize(n); }
  void Reset(uint32_t g) override {
    if (sets_[g]) bytes_ -= Bytes(*sets_[g]);
    sets_[g].reset();
  }
  void ResetRange(uint32_t first, uint32_t n) override {
    for (uint32_t g = first; g < first + n; ++g) DistinctState::Reset(g);
  }
  void Update(const uint32_t* gids, const int64_t* rows, size_t n, const InputColumn* in,
              const int64_t*, int64_t) override {
    for (size_t i = 0; i < n; ++i) {
      const int64_t r = rows[i];
      if (in->has_nulls && !in->IsValid(r)) continue;
      auto& set = sets_[gids[i]];
      if (!set) set = std::make_unique<Set>();
      const int64_t before = Bytes(*set);
      if constexpr (std::is_same_v<T, std::string>) {
        set->emplace(in->str->GetView(r));
      } else {
        set->insert(in->kind == ValueKind::kInt ? static_cast<uint64_t>(in->i64[r])
                                                : DoubleBits(in->f64[r]));
      }
      bytes_ += Bytes(*set) - before;
    }
  }
  void Merge(uint32_t into, uint32_t from) override {
    if (!sets_[from]) return;
    if (!sets_[into]) sets_[into] = std::make_unique<Set>();
    bytes_ -= Bytes(*sets_[into]);
    for (const auto& v : *sets_[from]) sets_[into]->insert(v);
    bytes_ += Bytes(*sets_[into]);
    Reset(from);
  }
  Result<std::shared_ptr<arrow::Array>> Finish(const std::vector<uint32_t>& gids,
                                               arrow::MemoryPool* pool) override {
    arrow::Int64Builder b(pool);
    RILL_RETURN_NOT_OK(b.Reserve(static_cast<int64_t>(gids.size())));
    for (uint32_t g : gids) b.UnsafeAppend(sets_[g] ? static_cast<int64_t>(sets_[g]->size()) : 0);
    std::shared_ptr<arrow::Array> out;
    RILL_RETURN_NOT_OK(b.Finish(&out));
    return out;
  }
  int64_t variable_bytes() const override { return bytes_; }
  int64_t slot_bytes() const override { return sizeof(void*); }

 private:
  static int64_t Bytes(const Set& s) {
    int64_t b = static_cast<int64_t>(s.bucket_count() * (sizeof(T) + 1)) + 64;
    if constexpr (std::is_same_v<T, std::string>) b += static_cast<int64_t>(s.size()) * 16;
    return b;
  }
  std::vector<std::unique_ptr<Set>> sets_;
  int64_t bytes_ = 0;
};

class ApproxDistinctState : public AggState {
 public:
  void Grow(size_t n) override { sketches_.resize(n); }
  void Reset(uint32_t g) override {
    if (sketches_[g]) bytes_ -= sketches_[g]->bytes();
    sketches_[g].reset();
  }
  void ResetRange(uint32_t first, uint32_t n) override {
    for (uint32_t g = first; g < first + n; ++g) ApproxDistinctState::Reset(g);
  }
  void Update(const uint32_t* gids, const int64_t* rows, size_t n, const InputColumn* in,
              const int64_t*, int64_t) override {
    for (size_t i = 0; i < n; ++i) {
      const int64_t r = rows[i];
      if (in->has_nulls && !in->IsValid(r)) continue;
      auto& sketch = sketches_[gids[i]];
      if (!sketch) sketch = std::make_unique<HyperLogLog>();
      const int64_t before = sketch->bytes();
      sketch->Add(HashValue(*in, r));
      bytes_ += sketch->bytes() - before;
    }
  }
  void Merge(uint32_t into, uint32_t from) override {
    if (!sketches_[from]) return;
    if (!sketches_[into]) sketches_[into] = std::make_unique<HyperLogLog>();
    bytes_ -= sketches_[into]->bytes();
    sketches_[into]->Merge(*sketches_[from]);
    bytes_ += sketches_[into]->bytes();
    Reset(from);
  }
  Result<std::shared_ptr<arrow::Array>> Finish(const std::vector<uint32_t>& gids,
                                               arrow::MemoryPool* pool) override {
    arrow::Int64Builder b(pool);
    RILL_RETURN_NOT_OK(b.Reserve(static_cast<int64_t>(gids.size())));
    for (uint32_t g : gids) b.UnsafeAppend(sketches_[g] ? sketches_[g]->Estimate() : 0);
    std::shared_ptr<arrow::Array> out;
    RILL_RETURN_NOT_OK(b.Finish(&out));
    return out;
  }
  int64_t variable_bytes() const override { return bytes_; }
  int64_t slot_bytes() const override { return sizeof(void*); }

 private:
  std::vector<std::unique_ptr<HyperLogLog>> sketches_;
  int64_t bytes_ = 0;
};

// An aggregation kept in NumericRecords: only Finish does anything here.
class RecordView : public AggState {
 public:
  RecordView(const NumericRecords* records, WindowAggKind fn, ValueKind kind, int column)
      : records_(records), fn_(fn), kind_(kind), column_(column) {}
  void Grow(size_t) override {}
  void Reset(uint32_t) override {}
  void ResetRange(uint32_t, uint32_t) override {}
  void Update(const uint32_t*, const int64_t*, size_t, const InputColumn*, const int64_t*,
              int64_t) override {}
  void Merge(uint32_t, uint32_t) override {}
  Result<std::shared_ptr<arrow::Array>> Finish(const std::vector<uint32_t>& gids,
                                               arrow::MemoryPool* pool) override {
    const NumericRecords& r = *records_;
    auto always = [](uint32_t) { return true; };
    if (fn_ == WindowAggKind::kCountStar) {
      const int w = r.count_word();
      return BuildArray<int64_t>(gids, pool, always,
                                 [&](uint32_t g) { return r.record(g)[w].i; });
    }
    const NumericRecords::Column& c = r.column(static_cast<size_t>(column_));
    const int nn = c.nn;
    if (fn_ == WindowAggKind::kCount) {
      return BuildArray<int64_t>(gids, pool, always,
                                 [&](uint32_t g) { return r.record(g)[nn].i; });
    }
    auto has = [&](uint32_t g) { return r.record(g)[nn].i > 0; };
    if (fn_ == WindowAggKind::kAvg) {
      const int w = c.sum_d;
      return BuildArray<double>(gids, pool, has, [&](uint32_t g) {
        const NumericRecords::Word* rec = r.record(g);
        return rec[w].d / static_cast<double>(rec[nn].i);
      });
    }
    const int w = fn_ == WindowAggKind::kMin   ? c.min
                  : fn_ == WindowAggKind::kMax ? c.max
                  : kind_ == ValueKind::kInt   ? c.sum_i
                                               : c.sum_d;
    if (kind_ == ValueKind::kInt) {
      return BuildArray<int64_t>(gids, pool, has, [&](uint32_t g) { return r.record(g)[w].i; });
    }
    return BuildArray<double>(gids, pool, has, [&](uint32_t g) { return r.record(g)[w].d; });
  }
  int64_t variable_bytes() const override { return 0; }
  int64_t slot_bytes() const override { return 0; }  // counted by NumericRecords

 private:
  const NumericRecords* records_;
  WindowAggKind fn_;
  ValueKind kind_;
  int column_;
};

// Whether `value` replaces `current` as the min (kMax: max) of doubles. NaN
// compares false both ways; like DuckDB, treat it as the largest value.
template <bool kMax>
bool BetterDouble(double value, double current) {
  const bool vn = std::isnan(value), cn = std::isnan(current);
  return kMax ? (vn && !cn) || (!vn && !cn && value > current)
              : (cn && !vn) || (!vn && !cn && value < current);
}

template <template <typename, bool> class State, bool kFlag>
Result<std::unique_ptr<AggState>> ByKind(ValueKind kind) {
  switch (kind) {
    case ValueKind::kInt:
      return std::make_unique<State<int64_t, kFlag>>();
    case ValueKind::kDouble:
      return std::make_unique<State<double, kFlag>>();
    case ValueKind::kString:
      return std::make_unique<State<std::string, kFlag>>();
  }
  return Status::Invalid("unknown value kind");
}

constexpr int kHllBits = 12;
constexpr int kHllRegisters = 1 << kHllBits;
constexpr size_t kHllSmall = 64;

}  // namespace

Result<ValueKind> KindOf(const arrow::DataType& type) {
  using arrow::Type;
  switch (type.id()) {
    case Type::BOOL:
    case Type::INT8:
    case Type::INT16:
    case Type::INT32:
    case Type::INT64:
    case Type::UINT8:
    case Type::UINT16:
    case Type::UINT32:
    case Type::UINT64:
    case Type::TIMESTAMP:
    case Type::DATE32:
    case Type::DATE64:
    case Type::TIME32:
    case Type::TIME64:
    case Type::DURATION:
      return ValueKind::kInt;
    case Type::HALF_FLOAT:
    case Type::FLOAT:
    case Type::DOUBLE:
    case Type::DECIMAL128:
    case Type::DECIMAL256:
      return ValueKind::kDouble;
    case Type::STRING:
    case Type::LARGE_STRING:
    case Type::STRING_VIEW:
      return ValueKind::kString;
    case Type::DICTIONARY:
      return KindOf(*static_cast<const arrow::DictionaryType&>(type).value_type());
    default:
      return Status::TypeError("type ", type.ToString(),
                               " cannot be aggregated incrementally (use a DuckDB expression)");
  }
}

bool InputColumn::IsValid(int64_t i) const { return !has_nulls || array->IsValid(i); }

Result<InputColumn> MakeInputColumn(const std::shared_ptr<arrow::Array>& array) {
  InputColumn in;
  RILL_ASSIGN_OR_RAISE(in.kind, KindOf(*array->type()));
  std::shared_ptr<arrow::DataType> target = in.kind == ValueKind::kInt      ? arrow::int64()
                                            : in.kind == ValueKind::kDouble ? arrow::float64()
                                                                            : arrow::utf8();
  in.array = array;
  if (!array->type()->Equals(*target)) {
    arrow::compute::CastOptions options = arrow::compute::CastOptions::Unsafe(target);
    RILL_ASSIGN_OR_RAISE(auto datum, arrow::compute::Cast(array, options));
    in.array = datum.make_array();
  }
  in.has_nulls = in.array->null_count() > 0;
  switch (in.kind) {
    case ValueKind::kInt:
      in.i64 = static_cast<const arrow::Int64Array&>(*in.array).raw_values();
      break;
    case ValueKind::kDouble:
      in.f64 = static_cast<const arrow::DoubleArray&>(*in.array).raw_values();
      break;
    case ValueKind::kString:
      in.str = static_cast<const arrow::StringArray*>(in.array.get());
      break;
  }
  return in;
}

uint64_t HashValue(const InputColumn& in, int64_t i) {
  switch (in.kind) {
    case ValueKind::kInt:
      return Mix(static_cast<uint64_t>(in.i64[i]));
    case ValueKind::kDouble:
      return Mix(DoubleBits(in.f64[i]));
    case ValueKind::kString:
      return Mix(std::hash<std::string_view>()(in.str->GetView(i)));
  }
  return 0;
}

Result<std::unique_ptr<AggState>> MakeAggState(WindowAggKind fn, ValueKind kind) {
  const bool text = kind == ValueKind::kString;
  switch (fn) {
    case WindowAggKind::kCountStar:
      return std::make_unique<CountState>(/*star=*/true);
    case WindowAggKind::kCount:
      return std::make_unique<CountState>(/*star=*/false);
    case WindowAggKind::kSum:
      if (text) break;
      if (kind == ValueKind::kInt) return std::make_unique<SumState<int64_t, false>>();
      return std::make_unique<SumState<double, false>>();
    case WindowAggKind::kAvg:
      if (text) break;
      return std::make_unique<SumState<double, true>>();
    case WindowAggKind::kMin:
      return ByKind<MinMaxState, false>(kind);
    case WindowAggKind::kMax:
      return ByKind<MinMaxState, true>(kind);
    case WindowAggKind::kFirst:
      return ByKind<FirstLastState, false>(kind);
    case WindowAggKind::kLast:
      return ByKind<FirstLastState, true>(kind);
    case WindowAggKind::kCountDistinct:
      if (text) return std::make_unique<DistinctState<std::string>>();
      return std::make_unique<DistinctState<uint64_t>>();
    case WindowAggKind::kApproxCountDistinct:
      return std::make_unique<ApproxDistinctState>();
    case WindowAggKind::kSql:
      return Status::Invalid("SQL aggregations have no incremental state");
  }
  return Status::Invalid("sum and avg need a numeric column, not a string column");
}

// NumericRecords -----------------------------------------------------------------

bool NumericRecords::Fits(WindowAggKind fn, ValueKind kind) {
  switch (fn) {
    case WindowAggKind::kCountStar:
      return true;
    case WindowAggKind::kCount:
    case WindowAggKind::kSum:
    case WindowAggKind::kAvg:
    case WindowAggKind::kMin:
    case WindowAggKind::kMax:
      return kind != ValueKind::kString;
    default:
      return false;
  }
}

std::unique_ptr<AggState> NumericRecords::Add(WindowAggKind fn, ValueKind kind, int input) {
  if (fn == WindowAggKind::kCountStar) {
    if (count_ < 0) count_ = NewWord();
    return std::make_unique<RecordView>(this, fn, kind, -1);
  }
  size_t ci = 0;
  while (ci < columns_.size() && columns_[ci].input != input) ++ci;
  if (ci == columns_.size()) {
    Column c;
    c.input = input;
    c.kind = kind;
    c.nn = NewWord();
    columns_.push_back(c);
  }
  Column& c = columns_[ci];
  switch (fn) {
    case WindowAggKind::kSum:
      if (kind == ValueKind::kInt) {
        if (c.sum_i < 0) c.sum_i = NewWord();
      } else if (c.sum_d < 0) {
        c.sum_d = NewWord();
      }
      break;
    case WindowAggKind::kAvg:
      if (c.sum_d < 0) c.sum_d = NewWord();
      break;
    case WindowAggKind::kMin:
      if (c.min < 0) c.min = NewWord();
      break;
    case WindowAggKind::kMax:
      if (c.max < 0) c.max = NewWord();
      break;
    default:
      break;
  }
  return std::make_unique<RecordView>(this, fn, kind, static_cast<int>(ci));
}

void NumericRecords::Grow(size_t n) {
  if (stride_ > 0) words_.resize(n * static_cast<size_t>(stride_), Word{0});
}

void NumericRecords::Reset(uint32_t g) {
  if (stride_ > 0) std::memset(record(g), 0, sizeof(Word) * static_cast<size_t>(stride_));
}

void NumericRecords::ResetRange(uint32_t first, uint32_t n) {
  if (stride_ > 0 && n > 0) {
    std::memset(record(first), 0, sizeof(Word) * static_cast<size_t>(stride_) * n);
  }
}

// One pass over the rows for every word of column `c` (and count(*) when
// `count` >= 0): each row reads and writes its group's record once.
template <ValueKind kKind>
void NumericRecords::UpdateColumn(const Column& c, const uint32_t* gids, const int64_t* rows,
                                  size_t n, const InputColumn& in, int count) {
  const bool nulls = in.has_nulls;
  // Records of groups made by earlier batches are anywhere: fetch them ahead.
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) __builtin_prefetch(record(gids[i + kAhead]), /*rw=*/1);
    Word* rec = record(gids[i]);
    if (count >= 0) ++rec[count].i;
    const int64_t r = rows[i];
    if (nulls && !in.IsValid(r)) continue;
    const int64_t seen = rec[c.nn].i;
    rec[c.nn].i = seen + 1;
    if constexpr (kKind == ValueKind::kInt) {
      const int64_t v = in.i64[r];
      if (c.sum_i >= 0) {  // wraps on overflow
        rec[c.sum_i].i = static_cast<int64_t>(static_cast<uint64_t>(rec[c.sum_i].i) +
                                              static_cast<uint64_t>(v));
      }
      if (c.sum_d >= 0) rec[c.sum_d].d += static_cast<double>(v);
      // Selects instead of branches: new groups and better values come in no
      // predictable order.
      if (c.min >= 0) {
        const int64_t cur = rec[c.min].i;
        rec[c.min].i = seen == 0 || v < cur ? v : cur;
      }
      if (c.max >= 0) {
        const int64_t cur = rec[c.max].i;
        rec[c.max].i = seen == 0 || v > cur ? v : cur;
      }
    } else {
      const double v = in.f64[r];
      if (c.sum_d >= 0) rec[c.sum_d].d += v;
      if (c.min >= 0) {
        const double cur = rec[c.min].d;
        rec[c.min].d = seen == 0 || BetterDouble<false>(v, cur) ? v : cur;
      }
      if (c.max >= 0) {
        const double cur = rec[c.max].d;
        rec[c.max].d = seen == 0 || BetterDouble<true>(v, cur) ? v : cur;
      }
    }
  }
}

void NumericRecords::Update(const uint32_t* gids, const int64_t* rows, size_t n,
                            const std::vector<std::unique_ptr<InputColumn>>& inputs) {
  int count = count_;
  for (const Column& c : columns_) {
    const InputColumn& in = *inputs[static_cast<size_t>(c.input)];
    if (c.kind == ValueKind::kInt) {
      UpdateColumn<ValueKind::kInt>(c, gids, rows, n, in, count);
    } else {
      UpdateColumn<ValueKind::kDouble>(c, gids, rows, n, in, count);
    }
    count = -1;  // counted once
  }
  if (count >= 0) {
    for (size_t i = 0; i < n; ++i) ++record(gids[i])[count].i;
  }
}

void NumericRecords::Merge(uint32_t into, uint32_t from) {
  if (stride_ == 0) return;
  Word* a = record(into);
  const Word* b = record(from);
  if (count_ >= 0) a[count_].i += b[count_].i;
  for (const Column& c : columns_) {
    const int64_t na = a[c.nn].i, nb = b[c.nn].i;
    if (nb == 0) continue;
    a[c.nn].i = na + nb;
    if (c.sum_i >= 0) {
      a[c.sum_i].i = static_cast<int64_t>(static_cast<uint64_t>(a[c.sum_i].i) +
                                          static_cast<uint64_t>(b[c.sum_i].i));
    }
    if (c.sum_d >= 0) a[c.sum_d].d += b[c.sum_d].d;
    if (c.kind == ValueKind::kInt) {
      if (c.min >= 0 && (na == 0 || b[c.min].i < a[c.min].i)) a[c.min].i = b[c.min].i;
      if (c.max >= 0 && (na == 0 || b[c.max].i > a[c.max].i)) a[c.max].i = b[c.max].i;
    } else {
      if (c.min >= 0 && (na == 0 || BetterDouble<false>(b[c.min].d, a[c.min].d))) {
        a[c.min].d = b[c.min].d;
      }
      if (c.max >= 0 && (na == 0 || BetterDouble<true>(b[c.max].d, a[c.max].d))) {
        a[c.max].d = b[c.max].d;
      }
    }
  }
  Reset(from);
}

// HyperLogLog ------------------------------------------------------------------

void HyperLogLog::Add(uint64_t hash) {
  if (!registers_) {
    for (uint64_t h : small_) {
      if (h == hash) return;
    }
    small_.push_back(hash);
    if (small_.size() >= kHllSmall) Promote();
    return;
  }
  const uint32_t index = static_cast<uint32_t>(hash >> (64 - kHllBits));
  const uint64_t rest = (hash << kHllBits) | (uint64_t{1} << (kHllBits - 1));
  const uint8_t rank = static_cast<uint8_t>(__builtin_clzll(rest) + 1);
  if (rank > registers_[index]) registers_[index] = rank;
}

void HyperLogLog::Promote() {
  registers_.reset(new uint8_t[kHllRegisters]());
  std::vector<uint64_t> small = std::move(small_);
  small_.clear();
  small_.shrink_to_fit();
  for (uint64_t h : small) Add(h);
}

void HyperLogLog::Merge(const HyperLogLog& other) {
  if (!other.registers_) {
    for (uint64_t h : other.small_) Add(h);
    return;
  }
  if (!registers_) Promote();
  for (int i = 0; i < kHllRegisters; ++i) {
    if (other.registers_[i] > registers_[i]) registers_[i] = other.registers_[i];
  }
}

int64_t HyperLogLog::Estimate() const {
  if (!registers_) return static_cast<int64_t>(small_.size());
  const double m = kHllRegisters;
  double sum = 0;
  int zeros = 0;
  for (int i = 0; i < kHllRegisters; ++i) {
    sum += std::ldexp(1.0, -registers_[i]);
    zeros += registers_[i] == 0;
  }
  double estimate = (0.7213 / (1 + 1.079 / m)) * m * m / sum;
  if (estimate <= 2.5 * m && zeros > 0) estimate = m * std::log(m / zeros);
  return static_cast<int64_t>(std::llround(estimate));
}

int64_t HyperLogLog::bytes() const {
  return static_cast<int64_t>(sizeof(*this) + small_.capacity() * sizeof(uint64_t)) +
         (registers_ ? kHllRegisters : 0);
}

}  // namespace rill::window_internal
