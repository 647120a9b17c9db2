// Values of struct, list and map columns (through simdjson's DOM), and the
// append of converted cells to Arrow builders.
#include <arrow/builder.h>
#include <arrow/type.h>

#include "rill/connector/json_convert_internal.h"

namespace rill::json_internal {

namespace {

namespace dom = simdjson::dom;
using simdjson::error_code;

/// Classify a DOM element; `storage` keeps the JSON text of objects/arrays
/// (and of numbers when `number_text`: for string columns).
JsonScalar FromDom(dom::element e, std::string* storage, bool number_text = true) {
  JsonScalar v;
  switch (e.type()) {
    case dom::element_type::NULL_VALUE:
      v.type = JsonScalar::kNull;
      break;
    case dom::element_type::BOOL:
      v.type = JsonScalar::kBool;
      v.b = e.get_bool().value_unsafe();
      v.text = v.b ? "true" : "false";
      break;
    case dom::element_type::INT64:
      v.type = JsonScalar::kInt;
      v.i = e.get_int64().value_unsafe();
      if (number_text) *storage = std::to_string(v.i);
      v.text = *storage;
      break;
    case dom::element_type::UINT64:
      v.type = JsonScalar::kUInt;
      v.u = e.get_uint64().value_unsafe();
      if (number_text) *storage = std::to_string(v.u);
      v.text = *storage;
      break;
    case dom::element_type::DOUBLE:
      v.type = JsonScalar::kDouble;
      v.d = e.get_double().value_unsafe();
      if (number_text) *storage = simdjson::minify(e);
      v.text = *storage;
      break;
    case dom::element_type::STRING:
      v.type = JsonScalar::kString;
      v.text = e.get_string().value_unsafe();
      break;
    case dom::element_type::OBJECT:
    case dom::element_type::ARRAY:
      v.type = e.type() == dom::element_type::OBJECT ? JsonScalar::kObject : JsonScalar::kArray;
      *storage = simdjson::minify(e);
      v.text = *storage;
      break;
  }
  return v;
}

Status AppendScalarCell(const Cell& cell, const ColumnSpec& spec, arrow::ArrayBuilder* b) {
  using arrow::Type;
  switch (spec.type->id()) {
#define RILL_APPEND(ID, BUILDER, VALUE) \
  case Type::ID:                        \
    return static_cast<arrow::BUILDER*>(b)->Append(VALUE);
    RILL_APPEND(INT8, Int8Builder, static_cast<int8_t>(cell.i))
    RILL_APPEND(INT16, Int16Builder, static_cast<int16_t>(cell.i))
    RILL_APPEND(INT32, Int32Builder, static_cast<int32_t>(cell.i))
    RILL_APPEND(INT64, Int64Builder, cell.i)
    RILL_APPEND(UINT8, UInt8Builder, static_cast<uint8_t>(cell.u))
    RILL_APPEND(UINT16, UInt16Builder, static_cast<uint16_t>(cell.u))
    RILL_APPEND(UINT32, UInt32Builder, static_cast<uint32_t>(cell.u))
    RILL_APPEND(UINT64, UInt64Builder, cell.u)
    RILL_APPEND(FLOAT, FloatBuilder, static_cast<float>(cell.d))
    RILL_APPEND(DOUBLE, DoubleBuilder, cell.d)
    RILL_APPEND(BOOL, BooleanBuilder, cell.b)
    RILL_APPEND(STRING, StringBuilder, cell.s)
    RILL_APPEND(LARGE_STRING, LargeStringBuilder, cell.s)
    RILL_APPEND(BINARY, BinaryBuilder, cell.s)
    RILL_APPEND(LARGE_BINARY, LargeBinaryBuilder, cell.s)
    RILL_APPEND(TIMESTAMP, TimestampBuilder, cell.i)
    RILL_APPEND(DATE32, Date32Builder, static_cast<int32_t>(cell.i))
    RILL_APPEND(DATE64, Date64Builder, cell.i)
#undef RILL_APPEND
    default:
      return Status::NotImplemented("JSON append to ", spec.type->ToString());
  }
}

/// Prefix the message of a failed child's status with its name.
Status InChild(const Status& st, std::string_view child) {
  if (st.ok()) return st;
  std::string_view msg = st.message();
  bool nested = !msg.empty() && (msg[0] == '.' || msg[0] == '[');
  return Status::Invalid(child, nested ? "" : ": ", msg);
}

/// Check (b == nullptr) or append (b != nullptr) the element `e` for `spec`.
/// Errors name the path below `spec` (".a[2]: expected …"); paths are built
/// only on failure.
Status WalkDom(dom::element e, const ColumnSpec& spec, arrow::ArrayBuilder* b) {
  if (e.is_null()) {
    if (!spec.nullable) return Status::Invalid("null in a non-nullable field");
    return b ? b->AppendNull() : Status::OK();
  }
  switch (spec.kind) {
    case ColKind::kStruct: {
      dom::object obj;
      if (e.get_object().get(obj)) {
        std::string s;
        return Status::Invalid("expected an object, ", Describe(FromDom(e, &s)));
      }
      auto* sb = static_cast<arrow::StructBuilder*>(b);
      if (sb) RILL_RETURN_NOT_OK(sb->Append());
      for (size_t i = 0; i < spec.children.size(); ++i) {
        const auto& child = spec.children[i];
        dom::element value;
        auto* cb = sb ? sb->field_builder(static_cast<int>(i)) : nullptr;
        if (obj.at_key(child.name).get(value)) {
          if (!child.nullable) return Status::Invalid(".", child.name, ": missing");
          if (cb) RILL_RETURN_NOT_OK(cb->AppendNull());
          continue;
        }
        Status st = WalkDom(value, child, cb);
        if (!st.ok()) return InChild(st, "." + child.name);
      }
      return Status::OK();
    }
    case ColKind::kList: {
      dom::array arr;
      if (e.get_array().get(arr)) {
        std::string s;
        return Status::Invalid("expected an array, ", Describe(FromDom(e, &s)));
      }
      if (spec.list_size >= 0 && static_cast<int64_t>(arr.size()) != spec.list_size) {
        return Status::Invalid("expected ", spec.list_size, " items, got ", arr.size());
      }
      arrow::ArrayBuilder* vb = nullptr;
      if (b) {
        if (spec.type->id() == arrow::Type::LARGE_LIST) {
          auto* lb = static_cast<arrow::LargeListBuilder*>(b);
          RILL_RETURN_NOT_OK(lb->Append());
          vb = lb->value_builder();
        } else if (spec.list_size >= 0) {
          auto* lb = static_cast<arrow::FixedSizeListBuilder*>(b);
          RILL_RETURN_NOT_OK(lb->Append());
          vb = lb->value_builder();
        } else {
          auto* lb = static_cast<arrow::ListBuilder*>(b);
          RILL_RETURN_NOT_OK(lb->Append());
          vb = lb->value_builder();
        }
      }
      size_t i = 0;
      for (dom::element item : arr) {
        Status st = WalkDom(item, spec.children[0], vb);
        if (!st.ok()) return InChild(st, "[" + std::to_string(i) + "]");
        ++i;
      }
      return Status::OK();
    }
    case ColKind::kMap: {
      dom::object obj;
      if (e.get_object().get(obj)) {
        std::string s;
        return Status::Invalid("expected an object, ", Describe(FromDom(e, &s)));
      }
      auto* mb = static_cast<arrow::MapBuilder*>(b);
      if (mb) RILL_RETURN_NOT_OK(mb->Append());
      for (auto field : obj) {
        if (mb) {
          RILL_RETURN_NOT_OK(static_cast<arrow::StringBuilder*>(mb->key_builder())
                                 ->Append(field.key.data(), field.key.size()));
        }
        Status st = WalkDom(field.value, spec.children[1], mb ? mb->item_builder() : nullptr);
        if (!st.ok()) return InChild(st, "." + std::string(field.key));
      }
      return Status::OK();
    }
    default: {
      std::string storage;
      JsonScalar v = FromDom(e, &storage, spec.kind == ColKind::kString);
      Cell cell;
      RILL_RETURN_NOT_OK(Convert(v, spec, &cell));
      return b ? AppendScalarCell(cell, spec, b) : Status::OK();
    }
  }
}

Status ParseNested(std::string_view text, simdjson::dom::parser* dom, dom::element* out) {
  // `text` lies inside a padded buffer, so no copy is needed.
  error_code err = dom->parse(text.data(), text.size(), /*realloc_if_needed=*/false).get(*out);
  if (err) return Status::Invalid(JsonErrorMessage(err));
  return Status::OK();
}

}  // namespace

Status CheckNested(const ColumnSpec& spec, simdjson::dom::parser* dom, Cell* cell) {
  RILL_RETURN_NOT_OK(ParseNested(cell->s, dom, &cell->element));
  return WalkDom(cell->element, spec, nullptr);
}

Status AppendCell(const Cell& cell, const ColumnSpec& spec, arrow::ArrayBuilder* builder) {
  if (cell.null) return builder->AppendNull();
  if (spec.kind == ColKind::kStruct || spec.kind == ColKind::kList ||
      spec.kind == ColKind::kMap) {
    return WalkDom(cell.element, spec, builder);
  }
  return AppendScalarCell(cell, spec, builder);
}

}  // namespace rill::json_internal
