// Nexmark event generator: the online-auction stream (persons, auctions, bids)
// of the Apache Beam Nexmark suite, produced directly as Arrow record batches.
//
// Rules followed (Beam's `NexmarkUtils`/`GeneratorConfig`/`*Generator` classes):
//   - event number n → kind by n % 50: 1 person, 3 auctions, 46 bids (1:3:46);
//   - ids: persons from 1000, auctions from 1000, categories 10..14; a new
//     person or auction takes the next id of its kind;
//   - auction sellers: 1 in `hot_sellers_ratio` (4) a recent person (one of the
//     last 1000 active, up to 10 ids ahead), the rest the "hot" seller (the last
//     person id rounded down to a multiple of 100);
//   - bids: auction 1 in `hot_auction_ratio` (2) one of the last 100 in-flight
//     auctions (+10 lead), else the hot auction (last id rounded down to 100);
//     bidder 1 in `hot_bidders_ratio` (4) a recent person, else the hot bidder;
//   - prices 10^(u*6) * 100 cents (log-uniform), reserve = initial + price;
//   - event time: first_event_time_ms + n * 1000 / rate (an event every
//     1/rate seconds of event time);
//   - out of order: with out_of_order_group_size G > 1, ids inside each group of
//     G events are permuted (n → n/G*G + (n*953) % G, Beam's rule) while the
//     timestamps keep the arrival order; `max_delay_ms` additionally moves each
//     event's time back by a uniform [0, max_delay_ms] (event-time disorder).
// Randomness: splitmix64 keyed by (seed, event id), so event n is the same
// whatever the batch size (not bit-identical to Beam's java.util.Random).
//
// Threads: a generator is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <arrow/api.h>

namespace rill::nexmark {

/// Nexmark constants (Beam's defaults).
inline constexpr int64_t kPersonProportion = 1;
inline constexpr int64_t kAuctionProportion = 3;
inline constexpr int64_t kBidProportion = 46;
inline constexpr int64_t kProportionDenominator = 50;
inline constexpr int64_t kFirstPersonId = 1000;
inline constexpr int64_t kFirstAuctionId = 1000;
inline constexpr int64_t kFirstCategoryId = 10;
inline constexpr int64_t kNumCategories = 5;

struct GeneratorConfig {
  uint64_t seed = 1;
  /// Events per second of event time.
  double rate = 10000;
  /// Event time of event 0, unix ms.
  int64_t first_event_time_ms = 1'700'000'000'000;
  int64_t out_of_order_group_size = 1;
  int64_t max_delay_ms = 0;
  /// 1 in N picks a non-hot auction / seller / bidder (Beam defaults 2, 4, 4).
  int64_t hot_auction_ratio = 2;
  int64_t hot_sellers_ratio = 4;
  int64_t hot_bidders_ratio = 4;
  int64_t num_active_people = 1000;
  int64_t num_in_flight_auctions = 100;
};

/// One batch of events split by kind (each kind's rows in event order).
struct EventBatch {
  std::shared_ptr<arrow::RecordBatch> person;
  std::shared_ptr<arrow::RecordBatch> auction;
  std::shared_ptr<arrow::RecordBatch> bid;
  int64_t events() const {
    return person->num_rows() + auction->num_rows() + bid->num_rows();
  }
};

/// person(id, name, email_address, credit_card, city, state, date_time, extra)
std::shared_ptr<arrow::Schema> PersonSchema();
/// auction(id, item_name, description, initial_bid, reserve, date_time, expires,
/// seller, category, extra)
std::shared_ptr<arrow::Schema> AuctionSchema();
/// bid(auction, bidder, price, channel, url, date_time, extra)
std::shared_ptr<arrow::Schema> BidSchema();

class Generator {
 public:
  explicit Generator(GeneratorConfig config) : config_(config) {}
  /// Return the next `n` events (event numbers [events_so_far, +n)).
  arrow::Result<EventBatch> Next(int64_t n);
  int64_t events_so_far() const { return next_; }
  const GeneratorConfig& config() const { return config_; }

 private:
  GeneratorConfig config_;
  int64_t next_ = 0;
};

/// Append the rows of `batch` (events of `kind`: "person", "auction" or "bid")
/// to `out` as NDJSON lines {"kind": kind, ...fields} (times as unix ms).
void AppendNdjsonRows(std::string& out, const char* kind, const arrow::RecordBatch& batch);
/// Write `batch` as NDJSON lines (AppendNdjsonRows, persons, auctions, bids)
/// appended to `path`.
arrow::Status AppendNdjson(const EventBatch& batch, const std::string& path);
/// Write all events of `batches` as three Parquet files <prefix>_{person,auction,bid}.parquet.
arrow::Status WriteParquet(const std::vector<EventBatch>& batches, const std::string& prefix);

}  // namespace rill::nexmark
