#include "rill/server/pgwire/pg_messages.h"

#include <cstring>

namespace rill::pgwire {
namespace {

int32_t LoadInt32(const char* p) {
  uint32_t v = (static_cast<uint32_t>(static_cast<uint8_t>(p[0])) << 24) |
               (static_cast<uint32_t>(static_cast<uint8_t>(p[1])) << 16) |
               (static_cast<uint32_t>(static_cast<uint8_t>(p[2])) << 8) |
               static_cast<uint32_t>(static_cast<uint8_t>(p[3]));
  return static_cast<int32_t>(v);
}

}  // namespace

bool IsPostgresStart(std::string_view first_bytes) {
  if (first_bytes.size() < 8) {
    return false;
  }
  int32_t length = LoadInt32(first_bytes.data());
  int32_t code = LoadInt32(first_bytes.data() + 4);
  if (length < kMinStartupPacket || length > kMaxStartupPacket) {
    return false;
  }
  return (code >> 16) == 3 || code == kSslRequestCode || code == kGssEncRequestCode ||
         code == kCancelRequestCode;
}

Result<std::optional<PgFrame>> PgFrameDecoder::Next() {
  // Drop consumed bytes once they dominate the buffer, so it stays bounded.
  if (consumed_ > 0 && consumed_ * 2 >= buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  const size_t header = startup_ ? 4 : 5;
  if (buffered() < header) {
    return std::nullopt;
  }
  const char* p = buffer_.data() + consumed_;
  PgFrame frame;
  int64_t length;
  if (startup_) {
    length = LoadInt32(p);
    if (length < kMinStartupPacket || length > kMaxStartupPacket) {
      return Status::Invalid("invalid startup packet length ", length, " (must be ",
                             kMinStartupPacket, "..", kMaxStartupPacket, " bytes)");
    }
  } else {
    frame.type = p[0];
    length = LoadInt32(p + 1);
    if (length < 4 || length > max_message_bytes_) {
      return Status::Invalid("invalid length ", length, " of message type '",
                             std::string(1, frame.type), "' (must be 4..",
                             max_message_bytes_, " bytes)");
    }
  }
  // Total bytes of the frame on the wire: the length word counts itself but
  // not the type byte.
  const size_t total = static_cast<size_t>(length) + (startup_ ? 0 : 1);
  if (buffered() < total) {
    return std::nullopt;
  }
  frame.body.assign(p + header, total - header);
  consumed_ += total;
  return frame;
}

Result<int16_t> PgMessageReader::ReadInt16() {
  if (remaining() < 2) {
    return Status::Invalid("message truncated: expected a 2-byte integer");
  }
  const auto* p = reinterpret_cast<const uint8_t*>(body_.data() + pos_);
  pos_ += 2;
  return static_cast<int16_t>((p[0] << 8) | p[1]);
}

Result<int32_t> PgMessageReader::ReadInt32() {
  if (remaining() < 4) {
    return Status::Invalid("message truncated: expected a 4-byte integer");
  }
  int32_t v = LoadInt32(body_.data() + pos_);
  pos_ += 4;
  return v;
}

Result<uint8_t> PgMessageReader::ReadByte() {
  if (remaining() < 1) {
    return Status::Invalid("message truncated: expected a byte");
  }
  return static_cast<uint8_t>(body_[pos_++]);
}

Result<std::string_view> PgMessageReader::ReadString() {
  const void* nul = std::memchr(body_.data() + pos_, '\0', remaining());
  if (nul == nullptr) {
    return Status::Invalid("string not NUL-terminated within its message");
  }
  size_t end = static_cast<const char*>(nul) - body_.data();
  std::string_view s = body_.substr(pos_, end - pos_);
  pos_ = end + 1;
  return s;
}

Result<std::string_view> PgMessageReader::ReadBytes(int64_t n) {
  if (n < 0 || static_cast<uint64_t>(n) > remaining()) {
    return Status::Invalid("invalid byte length ", n, " (", remaining(),
                           " bytes left in the message)");
  }
  std::string_view s = body_.substr(pos_, static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return s;
}

Result<int> PgMessageReader::ReadCount(int max, int min_element_bytes, const char* what) {
  RILL_ASSIGN_OR_RAISE(int16_t raw, ReadInt16());
  // Counts are unsigned 16-bit on the wire.
  int count = static_cast<uint16_t>(raw);
  if (count > max) {
    return Status::Invalid("too many ", what, ": ", count, " (at most ", max, ")");
  }
  if (static_cast<uint64_t>(count) * min_element_bytes > remaining()) {
    return Status::Invalid(count, " ", what, " cannot fit in the ", remaining(),
                           " bytes left in the message");
  }
  return count;
}

Status PgMessageReader::ExpectEnd(const char* message) const {
  if (remaining() != 0) {
    return Status::Invalid(remaining(), " unexpected trailing bytes in ", message,
                           " message");
  }
  return Status::OK();
}

Result<StartupPacket> ParseStartupPacket(std::string_view body) {
  PgMessageReader r(body);
  StartupPacket packet;
  RILL_ASSIGN_OR_RAISE(packet.protocol, r.ReadInt32());
  switch (packet.protocol) {
    case kSslRequestCode:
      packet.kind = StartupPacket::Kind::kSslRequest;
      RILL_RETURN_NOT_OK(r.ExpectEnd("SSLRequest"));
      return packet;
    case kGssEncRequestCode:
      packet.kind = StartupPacket::Kind::kGssEncRequest;
      RILL_RETURN_NOT_OK(r.ExpectEnd("GSSENCRequest"));
      return packet;
    case kCancelRequestCode: {
      packet.kind = StartupPacket::Kind::kCancel;
      RILL_ASSIGN_OR_RAISE(packet.cancel_pid, r.ReadInt32());
      RILL_ASSIGN_OR_RAISE(packet.cancel_secret, r.ReadInt32());
      RILL_RETURN_NOT_OK(r.ExpectEnd("CancelRequest"));
      return packet;
    }
    default:
      break;
  }
  if ((packet.protocol >> 16) != 3) {
    return Status::Invalid("unsupported frontend protocol ", packet.protocol >> 16, ".",
                           packet.protocol & 0xffff, ": only 3.x is served");
  }
  // Name/value pairs ending with an empty name.
  while (true) {
    RILL_ASSIGN_OR_RAISE(auto name, r.ReadString());
    if (name.empty()) {
      break;
    }
    RILL_ASSIGN_OR_RAISE(auto value, r.ReadString());
    packet.parameters.emplace_back(std::string(name), std::string(value));
  }
  RILL_RETURN_NOT_OK(r.ExpectEnd("startup"));
  return packet;
}

Result<ParseMessage> ParseParse(std::string_view body) {
  PgMessageReader r(body);
  ParseMessage m;
  RILL_ASSIGN_OR_RAISE(auto name, r.ReadString());
  RILL_ASSIGN_OR_RAISE(auto query, r.ReadString());
  RILL_ASSIGN_OR_RAISE(int n, r.ReadCount(kMaxParameters, 4, "parameter types"));
  m.name = name;
  m.query = query;
  m.param_types.reserve(n);
  for (int i = 0; i < n; ++i) {
    RILL_ASSIGN_OR_RAISE(int32_t oid, r.ReadInt32());
    m.param_types.push_back(oid);
  }
  RILL_RETURN_NOT_OK(r.ExpectEnd("Parse"));
  return m;
}

Result<BindMessage> ParseBind(std::string_view body) {
  PgMessageReader r(body);
  BindMessage m;
  RILL_ASSIGN_OR_RAISE(auto portal, r.ReadString());
  RILL_ASSIGN_OR_RAISE(auto statement, r.ReadString());
  m.portal = portal;
  m.statement = statement;
  RILL_ASSIGN_OR_RAISE(int nformats, r.ReadCount(kMaxParameters, 2, "parameter formats"));
  m.param_formats.reserve(nformats);
  for (int i = 0; i < nformats; ++i) {
    RILL_ASSIGN_OR_RAISE(int16_t f, r.ReadInt16());
    if (f != 0 && f != 1) {
      return Status::Invalid("invalid parameter format code ", f);
    }
    m.param_formats.push_back(f);
  }
  RILL_ASSIGN_OR_RAISE(int nparams, r.ReadCount(kMaxParameters, 4, "parameters"));
  if (nformats > 1 && nformats != nparams) {
    return Status::Invalid("Bind has ", nformats, " parameter formats for ", nparams,
                           " parameters");
  }
  m.params.reserve(nparams);
  for (int i = 0; i < nparams; ++i) {
    RILL_ASSIGN_OR_RAISE(int32_t len, r.ReadInt32());
    if (len == -1) {
      m.params.emplace_back(std::nullopt);
      continue;
    }
    RILL_ASSIGN_OR_RAISE(auto bytes, r.ReadBytes(len));
    m.params.emplace_back(std::string(bytes));
  }
  RILL_ASSIGN_OR_RAISE(int nresult, r.ReadCount(kMaxParameters, 2, "result formats"));
  m.result_formats.reserve(nresult);
  for (int i = 0; i < nresult; ++i) {
    RILL_ASSIGN_OR_RAISE(int16_t f, r.ReadInt16());
    if (f != 0 && f != 1) {
      return Status::Invalid("invalid result format code ", f);
    }
    m.result_formats.push_back(f);
  }
  RILL_RETURN_NOT_OK(r.ExpectEnd("Bind"));
  return m;
}

Result<DescribeMessage> ParseDescribeOrClose(std::string_view body, const char* what) {
  PgMessageReader r(body);
  DescribeMessage m;
  RILL_ASSIGN_OR_RAISE(uint8_t kind, r.ReadByte());
  if (kind != 'S' && kind != 'P') {
    return Status::Invalid("invalid ", what, " target '", std::string(1, kind),
                           "' (expected 'S' or 'P')");
  }
  m.kind = static_cast<char>(kind);
  RILL_ASSIGN_OR_RAISE(auto name, r.ReadString());
  m.name = name;
  RILL_RETURN_NOT_OK(r.ExpectEnd(what));
  return m;
}

Result<ExecuteMessage> ParseExecute(std::string_view body) {
  PgMessageReader r(body);
  ExecuteMessage m;
  RILL_ASSIGN_OR_RAISE(auto portal, r.ReadString());
  m.portal = portal;
  RILL_ASSIGN_OR_RAISE(m.max_rows, r.ReadInt32());
  if (m.max_rows < 0) {
    m.max_rows = 0;
  }
  RILL_RETURN_NOT_OK(r.ExpectEnd("Execute"));
  return m;
}

Result<std::string> ParseQuery(std::string_view body) {
  PgMessageReader r(body);
  RILL_ASSIGN_OR_RAISE(auto sql, r.ReadString());
  RILL_RETURN_NOT_OK(r.ExpectEnd("Query"));
  return std::string(sql);
}

Result<SaslInitialResponse> ParseSaslInitialResponse(std::string_view body) {
  PgMessageReader r(body);
  SaslInitialResponse m;
  RILL_ASSIGN_OR_RAISE(auto mechanism, r.ReadString());
  RILL_ASSIGN_OR_RAISE(int32_t len, r.ReadInt32());
  m.mechanism = mechanism;
  if (len != -1) {
    RILL_ASSIGN_OR_RAISE(auto data, r.ReadBytes(len));
    m.data = data;
  }
  RILL_RETURN_NOT_OK(r.ExpectEnd("SASLInitialResponse"));
  return m;
}

Result<std::string> ParsePasswordMessage(std::string_view body) {
  PgMessageReader r(body);
  RILL_ASSIGN_OR_RAISE(auto password, r.ReadString());
  RILL_RETURN_NOT_OK(r.ExpectEnd("PasswordMessage"));
  return std::string(password);
}

// ---- PgWriter -----------------------------------------------------------------

void PgWriter::Begin(char type) {
  out_.push_back(type);
  start_ = out_.size();
  out_.append(4, '\0');
}

void PgWriter::Int16(int16_t v) {
  auto u = static_cast<uint16_t>(v);
  out_.push_back(static_cast<char>(u >> 8));
  out_.push_back(static_cast<char>(u & 0xff));
}

void PgWriter::Int32(int32_t v) {
  auto u = static_cast<uint32_t>(v);
  out_.push_back(static_cast<char>(u >> 24));
  out_.push_back(static_cast<char>((u >> 16) & 0xff));
  out_.push_back(static_cast<char>((u >> 8) & 0xff));
  out_.push_back(static_cast<char>(u & 0xff));
}

void PgWriter::CString(std::string_view s) {
  // A NUL inside would end the string early on the client: drop it.
  for (char c : s) {
    if (c != '\0') {
      out_.push_back(c);
    }
  }
  out_.push_back('\0');
}

void PgWriter::End() {
  auto len = static_cast<uint32_t>(out_.size() - start_);
  out_[start_] = static_cast<char>(len >> 24);
  out_[start_ + 1] = static_cast<char>((len >> 16) & 0xff);
  out_[start_ + 2] = static_cast<char>((len >> 8) & 0xff);
  out_[start_ + 3] = static_cast<char>(len & 0xff);
}

void PgWriter::AuthenticationOk() {
  Begin('R');
  Int32(0);
  End();
}

void PgWriter::AuthenticationCleartext() {
  Begin('R');
  Int32(3);
  End();
}

void PgWriter::AuthenticationSasl(std::string_view mechanism) {
  Begin('R');
  Int32(10);
  CString(mechanism);
  Byte(0);
  End();
}

void PgWriter::AuthenticationSaslContinue(std::string_view data) {
  Begin('R');
  Int32(11);
  Bytes(data);
  End();
}

void PgWriter::AuthenticationSaslFinal(std::string_view data) {
  Begin('R');
  Int32(12);
  Bytes(data);
  End();
}

void PgWriter::ParameterStatus(std::string_view name, std::string_view value) {
  Begin('S');
  CString(name);
  CString(value);
  End();
}

void PgWriter::BackendKeyData(int32_t pid, int32_t secret) {
  Begin('K');
  Int32(pid);
  Int32(secret);
  End();
}

void PgWriter::ReadyForQuery(char status) {
  Begin('Z');
  Byte(static_cast<uint8_t>(status));
  End();
}

void PgWriter::CommandComplete(std::string_view tag) {
  Begin('C');
  CString(tag);
  End();
}

void PgWriter::EmptyQueryResponse() {
  Begin('I');
  End();
}

void PgWriter::ParseComplete() {
  Begin('1');
  End();
}

void PgWriter::BindComplete() {
  Begin('2');
  End();
}

void PgWriter::CloseComplete() {
  Begin('3');
  End();
}

void PgWriter::NoData() {
  Begin('n');
  End();
}

void PgWriter::PortalSuspended() {
  Begin('s');
  End();
}

void PgWriter::ParameterDescription(const std::vector<int32_t>& oids) {
  Begin('t');
  Int16(static_cast<int16_t>(oids.size()));
  for (int32_t oid : oids) {
    Int32(oid);
  }
  End();
}

void PgWriter::Error(std::string_view severity, std::string_view sqlstate,
                     std::string_view message) {
  Begin('E');
  Byte('S');
  CString(severity);
  Byte('V');
  CString(severity);
  Byte('C');
  CString(sqlstate);
  Byte('M');
  CString(message);
  Byte(0);
  End();
}

void PgWriter::Notice(std::string_view sqlstate, std::string_view message) {
  Begin('N');
  Byte('S');
  CString("NOTICE");
  Byte('V');
  CString("NOTICE");
  Byte('C');
  CString(sqlstate);
  Byte('M');
  CString(message);
  Byte(0);
  End();
}

}  // namespace rill::pgwire
