#include "rill/table/gather_internal.h"

#include <cstring>
#include <limits>

#include <arrow/array.h>
#include <arrow/array/concatenate.h>
#include <arrow/buffer.h>
#include <arrow/compute/api_vector.h>
#include <arrow/compute/exec.h>
#include <arrow/record_batch.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/bitmap_ops.h>

namespace rill::table_internal {
namespace {

/// Which rows of one part survive: all of them, or the listed ones.
struct Selection {
  int64_t length = 0;          // rows in the part's batch
  bool all = true;             // every row survives; `rows` is empty
  std::vector<uint32_t> rows;  // ascending, when !all

  int64_t count() const { return all ? length : static_cast<int64_t>(rows.size()); }
};

Result<Selection> Select(const GatherPart& part) {
  Selection sel;
  sel.length = part.batch->num_rows();
  if (!part.alive) return sel;
  sel.all = false;
  sel.rows.reserve(static_cast<size_t>(part.live_rows));
  const uint8_t* bits = part.alive->data();
  const int64_t words = sel.length / 64;
  for (int64_t w = 0; w < words; ++w) {
    uint64_t word;
    std::memcpy(&word, bits + w * 8, 8);  // little-endian: bit i of the word = row 64w + i
    while (word != 0) {
      sel.rows.push_back(static_cast<uint32_t>(w * 64 + __builtin_ctzll(word)));
      word &= word - 1;
    }
  }
  for (int64_t i = words * 64; i < sel.length; ++i) {
    if (arrow::bit_util::GetBit(bits, i)) sel.rows.push_back(static_cast<uint32_t>(i));
  }
  if (static_cast<int64_t>(sel.rows.size()) != part.live_rows) {
    return Status::Invalid("alive bitmap has ", sel.rows.size(), " rows set, expected ",
                           part.live_rows);
  }
  if (part.live_rows == sel.length) {
    sel.all = true;
    sel.rows.clear();
  }
  return sel;
}

/// How a column is gathered.
enum class Kind { kFixed, kBoolean, kBinary32, kBinary64, kFallback };

Kind KindOf(const arrow::DataType& type, int* byte_width) {
  if (type.id() == arrow::Type::DICTIONARY) {
    // The indices; the caller checks that every part shares one dictionary.
    return KindOf(*static_cast<const arrow::DictionaryType&>(type).index_type(), byte_width);
  }
  switch (type.id()) {
    case arrow::Type::BOOL:
      return Kind::kBoolean;
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
      return Kind::kBinary32;
    case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY:
      return Kind::kBinary64;
    case arrow::Type::EXTENSION:
    case arrow::Type::NA:
      return Kind::kFallback;
    default:
      break;
  }
  const auto* fixed = dynamic_cast<const arrow::FixedWidthType*>(&type);
  if (fixed == nullptr || fixed->bit_width() % 8 != 0 || fixed->bit_width() == 0) {
    return Kind::kFallback;
  }
  *byte_width = fixed->bit_width() / 8;
  return Kind::kFixed;
}

template <int W>
void GatherFixedWidth(const uint8_t* in, const Selection& sel, uint8_t* out) {
  for (uint32_t r : sel.rows) {
    std::memcpy(out, in + static_cast<int64_t>(r) * W, W);
    out += W;
  }
}

void GatherFixed(const uint8_t* in, int width, const Selection& sel, uint8_t* out) {
  if (sel.all) {
    std::memcpy(out, in, static_cast<size_t>(sel.length) * width);
    return;
  }
  switch (width) {
    case 1: return GatherFixedWidth<1>(in, sel, out);
    case 2: return GatherFixedWidth<2>(in, sel, out);
    case 4: return GatherFixedWidth<4>(in, sel, out);
    case 8: return GatherFixedWidth<8>(in, sel, out);
    case 16: return GatherFixedWidth<16>(in, sel, out);
    case 32: return GatherFixedWidth<32>(in, sel, out);
    default:
      for (uint32_t r : sel.rows) {
        std::memcpy(out, in + static_cast<int64_t>(r) * width, width);
        out += width;
      }
  }
}

/// Copy the selected bits of `in` (starting at bit `in_offset`) to `out` from
/// bit `out_offset`; a null `in` means all bits set.
void GatherBits(const uint8_t* in, int64_t in_offset, const Selection& sel, uint8_t* out,
                int64_t out_offset) {
  if (in == nullptr) {
    arrow::bit_util::SetBitsTo(out, out_offset, sel.count(), true);
  } else if (sel.all) {
    arrow::internal::CopyBitmap(in, in_offset, sel.length, out, out_offset);
  } else {
    int64_t pos = out_offset;
    for (uint32_t r : sel.rows) {
      arrow::bit_util::SetBitTo(out, pos++, arrow::bit_util::GetBit(in, in_offset + r));
    }
  }
}

template <typename Offset>
Result<std::vector<std::shared_ptr<arrow::Buffer>>> GatherBinary(
    const std::vector<const arrow::ArrayData*>& inputs, const std::vector<Selection>& sels,
    int64_t total, arrow::MemoryPool* pool) {
  RILL_ASSIGN_OR_RAISE(auto offsets_buf,
                       arrow::AllocateBuffer((total + 1) * sizeof(Offset), pool));
  auto* out_offsets = reinterpret_cast<Offset*>(offsets_buf->mutable_data());
  // Pass 1: output offsets.
  int64_t bytes = 0;
  int64_t pos = 0;
  for (size_t p = 0; p < inputs.size(); ++p) {
    const Selection& sel = sels[p];
    if (sel.count() == 0) continue;  // empty arrays may lack buffers
    const Offset* in = inputs[p]->GetValues<Offset>(1);
    if (sel.all) {
      const Offset first = in[0];
      for (int64_t i = 0; i < sel.length; ++i) {
        out_offsets[pos++] = static_cast<Offset>(bytes + (in[i] - first));
      }
      bytes += in[sel.length] - first;
    } else {
      for (uint32_t r : sel.rows) {
        out_offsets[pos++] = static_cast<Offset>(bytes);
        bytes += in[r + 1] - in[r];
      }
    }
    if (bytes > std::numeric_limits<Offset>::max()) {
      return Status::CapacityError("compaction: string column exceeds ",
                                   std::numeric_limits<Offset>::max(), " bytes");
    }
  }
  out_offsets[pos] = static_cast<Offset>(bytes);
  // Pass 2: the bytes.
  RILL_ASSIGN_OR_RAISE(auto data_buf, arrow::AllocateBuffer(bytes, pool));
  uint8_t* out = data_buf->mutable_data();
  for (size_t p = 0; p < inputs.size(); ++p) {
    const Selection& sel = sels[p];
    if (sel.count() == 0) continue;
    const Offset* in = inputs[p]->GetValues<Offset>(1);
    const uint8_t* data = inputs[p]->buffers[2] ? inputs[p]->buffers[2]->data() : nullptr;
    if (sel.all) {
      const int64_t n = in[sel.length] - in[0];
      if (n > 0) std::memcpy(out, data + in[0], static_cast<size_t>(n));
      out += n;
    } else {
      for (uint32_t r : sel.rows) {
        const int64_t n = in[r + 1] - in[r];
        std::memcpy(out, data + in[r], static_cast<size_t>(n));
        out += n;
      }
    }
  }
  return std::vector<std::shared_ptr<arrow::Buffer>>{std::move(offsets_buf),
                                                     std::move(data_buf)};
}

Result<std::shared_ptr<arrow::Array>> GatherFallback(const std::vector<GatherPart>& parts,
                                                     int column, arrow::MemoryPool* pool) {
  arrow::ArrayVector pieces;
  arrow::compute::ExecContext ctx(pool);
  for (const auto& part : parts) {
    auto array = part.batch->column(column);
    if (part.alive && part.live_rows < array->length()) {
      auto mask = std::make_shared<arrow::BooleanArray>(array->length(), part.alive);
      RILL_ASSIGN_OR_RAISE(auto filtered,
                           arrow::compute::Filter(array, mask, arrow::compute::FilterOptions(),
                                                  &ctx));
      array = filtered.make_array();
    }
    pieces.push_back(std::move(array));
  }
  if (pieces.size() == 1) return pieces[0];
  return arrow::Concatenate(pieces, pool);
}

}  // namespace

Result<std::shared_ptr<arrow::RecordBatch>> GatherLiveRows(
    const std::shared_ptr<arrow::Schema>& schema, const std::vector<GatherPart>& parts,
    arrow::MemoryPool* pool) {
  std::vector<Selection> sels;
  sels.reserve(parts.size());
  int64_t total = 0;
  for (const auto& part : parts) {
    RILL_ASSIGN_OR_RAISE(auto sel, Select(part));
    sels.push_back(std::move(sel));
    total += sels.back().count();
  }
  if (total == 0) {
    return arrow::RecordBatch::MakeEmpty(schema, pool);
  }
  arrow::ArrayVector columns;
  columns.reserve(schema->num_fields());
  std::vector<const arrow::ArrayData*> inputs(parts.size());
  for (int c = 0; c < schema->num_fields(); ++c) {
    const auto& type = schema->field(c)->type();
    int width = 0;
    Kind kind = KindOf(*type, &width);
    // Dictionary indices are gathered like integers when every part shares
    // one dictionary object; parts with different dictionaries need Arrow's
    // Concatenate, which unifies them.
    std::shared_ptr<arrow::ArrayData> dictionary;
    if (type->id() == arrow::Type::DICTIONARY) {
      dictionary = parts[0].batch->column_data(c)->dictionary;
      for (const auto& part : parts) {
        if (part.batch->column_data(c)->dictionary != dictionary) kind = Kind::kFallback;
      }
    }
    if (kind == Kind::kFallback) {
      RILL_ASSIGN_OR_RAISE(auto array, GatherFallback(parts, c, pool));
      columns.push_back(std::move(array));
      continue;
    }
    bool any_nulls = false;
    for (size_t p = 0; p < parts.size(); ++p) {
      inputs[p] = parts[p].batch->column_data(c).get();
      any_nulls = any_nulls || inputs[p]->GetNullCount() > 0;
    }
    // Validity.
    std::shared_ptr<arrow::Buffer> validity;
    int64_t null_count = 0;
    if (any_nulls) {
      RILL_ASSIGN_OR_RAISE(validity, arrow::AllocateBitmap(total, pool));
      int64_t pos = 0;
      for (size_t p = 0; p < parts.size(); ++p) {
        if (sels[p].count() == 0) continue;
        const arrow::ArrayData& in = *inputs[p];
        const uint8_t* bits =
            in.GetNullCount() > 0 && in.buffers[0] ? in.buffers[0]->data() : nullptr;
        GatherBits(bits, in.offset, sels[p], validity->mutable_data(), pos);
        pos += sels[p].count();
      }
      null_count = total - arrow::internal::CountSetBits(validity->data(), 0, total);
    }
    std::vector<std::shared_ptr<arrow::Buffer>> buffers{validity};
    if (kind == Kind::kFixed || kind == Kind::kBoolean) {
      std::shared_ptr<arrow::Buffer> values;
      if (kind == Kind::kFixed) {
        RILL_ASSIGN_OR_RAISE(auto fixed, arrow::AllocateBuffer(total * width, pool));
        values = std::move(fixed);
      } else {
        RILL_ASSIGN_OR_RAISE(values, arrow::AllocateBitmap(total, pool));
      }
      int64_t pos = 0;
      for (size_t p = 0; p < parts.size(); ++p) {
        if (sels[p].count() == 0) continue;
        const arrow::ArrayData& in = *inputs[p];
        if (kind == Kind::kFixed) {
          GatherFixed(in.buffers[1]->data() + in.offset * width, width, sels[p],
                      values->mutable_data() + pos * width);
        } else {
          GatherBits(in.buffers[1]->data(), in.offset, sels[p], values->mutable_data(), pos);
        }
        pos += sels[p].count();
      }
      buffers.push_back(std::move(values));
    } else {
      // Offsets buffers are read through GetValues, which applies the array offset.
      Result<std::vector<std::shared_ptr<arrow::Buffer>>> out =
          kind == Kind::kBinary32 ? GatherBinary<int32_t>(inputs, sels, total, pool)
                                  : GatherBinary<int64_t>(inputs, sels, total, pool);
      if (!out.ok()) return out.status();
      for (auto& b : *out) buffers.push_back(std::move(b));
    }
    auto data = arrow::ArrayData::Make(type, total, std::move(buffers), null_count);
    data->dictionary = std::move(dictionary);
    columns.push_back(arrow::MakeArray(std::move(data)));
  }
  return arrow::RecordBatch::Make(schema, total, std::move(columns));
}

}  // namespace rill::table_internal
