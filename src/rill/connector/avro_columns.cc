// The Avro decoder's column buffers: made from target fields, rolled back per
// record, finished into ArrayData without copying the value buffers.
#include <arrow/array/data.h>
#include <arrow/buffer.h>
#include <arrow/util/bit_util.h>

#include "rill/connector/avro_decoder_internal.h"

namespace rill::avro_internal {

namespace {

bool HasOffsets(ColKind k) {
  return k == ColKind::kString || k == ColKind::kBinary || k == ColKind::kList ||
         k == ColKind::kMap;
}

Status StartOffsets(Col* col) {
  if (!HasOffsets(col->kind)) return Status::OK();
  const int32_t zero = 0;
  return col->values.Append(&zero, sizeof(zero));
}

/// Return the column kind and decode type for an Arrow type (utf8 for the
/// types the decoder does not fill itself).
std::shared_ptr<arrow::DataType> Classify(const std::shared_ptr<arrow::DataType>& t,
                                          ColKind* kind, int32_t* width) {
  using arrow::Type;
  *width = 0;
  switch (t->id()) {
    case Type::BOOL: *kind = ColKind::kBool; *width = 1; return t;
    case Type::INT8: *kind = ColKind::kInt8; *width = 1; return t;
    case Type::INT16: *kind = ColKind::kInt16; *width = 2; return t;
    case Type::INT32: *kind = ColKind::kInt32; *width = 4; return t;
    case Type::INT64: *kind = ColKind::kInt64; *width = 8; return t;
    case Type::FLOAT: *kind = ColKind::kFloat32; *width = 4; return t;
    case Type::DOUBLE: *kind = ColKind::kFloat64; *width = 8; return t;
    case Type::DATE32: *kind = ColKind::kDate32; *width = 4; return t;
    case Type::TIME32: *kind = ColKind::kTime32; *width = 4; return t;
    case Type::TIME64: *kind = ColKind::kTime64; *width = 8; return t;
    case Type::TIMESTAMP: *kind = ColKind::kTimestamp; *width = 8; return t;
    case Type::DECIMAL128: *kind = ColKind::kDecimal; *width = 16; return t;
    case Type::STRING: *kind = ColKind::kString; return t;
    case Type::BINARY: *kind = ColKind::kBinary; return t;
    case Type::STRUCT: *kind = ColKind::kStruct; return t;
    case Type::LIST: *kind = ColKind::kList; return t;
    case Type::MAP: {
      const auto& m = static_cast<const arrow::MapType&>(*t);
      if (m.key_type()->id() == Type::STRING && !m.keys_sorted()) {
        *kind = ColKind::kMap;
        return t;
      }
      break;
    }
    default: break;
  }
  *kind = ColKind::kString;
  return arrow::utf8();
}

}  // namespace

std::unique_ptr<Col> MakeCol(const std::shared_ptr<arrow::Field>& field, arrow::MemoryPool* pool) {
  auto col = std::make_unique<Col>(pool);
  auto type = Classify(field->type(), &col->kind, &col->width);
  switch (col->kind) {
    case ColKind::kTime32:
      col->unit = static_cast<const arrow::Time32Type&>(*type).unit();
      break;
    case ColKind::kTime64:
      col->unit = static_cast<const arrow::Time64Type&>(*type).unit();
      break;
    case ColKind::kTimestamp:
      col->unit = static_cast<const arrow::TimestampType&>(*type).unit();
      break;
    case ColKind::kDecimal: {
      const auto& d = static_cast<const arrow::Decimal128Type&>(*type);
      col->precision = d.precision();
      col->scale = d.scale();
      break;
    }
    case ColKind::kStruct: {
      arrow::FieldVector fields;
      for (const auto& f : type->fields()) {
        col->children.push_back(MakeCol(f, pool));
        fields.push_back(col->children.back()->field);
      }
      type = arrow::struct_(std::move(fields));
      break;
    }
    case ColKind::kList: {
      col->children.push_back(MakeCol(type->field(0), pool));
      type = arrow::list(col->children[0]->field);
      break;
    }
    case ColKind::kMap: {
      const auto& m = static_cast<const arrow::MapType&>(*type);
      col->children.push_back(MakeCol(m.key_field(), pool));
      col->children.push_back(MakeCol(m.item_field(), pool));
      type = std::make_shared<arrow::MapType>(m.key_field(), col->children[1]->field);
      break;
    }
    default: break;
  }
  col->field = field->WithType(type);
  (void)StartOffsets(col.get());  // a few bytes; an allocation failure shows at the next append
  return col;
}

Status Col::AppendNull() {
  if (valid.empty()) valid.assign(static_cast<size_t>(length), 1);
  valid.push_back(0);
  ++length;
  ++nulls;
  switch (kind) {
    case ColKind::kString:
    case ColKind::kBinary:
    case ColKind::kList:
    case ColKind::kMap: {
      const int32_t end = reinterpret_cast<const int32_t*>(values.data())[length - 1];
      return values.Append(&end, sizeof(end));
    }
    case ColKind::kStruct:
      for (auto& c : children) RILL_RETURN_NOT_OK(c->AppendNull());
      return Status::OK();
    default:
      return values.Advance(width);  // zeroed bytes
  }
}

void Rollback(Col* col, int64_t n) {
  if (!col->valid.empty()) {
    for (int64_t i = n; i < col->length; ++i) col->nulls -= col->valid[i] == 0;
    col->valid.resize(static_cast<size_t>(n));
  }
  col->length = n;
  switch (col->kind) {
    case ColKind::kString:
    case ColKind::kBinary:
      col->values.Rewind((n + 1) * 4);
      col->data.Rewind(col->LastOffset());
      break;
    case ColKind::kList:
    case ColKind::kMap:
      col->values.Rewind((n + 1) * 4);
      for (auto& c : col->children) Rollback(c.get(), col->LastOffset());
      break;
    case ColKind::kStruct:
      for (auto& c : col->children) Rollback(c.get(), n);
      break;
    default:
      col->values.Rewind(n * col->width);
  }
}

namespace {

Result<std::shared_ptr<arrow::Buffer>> PackBits(const std::vector<uint8_t>& bytes,
                                                arrow::MemoryPool* pool) {
  RILL_ASSIGN_OR_RAISE(auto buf, arrow::AllocateBitmap(static_cast<int64_t>(bytes.size()), pool));
  uint8_t* out = buf->mutable_data();
  std::memset(out, 0, static_cast<size_t>(buf->size()));
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[i >> 3] |= static_cast<uint8_t>((bytes[i] != 0) << (i & 7));
  }
  return std::shared_ptr<arrow::Buffer>(std::move(buf));
}

}  // namespace

Result<std::shared_ptr<arrow::ArrayData>> FinishCol(Col* col) {
  arrow::MemoryPool* pool = col->pool;
  std::shared_ptr<arrow::Buffer> validity;
  if (col->nulls > 0) {
    RILL_ASSIGN_OR_RAISE(validity, PackBits(col->valid, pool));
  }
  const int64_t length = col->length;
  const int64_t nulls = col->nulls;
  // The next batch is likely as big as this one: reserve that much up front
  // (the builders would otherwise grow, copying, from nothing again).
  const int64_t values_bytes = col->values.length();
  const int64_t data_bytes = col->data.length();
  std::vector<std::shared_ptr<arrow::Buffer>> buffers{validity};
  std::vector<std::shared_ptr<arrow::ArrayData>> children;
  switch (col->kind) {
    case ColKind::kBool: {
      std::vector<uint8_t> bytes(col->values.data(), col->values.data() + col->values.length());
      RILL_ASSIGN_OR_RAISE(auto bits, PackBits(bytes, pool));
      buffers.push_back(std::move(bits));
      col->values.Rewind(0);
      break;
    }
    case ColKind::kString:
    case ColKind::kBinary: {
      RILL_ASSIGN_OR_RAISE(auto offsets, col->values.Finish(/*shrink_to_fit=*/false));
      RILL_ASSIGN_OR_RAISE(auto data, col->data.Finish(/*shrink_to_fit=*/false));
      buffers.push_back(std::move(offsets));
      buffers.push_back(std::move(data));
      break;
    }
    case ColKind::kList: {
      RILL_ASSIGN_OR_RAISE(auto offsets, col->values.Finish(/*shrink_to_fit=*/false));
      buffers.push_back(std::move(offsets));
      RILL_ASSIGN_OR_RAISE(auto items, FinishCol(col->children[0].get()));
      children.push_back(std::move(items));
      break;
    }
    case ColKind::kMap: {
      RILL_ASSIGN_OR_RAISE(auto offsets, col->values.Finish(/*shrink_to_fit=*/false));
      buffers.push_back(std::move(offsets));
      RILL_ASSIGN_OR_RAISE(auto keys, FinishCol(col->children[0].get()));
      RILL_ASSIGN_OR_RAISE(auto items, FinishCol(col->children[1].get()));
      const auto& map_type = static_cast<const arrow::MapType&>(*col->field->type());
      const int64_t n = keys->length;
      children.push_back(arrow::ArrayData::Make(map_type.value_type(), n, {nullptr},
                                                {std::move(keys), std::move(items)},
                                                /*null_count=*/0));
      break;
    }
    case ColKind::kStruct:
      for (auto& c : col->children) {
        RILL_ASSIGN_OR_RAISE(auto child, FinishCol(c.get()));
        children.push_back(std::move(child));
      }
      break;
    default: {
      RILL_ASSIGN_OR_RAISE(auto values, col->values.Finish(/*shrink_to_fit=*/false));
      buffers.push_back(std::move(values));
    }
  }
  col->valid.clear();
  col->length = 0;
  col->nulls = 0;
  RILL_RETURN_NOT_OK(col->values.Reserve(values_bytes));
  if (data_bytes > 0) RILL_RETURN_NOT_OK(col->data.Reserve(data_bytes));
  RILL_RETURN_NOT_OK(StartOffsets(col));
  return arrow::ArrayData::Make(col->field->type(), length, std::move(buffers),
                                std::move(children), nulls);
}

}  // namespace rill::avro_internal
