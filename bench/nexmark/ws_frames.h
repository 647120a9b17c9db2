// A WebSocket client for nexmark_bench's latency runs: it connects to a Rill
// server's /api/v1/stream over a real socket, subscribes to `table:<name>`
// and records, for every frame of that channel, the table version it
// announces and the wall time (ms) it was received.
//
// Frame format (src/rill/server/ws_hub.cc, docs/api.md):
//   {"type":"event","channel":"table:<name>","ts":<s>,"data":{"table":..,
//    "version":<n>,"rows":..,"bytes":..,"changes":[...]}}
// Only the version is read: a row is visible through the WebSocket when the
// first frame announcing its table version, or a later one (the server
// coalesces a slow client's pending changes: the newest version wins), arrives.
//
// Threads: Open/Close from the owner's thread; a reader thread of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rill/common/status.h"

namespace rill::nexmark {

class WsFrameRecorder {
 public:
  struct Frame {
    uint64_t version;
    double received_ms;  ///< wall clock (system_clock), ms
  };

  WsFrameRecorder();
  ~WsFrameRecorder();

  /// Connect to `address` ("127.0.0.1:PORT"), upgrade with `token` (may be
  /// ""), subscribe to table:`table` and wait for the "subscribed" reply, then
  /// start the reader thread. IOError naming what failed.
  Status Open(const std::string& address, const std::string& token, const std::string& table);
  /// Join the reader thread. It ends when the server closes the socket
  /// (Server::Stop) or on a read error; call after stopping the server.
  void Join();

  /// Frames of the table channel received so far, in receive order.
  std::vector<Frame> frames() const;
  /// Frames that were not the table's event (hello, notice, ...).
  int64_t other_frames() const;
  /// The read error that ended the reader, if any ("" while running).
  std::string end_reason() const;

 private:
  void Read();

  struct Socket;
  std::unique_ptr<Socket> socket_;
  std::string channel_;
  std::thread reader_;
  mutable std::mutex mu_;
  std::vector<Frame> frames_;  // guarded by mu_
  int64_t other_ = 0;          // guarded by mu_
  std::string end_;            // guarded by mu_
};

/// Latencies (ms) from matching row stamps to frames: `stamped` holds, per
/// table version (ascending), the push times (wall ms) of rows first visible
/// in it; a row's latency is the receive time of the first frame (in receive
/// order) announcing its version or a later one, minus its stamp. Only frames
/// received at or after `from_ms` count. `versions_without_frame` (optional):
/// versions matched to a later version's frame (coalesced or skipped).
struct StampedVersion {
  uint64_t version;
  std::vector<double> stamps_ms;
};
std::vector<float> MatchFrames(const std::vector<StampedVersion>& stamped,
                               const std::vector<WsFrameRecorder::Frame>& frames,
                               double from_ms, int64_t* versions_without_frame = nullptr);

}  // namespace rill::nexmark
