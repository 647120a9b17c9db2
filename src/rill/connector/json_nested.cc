// Values of struct, list and map columns (read with simdjson On-Demand, checked,
// and staged as appends), and the append of converted cells to Arrow builders.
#include <arrow/builder.h>
#include <arrow/type.h>

#include "rill/connector/json_convert_internal.h"

namespace rill::json_internal {

namespace {

namespace ondemand = simdjson::ondemand;
using simdjson::error_code;

/// Append `value` to a fixed-width builder: without a Status when it has room
/// (the decoder reserves for the whole input up front).
template <typename Builder, typename T>
Status AppendFixed(arrow::ArrayBuilder* builder, T value) {
  auto* b = static_cast<Builder*>(builder);
  if (b->length() < b->capacity()) {
    b->UnsafeAppend(value);
    return Status::OK();
  }
  return b->Append(value);
}

template <typename Builder>
Status AppendBinary(arrow::ArrayBuilder* builder, std::string_view value) {
  auto* b = static_cast<Builder*>(builder);
  if (b->length() < b->capacity() &&
      b->value_data_length() + static_cast<int64_t>(value.size()) <= b->value_data_capacity()) {
    b->UnsafeAppend(value);
    return Status::OK();
  }
  return b->Append(value);
}

Status AppendScalarCell(const Cell& cell, const ColumnSpec& spec, arrow::ArrayBuilder* b) {
  using arrow::Type;
  switch (spec.type_id) {
#define RILL_APPEND(ID, BUILDER, VALUE) \
  case Type::ID:                        \
    return AppendFixed<arrow::BUILDER>(b, VALUE);
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
    case Type::STRING: return AppendBinary<arrow::StringBuilder>(b, cell.s);
    case Type::LARGE_STRING: return AppendBinary<arrow::LargeStringBuilder>(b, cell.s);
    case Type::BINARY: return AppendBinary<arrow::BinaryBuilder>(b, cell.s);
    case Type::LARGE_BINARY: return AppendBinary<arrow::LargeBinaryBuilder>(b, cell.s);
    RILL_APPEND(TIMESTAMP, TimestampBuilder, cell.i)
    RILL_APPEND(DATE32, Date32Builder, static_cast<int32_t>(cell.i))
    RILL_APPEND(DATE64, Date64Builder, cell.i)
#undef RILL_APPEND
    default:
      return Status::NotImplemented("JSON append to ", spec.type->ToString());
  }
}

/// Prefix the message of a failed child's status with its name: `open`, `name`,
/// `close` (".field", "[3]"). Built by Status, not by std::string operator+,
/// which g++ 12 flags with a false -Wrestrict once inlined here.
Status InChild(const Status& st, std::string_view open, std::string_view name,
               std::string_view close = "") {
  if (st.ok()) return st;
  std::string_view msg = st.message();
  bool nested = !msg.empty() && (msg[0] == '.' || msg[0] == '[');
  return Status::Invalid(open, name, close, nested ? "" : ": ", msg);
}

Status JsonError(error_code err) { return Status::Invalid(JsonErrorMessage(err)); }

/// "expected an object, got …": reads (and consumes) `value` to describe it.
Status ShapeMismatch(const char* expected, ondemand::value value) {
  JsonScalar v;
  error_code err = ReadScalar(value, &v);
  if (err) return JsonError(err);
  return Status::Invalid("expected ", expected, ", ", Describe(v));
}

/// Read and check a value nothing is appended for (a field the struct does not
/// have, or a repeated one): it must still be valid JSON.
error_code SkipValue(ondemand::value value) {
  ondemand::json_type type;
  error_code err = value.type().get(type);
  if (err) return err;
  if (type == ondemand::json_type::object) {
    ondemand::object obj;
    if ((err = value.get_object().get(obj))) return err;
    for (auto field_result : obj) {
      ondemand::field field;
      std::string_view key;
      if ((err = std::move(field_result).get(field)) || (err = field.unescaped_key().get(key)) ||
          (err = SkipValue(field.value()))) {
        return err;
      }
    }
    return simdjson::SUCCESS;
  }
  if (type == ondemand::json_type::array) {
    ondemand::array arr;
    if ((err = value.get_array().get(arr))) return err;
    for (auto item : arr) {
      ondemand::value v;
      if ((err = item.get(v)) || (err = SkipValue(v))) return err;
    }
    return simdjson::SUCCESS;
  }
  JsonScalar scalar;
  return ReadScalar(value, &scalar);
}

Status Stage(ondemand::value& value, const NestedNode& node, std::vector<NestedOp>* ops);

/// The child of a struct `node` that `field` names (-1: none). Fields usually
/// come in schema order: the child at `ordinal` is compared first, raw.
int StructChild(ondemand::field& field, const NestedNode& node, size_t ordinal,
                error_code* err) {
  const auto& children = node.spec->children;
  if (ordinal < children.size() && RawKeyIs(field.key().raw(), children[ordinal])) {
    return static_cast<int>(ordinal);
  }
  std::string_view key;
  if ((*err = field.unescaped_key().get(key))) return -1;
  for (size_t i = 0; i < children.size(); ++i) {
    if (children[i].name == key) return static_cast<int>(i);
  }
  return -1;
}

Status StageStruct(ondemand::object& obj, const NestedNode& node, std::vector<NestedOp>* ops) {
  ops->push_back(NestedOp{NestedOp::kStart, &node, {}});
  const size_t n = node.children.size();
  uint64_t seen_bits = 0;
  std::vector<char> seen_wide(n > 64 ? n : 0);
  auto seen = [&](size_t i) -> bool {
    return n > 64 ? seen_wide[i] != 0 : ((seen_bits >> i) & 1) != 0;
  };
  size_t ordinal = 0;
  for (auto field_result : obj) {
    // Results are read in place (by reference): a copy of what was just
    // built stalls on store forwarding.
    error_code err = field_result.error();
    ondemand::field& field = field_result.value_unsafe();
    int child = err ? -1 : StructChild(field, node, ordinal++, &err);
    if (err) return JsonError(err);
    if (child < 0 || seen(static_cast<size_t>(child))) {
      // Not a field of the struct, or a repeat (the first one counts).
      if ((err = SkipValue(field.value()))) return JsonError(err);
      continue;
    }
    if (n > 64) {
      seen_wide[child] = 1;
    } else {
      seen_bits |= uint64_t{1} << child;
    }
    const NestedNode& c = node.children[child];
    Status st = Stage(field.value(), c, ops);
    if (!st.ok()) return InChild(st, ".", c.spec->name);
  }
  for (size_t i = 0; i < n; ++i) {
    if (seen(i)) continue;
    const NestedNode& c = node.children[i];
    if (!c.spec->nullable) return Status::Invalid(".", c.spec->name, ": missing");
    ops->push_back(NestedOp{NestedOp::kNull, &c, {}});
  }
  return Status::OK();
}

Status StageList(ondemand::array& arr, const NestedNode& node, std::vector<NestedOp>* ops) {
  ops->push_back(NestedOp{NestedOp::kStart, &node, {}});
  int64_t i = 0;
  for (auto item : arr) {
    if (error_code err = item.error()) return JsonError(err);
    Status st = Stage(item.value_unsafe(), node.children[0], ops);
    if (!st.ok()) return InChild(st, "[", std::to_string(i), "]");
    ++i;
  }
  if (node.spec->list_size >= 0 && i != node.spec->list_size) {
    return Status::Invalid("expected ", node.spec->list_size, " items, got ", i);
  }
  return Status::OK();
}

Status StageMap(ondemand::object& obj, const NestedNode& node, std::vector<NestedOp>* ops) {
  ops->push_back(NestedOp{NestedOp::kStart, &node, {}});
  for (auto field_result : obj) {
    NestedOp key{NestedOp::kMapKey, &node.children[0], {}};
    error_code err = field_result.error();
    if (err) return JsonError(err);
    ondemand::field& field = field_result.value_unsafe();
    if ((err = field.unescaped_key().get(key.cell.s))) return JsonError(err);
    ops->push_back(key);
    Status st = Stage(field.value(), node.children[1], ops);
    if (!st.ok()) return InChild(st, ".", key.cell.s);
  }
  return Status::OK();
}

/// Check `value` for `node` and stage its appends.
Status Stage(ondemand::value& value, const NestedNode& node, std::vector<NestedOp>* ops) {
  const ColumnSpec& spec = *node.spec;
  ondemand::json_type type;
  if (error_code err = value.type().get(type)) return JsonError(err);
  if (type == ondemand::json_type::null) {
    bool is_null = false;
    if (error_code err = value.is_null().get(is_null)) return JsonError(err);
    if (!is_null) return JsonError(simdjson::N_ATOM_ERROR);
    if (!spec.nullable) return Status::Invalid("null in a non-nullable field");
    ops->push_back(NestedOp{NestedOp::kNull, &node, {}});
    return Status::OK();
  }
  switch (spec.kind) {
    case ColKind::kStruct:
    case ColKind::kMap: {
      if (type != ondemand::json_type::object) return ShapeMismatch("an object", value);
      auto obj = value.get_object();
      if (error_code err = obj.error()) return JsonError(err);
      return spec.kind == ColKind::kStruct ? StageStruct(obj.value_unsafe(), node, ops)
                                           : StageMap(obj.value_unsafe(), node, ops);
    }
    case ColKind::kList: {
      if (type != ondemand::json_type::array) return ShapeMismatch("an array", value);
      auto arr = value.get_array();
      if (error_code err = arr.error()) return JsonError(err);
      return StageList(arr.value_unsafe(), node, ops);
    }
    default: {
      NestedOp op{NestedOp::kScalar, &node, {}};
      JsonScalar v;
      if (!ReadTyped(value, spec, &op.cell, &v)) {
        if (v.type != JsonScalar::kString) {
          if (error_code err = ReadScalar(value, &v)) return JsonError(err);
        }
        RILL_RETURN_NOT_OK(Convert(v, spec, &op.cell));
      }
      ops->push_back(op);
      return Status::OK();
    }
  }
}

/// Start a struct/list/map value (its children follow as their own ops).
Status AppendStart(const NestedNode& node) {
  arrow::ArrayBuilder* b = node.builder;
  switch (node.spec->kind) {
    case ColKind::kStruct: return static_cast<arrow::StructBuilder*>(b)->Append();
    case ColKind::kMap: return static_cast<arrow::MapBuilder*>(b)->Append();
    default: break;
  }
  switch (node.spec->type->id()) {
    case arrow::Type::LARGE_LIST: return static_cast<arrow::LargeListBuilder*>(b)->Append();
    case arrow::Type::FIXED_SIZE_LIST:
      return static_cast<arrow::FixedSizeListBuilder*>(b)->Append();
    default: return static_cast<arrow::ListBuilder*>(b)->Append();
  }
}

}  // namespace

NestedNode MakeNestedNode(const ColumnSpec& spec, arrow::ArrayBuilder* builder) {
  NestedNode node;
  node.spec = &spec;
  node.builder = builder;
  switch (spec.kind) {
    case ColKind::kStruct: {
      auto* sb = static_cast<arrow::StructBuilder*>(builder);
      for (size_t i = 0; i < spec.children.size(); ++i) {
        node.children.push_back(
            MakeNestedNode(spec.children[i], sb->field_builder(static_cast<int>(i))));
      }
      break;
    }
    case ColKind::kList: {
      arrow::ArrayBuilder* values =
          spec.type->id() == arrow::Type::LARGE_LIST
              ? static_cast<arrow::LargeListBuilder*>(builder)->value_builder()
          : spec.list_size >= 0
              ? static_cast<arrow::FixedSizeListBuilder*>(builder)->value_builder()
              : static_cast<arrow::ListBuilder*>(builder)->value_builder();
      node.children.push_back(MakeNestedNode(spec.children[0], values));
      break;
    }
    case ColKind::kMap: {
      auto* mb = static_cast<arrow::MapBuilder*>(builder);
      node.children.push_back(MakeNestedNode(spec.children[0], mb->key_builder()));
      node.children.push_back(MakeNestedNode(spec.children[1], mb->item_builder()));
      break;
    }
    default:
      break;
  }
  return node;
}

Status StageNested(ondemand::value& value, const NestedNode& node, std::vector<NestedOp>* ops) {
  return Stage(value, node, ops);
}

Status ApplyNestedOps(const std::vector<NestedOp>& ops) {
  for (const NestedOp& op : ops) {
    switch (op.kind) {
      case NestedOp::kNull:
        RILL_RETURN_NOT_OK(op.node->builder->AppendNull());
        break;
      case NestedOp::kScalar:
        RILL_RETURN_NOT_OK(AppendScalarCell(op.cell, *op.node->spec, op.node->builder));
        break;
      case NestedOp::kStart:
        RILL_RETURN_NOT_OK(AppendStart(*op.node));
        break;
      case NestedOp::kMapKey:
        RILL_RETURN_NOT_OK(
            static_cast<arrow::StringBuilder*>(op.node->builder)->Append(op.cell.s));
        break;
    }
  }
  return Status::OK();
}

Status AppendCell(const Cell& cell, const ColumnSpec& spec, arrow::ArrayBuilder* builder) {
  if (cell.null) return builder->AppendNull();
  return AppendScalarCell(cell, spec, builder);
}

}  // namespace rill::json_internal
