// WindowOperator: group keys as 64-bit codes (KeyCodes, EncodeKey). See
// window_operator_internal.h.
#include <arrow/array.h>

#include "rill/engine/window_operator_internal.h"

namespace rill {

using window_internal::InputColumn;
using window_internal::KeyCodes;
using window_internal::ValueKind;

namespace window_internal {

void EncodeKey(const std::vector<InputColumn>& keys, int64_t i, std::string* out) {
  for (const auto& k : keys) {
    if (!k.IsValid(i)) {
      out->push_back('\0');
      continue;
    }
    out->push_back('\1');
    switch (k.kind) {
      case ValueKind::kInt:
        out->append(reinterpret_cast<const char*>(&k.i64[i]), 8);
        break;
      case ValueKind::kDouble: {
        double d = k.f64[i];
        if (d == 0) d = 0;  // -0.0 groups with 0.0
        out->append(reinterpret_cast<const char*>(&d), 8);
        break;
      }
      case ValueKind::kString: {
        const std::string_view s = k.str->GetView(i);
        const uint32_t len = static_cast<uint32_t>(s.size());
        out->append(reinterpret_cast<const char*>(&len), 4);
        out->append(s.data(), s.size());
        break;
      }
    }
  }
}

uint32_t KeyCodes::Intern(const std::string& key) {
  auto [it, inserted] = ids_.try_emplace(key, 0);
  if (!inserted) return it->second;
  uint32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
    keys_[id] = key;
  } else {
    id = static_cast<uint32_t>(keys_.size());
    keys_.push_back(key);
    refs_.push_back(0);
  }
  it->second = id;
  ++dead_;  // no group uses it yet
  bytes_ += static_cast<int64_t>(2 * key.size() + 48);
  return id;
}

void KeyCodes::MaybeSweep() {
  const int64_t live = static_cast<int64_t>(ids_.size()) - dead_;
  if (mode_ != Mode::kEncoded || dead_ < 4096 || dead_ <= live) return;
  boost::unordered_flat_map<std::string, uint32_t, KeyHash> kept;
  kept.reserve(static_cast<size_t>(live) * 2);
  for (auto& [key, id] : ids_) {
    if (refs_[id] > 0) {
      kept.emplace(key, id);
      continue;
    }
    bytes_ -= static_cast<int64_t>(2 * key.size() + 48);
    std::string().swap(keys_[id]);
    free_ids_.push_back(id);
  }
  ids_ = std::move(kept);
  dead_ = 0;
}

}  // namespace window_internal

void WindowOperator::Impl::ComputeCodes(int64_t n) {
  row_codes.resize(n);
  row_nulls.assign(n, 0);
  switch (codes.mode()) {
    case KeyCodes::Mode::kNone:
      std::fill(row_codes.begin(), row_codes.end(), 0);
      return;
    case KeyCodes::Mode::kInt: {
      const InputColumn& k = in.keys[0];
      std::memcpy(row_codes.data(), k.i64, static_cast<size_t>(n) * sizeof(int64_t));
      if (k.has_nulls) {
        for (int64_t r = 0; r < n; ++r) row_nulls[r] = k.IsValid(r) ? 0 : 1;
      }
      return;
    }
    case KeyCodes::Mode::kEncoded:
      for (int64_t r = 0; r < n; ++r) {
        if (row_late[r]) continue;  // late: no key
        key_buf.clear();
        window_internal::EncodeKey(in.keys, r, &key_buf);
        row_codes[r] = codes.Intern(key_buf);
      }
      return;
  }
}

}  // namespace rill
