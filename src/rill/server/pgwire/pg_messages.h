// PostgreSQL frontend/backend protocol v3: framing, bounded parsing of the
// messages a client sends, and encoding of the messages a server sends.
//
// Everything read from the wire is untrusted. PgFrameDecoder checks every
// length before it buffers a message; PgMessageReader checks every count,
// length and string against the bytes left in its message before anything is
// allocated, and strings must end with a NUL inside the message. Errors are
// Invalid statuses naming what was wrong; the caller closes the connection.
//
// Threads: these are plain values; one connection's objects are used by one
// thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rill/common/status.h"

namespace rill::pgwire {

/// Protocol version 3.0 as sent in a startup packet.
constexpr int32_t kProtocolVersion3 = 196608;
/// Request codes sent in place of a protocol version.
constexpr int32_t kSslRequestCode = 80877103;
constexpr int32_t kGssEncRequestCode = 80877104;
constexpr int32_t kCancelRequestCode = 80877102;
/// Bounds of an untyped startup-phase packet (length word included).
constexpr int32_t kMinStartupPacket = 8;
constexpr int32_t kMaxStartupPacket = 10000;
/// Default cap of a regular message (length word included).
constexpr int64_t kDefaultMaxMessageBytes = 64LL << 20;
/// Cap of a typed message before authentication completes (password,
/// SASLInitialResponse, SASLResponse; length word included): a SCRAM message
/// is a few hundred bytes, so a client that announces more is refused before
/// anything is buffered.
constexpr int64_t kMaxPreAuthMessageBytes = 8 * 1024;
/// At most this many parameters in Parse and Bind.
constexpr int kMaxParameters = 65535;

/// True if `first_bytes` (at least 8 bytes of a new connection) start a
/// PostgreSQL startup, SSLRequest, GSSENCRequest or CancelRequest packet: an
/// int32 length within 8..10,000 followed by the protocol version 3.x or one
/// of the request codes. For the server's listener, which tells pgwire from
/// HTTP by these bytes.
bool IsPostgresStart(std::string_view first_bytes);

/// One frame cut from the byte stream: `type` is 0 for startup-phase packets.
struct PgFrame {
  char type = 0;
  std::string body;  ///< the message without its type byte and length word
};

/// Cuts the client's byte stream into frames. In the startup phase frames are
/// untyped (int32 length, then body); afterwards each frame is a type byte,
/// an int32 length (itself included) and the body.
class PgFrameDecoder {
 public:
  explicit PgFrameDecoder(int64_t max_message_bytes = kDefaultMaxMessageBytes)
      : max_message_bytes_(max_message_bytes) {}

  /// Append received bytes. Nothing is parsed until Next().
  void Append(const char* data, size_t size) { buffer_.append(data, size); }
  /// Cut the next complete frame, if any. Invalid (the connection must close)
  /// when a length is out of bounds; the bytes of a frame are buffered only
  /// after its length was checked.
  Result<std::optional<PgFrame>> Next();
  /// Switch between startup-phase (untyped) and regular (typed) frames.
  void set_startup_phase(bool startup) { startup_ = startup; }
  /// Change the cap of a typed frame (kMaxPreAuthMessageBytes until the
  /// session authenticated, then the server's cap).
  void set_max_message_bytes(int64_t max_message_bytes) {
    max_message_bytes_ = max_message_bytes;
  }
  bool startup_phase() const { return startup_; }
  /// Bytes received and not yet cut into frames.
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  std::string buffer_;
  size_t consumed_ = 0;
  bool startup_ = true;
  int64_t max_message_bytes_;
};

/// Bounded reader over one message body.
class PgMessageReader {
 public:
  explicit PgMessageReader(std::string_view body) : body_(body) {}

  Result<int16_t> ReadInt16();
  Result<int32_t> ReadInt32();
  Result<uint8_t> ReadByte();
  /// A NUL-terminated string; Invalid if no NUL is left in the message.
  Result<std::string_view> ReadString();
  /// `n` raw bytes; Invalid if fewer remain (or n < 0).
  Result<std::string_view> ReadBytes(int64_t n);
  /// A count (int16) that must be within [0, max] and fit the bytes left when
  /// each element takes at least `min_element_bytes`.
  Result<int> ReadCount(int max, int min_element_bytes, const char* what);
  size_t remaining() const { return body_.size() - pos_; }
  /// Invalid unless every byte was read.
  Status ExpectEnd(const char* message) const;

 private:
  std::string_view body_;
  size_t pos_ = 0;
};

// ---- frontend messages ------------------------------------------------------

/// The first packet of a connection.
struct StartupPacket {
  enum class Kind { kStartup, kSslRequest, kGssEncRequest, kCancel };
  Kind kind = Kind::kStartup;
  int32_t protocol = 0;
  /// Parameters of a startup message (user, database, options, ...), in order.
  std::vector<std::pair<std::string, std::string>> parameters;
  int32_t cancel_pid = 0;
  int32_t cancel_secret = 0;
};
Result<StartupPacket> ParseStartupPacket(std::string_view body);

struct ParseMessage {
  std::string name;
  std::string query;
  std::vector<int32_t> param_types;
};
Result<ParseMessage> ParseParse(std::string_view body);

struct BindMessage {
  std::string portal;
  std::string statement;
  std::vector<int16_t> param_formats;  ///< 0, 1 (all) or one per parameter
  std::vector<std::optional<std::string>> params;  ///< nullopt = NULL
  std::vector<int16_t> result_formats;
};
Result<BindMessage> ParseBind(std::string_view body);

struct DescribeMessage {
  char kind = 'S';  ///< 'S' statement or 'P' portal
  std::string name;
};
/// Describe and Close share the layout.
Result<DescribeMessage> ParseDescribeOrClose(std::string_view body, const char* what);

struct ExecuteMessage {
  std::string portal;
  int32_t max_rows = 0;  ///< 0 = all
};
Result<ExecuteMessage> ParseExecute(std::string_view body);

/// Query ('Q'): the SQL text.
Result<std::string> ParseQuery(std::string_view body);

/// SASLInitialResponse: mechanism and the client's first message.
struct SaslInitialResponse {
  std::string mechanism;
  std::string data;
};
Result<SaslInitialResponse> ParseSaslInitialResponse(std::string_view body);
/// PasswordMessage (cleartext): the password.
Result<std::string> ParsePasswordMessage(std::string_view body);

// ---- backend messages ---------------------------------------------------------

/// Builds backend messages into one output buffer.
class PgWriter {
 public:
  /// Start a message of `type`; the length is filled in by End().
  void Begin(char type);
  void Int16(int16_t v);
  void Int32(int32_t v);
  void Byte(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void Bytes(std::string_view bytes) { out_.append(bytes); }
  /// The string followed by a NUL.
  void CString(std::string_view s);
  void End();

  // Whole messages.
  void AuthenticationOk();
  void AuthenticationCleartext();
  void AuthenticationSasl(std::string_view mechanism);
  void AuthenticationSaslContinue(std::string_view data);
  void AuthenticationSaslFinal(std::string_view data);
  void ParameterStatus(std::string_view name, std::string_view value);
  void BackendKeyData(int32_t pid, int32_t secret);
  void ReadyForQuery(char status);
  void CommandComplete(std::string_view tag);
  void EmptyQueryResponse();
  void ParseComplete();
  void BindComplete();
  void CloseComplete();
  void NoData();
  void PortalSuspended();
  void ParameterDescription(const std::vector<int32_t>& oids);
  /// ErrorResponse (severity "ERROR" or "FATAL").
  void Error(std::string_view severity, std::string_view sqlstate, std::string_view message);
  void Notice(std::string_view sqlstate, std::string_view message);

  std::string& buffer() { return out_; }
  size_t size() const { return out_.size(); }

 private:
  std::string out_;
  size_t start_ = 0;
};

}  // namespace rill::pgwire
