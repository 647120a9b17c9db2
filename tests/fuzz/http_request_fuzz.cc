// libFuzzer target over the server's HTTP request handling: the bytes are
// parsed with the server's parser and limits (ParseHttpRequest) and, when they
// form a request, routed exactly as a connection would route them
// (Server::Handle: token check, JSON bodies, SQL, every route) against an
// engine with one small table. A streamed reply is drained to its end.
//
// Seeds: tests/fuzz/corpus/http_request/.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include <arrow/api.h>

#include "rill/engine/engine.h"
#include "rill/server/http_parse.h"
#include "rill/server/server.h"

namespace {

struct World {
  std::unique_ptr<rill::Engine> engine;
  std::unique_ptr<rill::server::Server> server;

  World() {
    engine = rill::Engine::Make().ValueOrDie();
    auto schema = arrow::schema({arrow::field("id", arrow::int64()),
                                 arrow::field("name", arrow::utf8())});
    rill::TableOptions options;
    options.primary_key = {"id"};
    auto table = engine->RegisterTable("t", schema, options).ValueOrDie();
    arrow::Int64Builder ids;
    arrow::StringBuilder names;
    for (int64_t i = 0; i < 16; ++i) {
      (void)ids.Append(i);
      (void)names.Append("n" + std::to_string(i));
    }
    auto batch = arrow::RecordBatch::Make(schema, 16, {*ids.Finish(), *names.Finish()});
    (void)table->Write(batch);
    rill::server::ServerOptions so;
    so.listen = "127.0.0.1:0";  // loopback only; the fuzzer never connects
    so.token = "fuzz";
    so.query_timeout_seconds = 1;
    so.max_json_result_bytes = 1 << 20;
    server = rill::server::Server::Make(engine.get(), nullptr, so).ValueOrDie();
    (void)server->Start();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World world;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  rill::server::ParsedRequest parsed =
      rill::server::ParseHttpRequest(bytes, 16 * 1024, 1 << 20);
  if (parsed.error_status != 0) {
    return 0;
  }
  rill::server::HttpReply reply = world.server->Handle(parsed.request);
  if (reply.next_chunk) {
    for (int i = 0; i < 1000; ++i) {
      auto piece = reply.next_chunk();
      if (!piece.ok() || !piece->has_value()) break;
    }
  }
  return 0;
}
