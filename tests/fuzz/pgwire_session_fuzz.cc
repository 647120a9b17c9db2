// libFuzzer target: arbitrary bytes from a client into a PgSession (framing,
// message parsers, SCRAM exchange, session state machine, SQL lexing and
// parameter decoding). The executor answers without a database, so the
// fuzzer spends its time in the protocol code.
//
// Input layout: byte 0 selects the start state (bit 0: already past startup
// with no authentication; bit 1: SCRAM authentication required; bit 2: fed
// as the network thread feeds, FeedInline then Feed); byte 1 is
// the chunk size the rest is fed in (1..256), to exercise partial reads.
#include <cstddef>
#include <cstdint>
#include <string>

#include <arrow/api.h>

#include "rill/server/pgwire/pg_session.h"

namespace {

class FixedExecutor : public rill::pgwire::PgExecutor {
 public:
  rill::Result<std::shared_ptr<arrow::Table>> Run(const std::string&, std::string_view sql,
                                                  rill::pgwire::PgQueryControl*) override {
    if (sql.size() % 3 == 0) {
      return rill::Status::Invalid("Parser Error: fuzz");
    }
    arrow::Int64Builder ib;
    arrow::StringBuilder sb;
    ARROW_RETURN_NOT_OK(ib.AppendValues({1, 2, 3}));
    ARROW_RETURN_NOT_OK(sb.AppendValues({std::string(sql.substr(0, 16)), "b", "c"}));
    ARROW_ASSIGN_OR_RAISE(auto i, ib.Finish());
    ARROW_ASSIGN_OR_RAISE(auto s, sb.Finish());
    return arrow::Table::Make(
        arrow::schema({arrow::field("i", arrow::int64()), arrow::field("s", arrow::utf8())}),
        {i, s});
  }
};

struct Fixture {
  Fixture() {
    open.executor = &executor;
    open.max_message_bytes = 1 << 16;
    (void)rill::pgwire::PrepareServerConfig(&open);
    scram = open;
    scram.token = "fuzz-token";
    scram.scram = nullptr;
    (void)rill::pgwire::PrepareServerConfig(&scram);
  }
  FixedExecutor executor;
  rill::pgwire::PgServerConfig open;
  rill::pgwire::PgServerConfig scram;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  if (size < 2) {
    return 0;
  }
  const uint8_t mode = data[0];
  const size_t chunk = 1 + data[1];
  data += 2;
  size -= 2;
  rill::pgwire::PgSession session((mode & 2) ? &fixture.scram : &fixture.open);
  if (mode & 1) {
    // Skip the startup packet: user "f", no database.
    static const char kStartup[] = "\0\0\0\x0e\0\x03\0\0user\0f\0\0";
    if (!session.Feed(kStartup, sizeof(kStartup) - 1).ok()) {
      return 0;
    }
    session.output().clear();
  }
  for (size_t at = 0; at < size && !session.closed(); at += chunk) {
    size_t n = std::min(chunk, size - at);
    const char* bytes = reinterpret_cast<const char*>(data + at);
    if (mode & 4) {
      // As the network thread does: cheap messages inline, the rest by Feed.
      bool deferred = false;
      if (!session.FeedInline(bytes, n, &deferred).ok() ||
          (deferred && !session.Feed("", 0).ok())) {
        break;
      }
    } else if (!session.Feed(bytes, n).ok()) {
      break;
    }
    session.output().clear();
  }
  return 0;
}
