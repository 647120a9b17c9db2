// AvroSource (writer schemas of values) and DecodeAvroInput (HTTP bodies:
// concatenated records or an object container file).
#include "rill/connector/avro_source.h"

#include <algorithm>

#include <zlib.h>

#include <cstring>

#include <arrow/record_batch.h>

#include "rill/connector/avro_decoder_internal.h"
#include "rill/connector/json_decoder.h"

namespace rill {

Result<std::shared_ptr<AvroSource>> AvroSource::Make(const AvroSourceOptions& options) {
  const bool registry = !options.schema_registry_url.empty();
  const bool fixed = !options.avro_schema.empty();
  if (registry == fixed) {
    return Status::Invalid(
        "format=\"avro\" needs exactly one of schema_registry_url (the Confluent wire "
        "format) and avro_schema (plain Avro binary)");
  }
  std::shared_ptr<AvroSource> s(new AvroSource());
  if (registry) {
    SchemaRegistryOptions o;
    o.url = options.schema_registry_url;
    o.user = options.schema_registry_user;
    o.password = options.schema_registry_password;
    o.timeout_ms = options.schema_registry_timeout_ms;
    RILL_ASSIGN_OR_RAISE(s->registry_, SchemaRegistryClient::Make(std::move(o)));
  } else {
    auto parsed = AvroSchema::Parse(options.avro_schema);
    if (!parsed.ok()) return Status::Invalid("avro_schema: ", parsed.status().message());
    s->fixed_ = *parsed;
  }
  return s;
}

Result<AvroValue> AvroSource::Resolve(std::string_view value) {
  AvroValue v;
  if (!registry_) {
    v.writer = fixed_;
    v.body = value;
    return v;
  }
  RILL_ASSIGN_OR_RAISE(ConfluentFrame frame, ParseConfluentFrame(value));
  RILL_ASSIGN_OR_RAISE(v.writer, registry_->GetSchema(frame.schema_id));
  v.body = frame.body;
  v.body_offset = 5;
  return v;
}

namespace {

RejectedRecord MakeReject(std::string error, std::string_view raw, int64_t offset,
                          int64_t max_raw_bytes) {
  RejectedRecord r;
  r.position = "byte " + std::to_string(offset);
  r.error = std::move(error);
  r.raw = TruncateRaw(raw, max_raw_bytes);
  r.raw_size = static_cast<int64_t>(raw.size());
  r.byte_offset = offset;
  return r;
}

constexpr int64_t kMaxInflatedBlock = 256 << 20;

Status Inflate(std::string_view in, std::string* out) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, -15) != Z_OK) return Status::OutOfMemory("inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  out->clear();
  int rc = Z_OK;
  char buf[64 << 10];
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      return Status::Invalid("deflate block does not inflate");
    }
    out->append(buf, sizeof(buf) - zs.avail_out);
    if (static_cast<int64_t>(out->size()) > kMaxInflatedBlock) {
      inflateEnd(&zs);
      return Status::Invalid("deflate block inflates past 256 MiB");
    }
    if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) break;  // truncated input
  }
  inflateEnd(&zs);
  return Status::OK();
}

/// Read an object container file's header: the writer schema, the codec and
/// the sync marker. `c` is left at the first block.
Status ReadContainerHeader(avro_internal::Cursor* c, std::shared_ptr<const AvroSchema>* schema,
                           bool* deflate, std::string* sync) {
  avro_internal::Limits limits;
  c->p += 4;  // "Obj\x01"
  std::string schema_json, codec = "null";
  while (true) {
    int64_t count = 0;
    RILL_RETURN_NOT_OK(avro_internal::ReadBlockCount(c, false, &count));
    if (count == 0) break;
    for (int64_t i = 0; i < count; ++i) {
      int64_t n = 0;
      RILL_RETURN_NOT_OK(avro_internal::ReadLength(c, limits, &n));
      std::string key(reinterpret_cast<const char*>(c->p), static_cast<size_t>(n));
      c->p += n;
      RILL_RETURN_NOT_OK(avro_internal::ReadLength(c, limits, &n));
      std::string value(reinterpret_cast<const char*>(c->p), static_cast<size_t>(n));
      c->p += n;
      if (key == "avro.schema") schema_json = std::move(value);
      if (key == "avro.codec") codec = std::move(value);
    }
  }
  if (c->left() < 16) return avro_internal::BadAt(*c, "container file header without its sync marker");
  sync->assign(reinterpret_cast<const char*>(c->p), 16);
  c->p += 16;
  if (codec != "null" && codec != "deflate") {
    return Status::NotImplemented("Avro container file codec '", codec,
                                  "' (supported: null, deflate)");
  }
  *deflate = codec == "deflate";
  if (schema_json.empty()) return Status::Invalid("Avro container file without avro.schema");
  auto parsed = AvroSchema::Parse(schema_json);
  if (!parsed.ok()) return Status::Invalid("Avro container file: ", parsed.status().message());
  *schema = *parsed;
  return Status::OK();
}

Status DecodeContainer(AvroDecoder* decoder, std::string_view data, int64_t max_raw_bytes,
                       AvroDecodeResult* out) {
  avro_internal::Cursor c{reinterpret_cast<const uint8_t*>(data.data()),
                          reinterpret_cast<const uint8_t*>(data.data()) + data.size(),
                          reinterpret_cast<const uint8_t*>(data.data()), 0};
  std::shared_ptr<const AvroSchema> schema;
  bool deflate = false;
  std::string sync;
  auto header = ReadContainerHeader(&c, &schema, &deflate, &sync);
  if (!header.ok()) return header.WithMessage("Avro container file header: ", header.message());
  std::string inflated;
  avro_internal::Limits limits;
  limits.max_value_bytes = INT32_MAX;
  while (c.p < c.end) {
    const int64_t block_at = c.offset();
    int64_t count = 0, size = 0;
    Status st = avro_internal::ReadLong(&c, &count);
    if (st.ok()) st = avro_internal::ReadLength(&c, limits, &size);
    if (st.ok() && (count < 0 || c.left() < size + 16)) {
      st = avro_internal::BadAt(c, "block past the end of the file");
    }
    if (!st.ok()) {  // the rest of the file cannot be framed
      out->rejects.push_back(MakeReject("Avro container file: " + st.message(),
                                        data.substr(static_cast<size_t>(block_at)), block_at,
                                        max_raw_bytes));
      ++out->records;
      return Status::OK();
    }
    std::string_view block(reinterpret_cast<const char*>(c.p), static_cast<size_t>(size));
    const int64_t body_at = c.offset();
    c.p += size;
    const bool sync_ok = std::memcmp(c.p, sync.data(), 16) == 0;
    c.p += 16;
    int64_t base = body_at;
    if (deflate) {
      st = Inflate(block, &inflated);
      if (!st.ok()) {
        out->rejects.push_back(MakeReject("block at byte " + std::to_string(block_at) + ": " +
                                              st.message(),
                                          block, body_at, max_raw_bytes));
        // A reject is at least one record (a block may claim none).
        out->records += std::max<int64_t>(count, 1);
        continue;
      }
      block = inflated;
      base = 0;  // offsets within the inflated block
    }
    int64_t at = 0;
    for (int64_t i = 0; i < count; ++i) {
      ++out->records;
      int64_t used = 0;
      st = decoder->Append(schema, block.substr(static_cast<size_t>(at)), base + at, &used);
      if (!st.ok()) {
        std::string why = deflate ? "deflate block at byte " + std::to_string(block_at) + ", " +
                                        st.message()
                                  : st.message();
        if (count - i > 1) why += " (and the " + std::to_string(count - i - 1) +
                                  " records after it in this block)";
        out->rejects.push_back(MakeReject(std::move(why), block.substr(static_cast<size_t>(at)),
                                          deflate ? block_at : base + at, max_raw_bytes));
        out->records += count - i - 1;
        break;
      }
      at += used;
    }
    if (!sync_ok) {
      out->rejects.push_back(MakeReject("Avro container file: bad sync marker after the block",
                                        {}, c.offset() - 16, max_raw_bytes));
      ++out->records;  // the rest of the file, unread: one record for its reject
      return Status::OK();
    }
  }
  return Status::OK();
}

}  // namespace

Result<AvroDecodeResult> DecodeAvroInput(AvroSource* source, AvroDecoder* decoder,
                                         std::string_view data, int64_t max_raw_bytes) {
  AvroDecodeResult out;
  if (data.size() >= 4 && std::memcmp(data.data(), "Obj\x01", 4) == 0) {
    RILL_RETURN_NOT_OK(DecodeContainer(decoder, data, max_raw_bytes, &out));
  } else {
    size_t at = 0;
    while (at < data.size()) {
      ++out.records;
      std::string_view rest = data.substr(at);
      auto value = source->Resolve(rest);
      Status st = value.status();
      if (st.IsIOError()) return st;
      int64_t used = 0;
      if (st.ok()) {
        st = decoder->Append(value->writer, value->body, static_cast<int64_t>(at) + value->body_offset,
                             &used);
      }
      if (!st.ok()) {
        out.rejects.push_back(MakeReject(st.message() + " (the rest of the input is not read)",
                                         rest, static_cast<int64_t>(at), max_raw_bytes));
        break;
      }
      at += static_cast<size_t>(used + value->body_offset);
    }
  }
  RILL_ASSIGN_OR_RAISE(out.batch, decoder->Flush());
  return out;
}

}  // namespace rill
