#include "nexmark/generator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <arrow/io/file.h>
#include <parquet/arrow/writer.h>

namespace rill::nexmark {
namespace {

constexpr int64_t kHotRounding = 100;  // Beam's HOT_*_RATIO constants
constexpr int64_t kPersonIdLead = 10;
constexpr int64_t kAuctionIdLead = 10;

const char* const kFirstNames[] = {"Peter", "Paul",  "Luke",  "John",   "Saul", "Vicky",
                                   "Kate",  "Julie", "Sarah", "Deiter", "Walter"};
const char* const kLastNames[] = {"Shultz", "Abrams", "Spencer", "White", "Bartels",
                                  "Walton", "Smith",  "Jones",   "Noris"};
const char* const kStates[] = {"AZ", "CA", "ID", "OR", "WA", "WY"};
const char* const kCities[] = {"Phoenix",  "Los Angeles", "San Francisco", "Boise",
                               "Portland", "Bend",        "Redmond",       "Seattle",
                               "Kent",     "Cheyenne"};
const char* const kChannels[] = {"Google", "Facebook", "Baidu", "Apple"};

/// splitmix64 keyed by (seed, event id): the same event whatever the batching.
class Random {
 public:
  Random(uint64_t seed, int64_t event_id)
      : state_(seed * 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(event_id)) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  int64_t Int(int64_t n) { return n <= 0 ? 0 : static_cast<int64_t>(Next() % n); }
  double Double() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  std::string String(int n) {
    std::string s(n, 'a');
    for (auto& c : s) c = static_cast<char>('a' + Int(26));
    return s;
  }

 private:
  uint64_t state_;
};

int64_t LastBase0PersonId(int64_t event_id) {
  const int64_t epoch = event_id / kProportionDenominator;
  int64_t offset = event_id % kProportionDenominator;
  if (offset >= kPersonProportion) offset = kPersonProportion - 1;
  return epoch * kPersonProportion + offset;
}

int64_t LastBase0AuctionId(int64_t event_id) {
  int64_t epoch = event_id / kProportionDenominator;
  int64_t offset = event_id % kProportionDenominator;
  if (offset < kPersonProportion) {
    --epoch;
    offset = kAuctionProportion - 1;
  } else if (offset >= kPersonProportion + kAuctionProportion) {
    offset = kAuctionProportion - 1;
  } else {
    offset -= kPersonProportion;
  }
  return epoch * kAuctionProportion + offset;
}

int64_t NextBase0PersonId(int64_t event_id, Random& r, const GeneratorConfig& c) {
  const int64_t num_people = LastBase0PersonId(event_id) + 1;
  const int64_t active = std::min(num_people, c.num_active_people);
  return num_people - active + r.Int(active + kPersonIdLead);
}

int64_t NextBase0AuctionId(int64_t event_id, Random& r, const GeneratorConfig& c) {
  const int64_t max_auction = LastBase0AuctionId(event_id);
  const int64_t min_auction = std::max<int64_t>(max_auction - c.num_in_flight_auctions, 0);
  return min_auction + r.Int(max_auction - min_auction + 1 + kAuctionIdLead);
}

int64_t NextPrice(Random& r) {
  return static_cast<int64_t>(std::llround(std::pow(10.0, r.Double() * 6) * 100.0));
}

struct Builders {
  // person
  arrow::Int64Builder p_id;
  arrow::StringBuilder p_name, p_email, p_card, p_city, p_state, p_extra;
  arrow::TimestampBuilder p_time{arrow::timestamp(arrow::TimeUnit::MILLI),
                                 arrow::default_memory_pool()};
  // auction
  arrow::Int64Builder a_id, a_initial, a_reserve, a_seller, a_category;
  arrow::StringBuilder a_item, a_desc, a_extra;
  arrow::TimestampBuilder a_time{arrow::timestamp(arrow::TimeUnit::MILLI),
                                 arrow::default_memory_pool()};
  arrow::TimestampBuilder a_expires{arrow::timestamp(arrow::TimeUnit::MILLI),
                                    arrow::default_memory_pool()};
  // bid
  arrow::Int64Builder b_auction, b_bidder, b_price;
  arrow::StringBuilder b_channel, b_url, b_extra;
  arrow::TimestampBuilder b_time{arrow::timestamp(arrow::TimeUnit::MILLI),
                                 arrow::default_memory_pool()};
};

int64_t EventTimeMs(const GeneratorConfig& c, int64_t n) {
  return c.first_event_time_ms + static_cast<int64_t>(std::floor(n * 1000.0 / c.rate));
}

arrow::Status AddPerson(Builders& b, int64_t id, int64_t t, Random& r) {
  const int64_t pid = LastBase0PersonId(id) + kFirstPersonId;
  ARROW_RETURN_NOT_OK(b.p_id.Append(pid));
  ARROW_RETURN_NOT_OK(b.p_name.Append(std::string(kFirstNames[r.Int(11)]) + " " +
                                      kLastNames[r.Int(9)]));
  ARROW_RETURN_NOT_OK(b.p_email.Append(r.String(7) + "@" + r.String(5) + ".com"));
  char card[32];
  std::snprintf(card, sizeof(card), "%04d %04d %04d %04d", static_cast<int>(r.Int(10000)),
                static_cast<int>(r.Int(10000)), static_cast<int>(r.Int(10000)),
                static_cast<int>(r.Int(10000)));
  ARROW_RETURN_NOT_OK(b.p_card.Append(card));
  ARROW_RETURN_NOT_OK(b.p_city.Append(kCities[r.Int(10)]));
  ARROW_RETURN_NOT_OK(b.p_state.Append(kStates[r.Int(6)]));
  ARROW_RETURN_NOT_OK(b.p_time.Append(t));
  return b.p_extra.Append(r.String(8));
}

arrow::Status AddAuction(Builders& b, const GeneratorConfig& c, int64_t id, int64_t t,
                         Random& r) {
  int64_t seller;
  if (r.Int(c.hot_sellers_ratio) > 0) {
    seller = (LastBase0PersonId(id) / kHotRounding) * kHotRounding;
  } else {
    seller = NextBase0PersonId(id, r, c);
  }
  const int64_t initial = NextPrice(r);
  // Beam: an auction lasts until about the time of the event that is
  // num_in_flight_auctions auctions later, times a random factor in [0, 2).
  const int64_t events_ahead =
      c.num_in_flight_auctions * kProportionDenominator / kAuctionProportion;
  const int64_t horizon = EventTimeMs(c, id + events_ahead) - EventTimeMs(c, id);
  ARROW_RETURN_NOT_OK(b.a_id.Append(LastBase0AuctionId(id) + kFirstAuctionId));
  ARROW_RETURN_NOT_OK(b.a_item.Append(r.String(10)));
  ARROW_RETURN_NOT_OK(b.a_desc.Append(r.String(20)));
  ARROW_RETURN_NOT_OK(b.a_initial.Append(initial));
  ARROW_RETURN_NOT_OK(b.a_reserve.Append(initial + NextPrice(r)));
  ARROW_RETURN_NOT_OK(b.a_time.Append(t));
  ARROW_RETURN_NOT_OK(b.a_expires.Append(t + 1 + r.Int(std::max<int64_t>(2 * horizon, 1))));
  ARROW_RETURN_NOT_OK(b.a_seller.Append(seller + kFirstPersonId));
  ARROW_RETURN_NOT_OK(b.a_category.Append(kFirstCategoryId + r.Int(kNumCategories)));
  return b.a_extra.Append(r.String(8));
}

arrow::Status AddBid(Builders& b, const GeneratorConfig& c, int64_t id, int64_t t, Random& r) {
  int64_t auction, bidder;
  if (r.Int(c.hot_auction_ratio) > 0) {
    auction = (LastBase0AuctionId(id) / kHotRounding) * kHotRounding;
  } else {
    auction = NextBase0AuctionId(id, r, c);
  }
  if (r.Int(c.hot_bidders_ratio) > 0) {
    bidder = (LastBase0PersonId(id) / kHotRounding) * kHotRounding + 1;
  } else {
    bidder = NextBase0PersonId(id, r, c);
  }
  ARROW_RETURN_NOT_OK(b.b_auction.Append(auction + kFirstAuctionId));
  ARROW_RETURN_NOT_OK(b.b_bidder.Append(bidder + kFirstPersonId));
  ARROW_RETURN_NOT_OK(b.b_price.Append(NextPrice(r)));
  const int64_t ch = r.Int(10);
  char buf[64];
  if (ch < 4) {
    ARROW_RETURN_NOT_OK(b.b_channel.Append(kChannels[ch]));
  } else {
    const int len = std::snprintf(buf, sizeof(buf), "channel-%d", static_cast<int>(r.Int(10000)));
    ARROW_RETURN_NOT_OK(b.b_channel.Append(buf, len));
  }
  std::memcpy(buf, "https://www.nexmark.com/", 24);
  for (int i = 0; i < 5; ++i) buf[24 + i] = static_cast<char>('a' + r.Int(26));
  std::memcpy(buf + 29, "/item.htm", 9);
  ARROW_RETURN_NOT_OK(b.b_url.Append(buf, 38));
  ARROW_RETURN_NOT_OK(b.b_time.Append(t));
  return b.b_extra.Append("");
}

template <typename B>
arrow::Result<std::shared_ptr<arrow::Array>> Done(B& b) {
  std::shared_ptr<arrow::Array> out;
  ARROW_RETURN_NOT_OK(b.Finish(&out));
  return out;
}

}  // namespace

std::shared_ptr<arrow::Schema> PersonSchema() {
  auto ts = arrow::timestamp(arrow::TimeUnit::MILLI);
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("name", arrow::utf8()),
                        arrow::field("email_address", arrow::utf8()),
                        arrow::field("credit_card", arrow::utf8()),
                        arrow::field("city", arrow::utf8()), arrow::field("state", arrow::utf8()),
                        arrow::field("date_time", ts), arrow::field("extra", arrow::utf8())});
}

std::shared_ptr<arrow::Schema> AuctionSchema() {
  auto ts = arrow::timestamp(arrow::TimeUnit::MILLI);
  return arrow::schema(
      {arrow::field("id", arrow::int64()), arrow::field("item_name", arrow::utf8()),
       arrow::field("description", arrow::utf8()), arrow::field("initial_bid", arrow::int64()),
       arrow::field("reserve", arrow::int64()), arrow::field("date_time", ts),
       arrow::field("expires", ts), arrow::field("seller", arrow::int64()),
       arrow::field("category", arrow::int64()), arrow::field("extra", arrow::utf8())});
}

std::shared_ptr<arrow::Schema> BidSchema() {
  auto ts = arrow::timestamp(arrow::TimeUnit::MILLI);
  return arrow::schema({arrow::field("auction", arrow::int64()),
                        arrow::field("bidder", arrow::int64()),
                        arrow::field("price", arrow::int64()),
                        arrow::field("channel", arrow::utf8()), arrow::field("url", arrow::utf8()),
                        arrow::field("date_time", ts), arrow::field("extra", arrow::utf8())});
}

arrow::Result<EventBatch> Generator::Next(int64_t n) {
  Builders b;
  const int64_t g = std::max<int64_t>(config_.out_of_order_group_size, 1);
  ARROW_RETURN_NOT_OK(b.b_auction.Reserve(n));
  ARROW_RETURN_NOT_OK(b.b_bidder.Reserve(n));
  ARROW_RETURN_NOT_OK(b.b_price.Reserve(n));
  ARROW_RETURN_NOT_OK(b.b_time.Reserve(n));
  for (int64_t k = 0; k < n; ++k, ++next_) {
    // Beam: the id follows the (permuted) adjusted number, the time the arrival.
    const int64_t id = (next_ / g) * g + (next_ * 953) % g;
    Random r(config_.seed, id);
    int64_t t = EventTimeMs(config_, next_);
    if (config_.max_delay_ms > 0) t -= r.Int(config_.max_delay_ms + 1);
    const int64_t rem = id % kProportionDenominator;
    if (rem < kPersonProportion) {
      ARROW_RETURN_NOT_OK(AddPerson(b, id, t, r));
    } else if (rem < kPersonProportion + kAuctionProportion) {
      ARROW_RETURN_NOT_OK(AddAuction(b, config_, id, t, r));
    } else {
      ARROW_RETURN_NOT_OK(AddBid(b, config_, id, t, r));
    }
  }
  EventBatch out;
  ARROW_ASSIGN_OR_RAISE(auto p_id, Done(b.p_id));
  const int64_t np = p_id->length();
  out.person = arrow::RecordBatch::Make(
      PersonSchema(), np,
      {p_id, *Done(b.p_name), *Done(b.p_email), *Done(b.p_card), *Done(b.p_city),
       *Done(b.p_state), *Done(b.p_time), *Done(b.p_extra)});
  ARROW_ASSIGN_OR_RAISE(auto a_id, Done(b.a_id));
  out.auction = arrow::RecordBatch::Make(
      AuctionSchema(), a_id->length(),
      {a_id, *Done(b.a_item), *Done(b.a_desc), *Done(b.a_initial), *Done(b.a_reserve),
       *Done(b.a_time), *Done(b.a_expires), *Done(b.a_seller), *Done(b.a_category),
       *Done(b.a_extra)});
  ARROW_ASSIGN_OR_RAISE(auto b_auction, Done(b.b_auction));
  out.bid = arrow::RecordBatch::Make(
      BidSchema(), b_auction->length(),
      {b_auction, *Done(b.b_bidder), *Done(b.b_price), *Done(b.b_channel), *Done(b.b_url),
       *Done(b.b_time), *Done(b.b_extra)});
  return out;
}

namespace {

void JsonEscape(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

}  // namespace

void AppendNdjsonRows(std::string& out, const char* kind, const arrow::RecordBatch& batch) {
  for (int64_t row = 0; row < batch.num_rows(); ++row) {
    out += "{\"kind\":\"";
    out += kind;
    out += '"';
    for (int c = 0; c < batch.num_columns(); ++c) {
      out += ",\"" + batch.schema()->field(c)->name() + "\":";
      const auto& col = *batch.column(c);
      if (col.type_id() == arrow::Type::STRING) {
        JsonEscape(out, static_cast<const arrow::StringArray&>(col).GetView(row));
      } else if (col.type_id() == arrow::Type::TIMESTAMP) {
        out += std::to_string(static_cast<const arrow::TimestampArray&>(col).Value(row));
      } else {
        out += std::to_string(static_cast<const arrow::Int64Array&>(col).Value(row));
      }
    }
    out += "}\n";
  }
}

arrow::Status AppendNdjson(const EventBatch& batch, const std::string& path) {
  std::string out;
  AppendNdjsonRows(out, "person", *batch.person);
  AppendNdjsonRows(out, "auction", *batch.auction);
  AppendNdjsonRows(out, "bid", *batch.bid);
  std::ofstream f(path, std::ios::app | std::ios::binary);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  if (!f) return arrow::Status::IOError("cannot write ", path);
  return arrow::Status::OK();
}

arrow::Status WriteParquet(const std::vector<EventBatch>& batches, const std::string& prefix) {
  for (const char* kind : {"person", "auction", "bid"}) {
    std::vector<std::shared_ptr<arrow::RecordBatch>> parts;
    for (const auto& b : batches) {
      parts.push_back(kind[0] == 'p' ? b.person : kind[0] == 'a' ? b.auction : b.bid);
    }
    auto schema = kind[0] == 'p' ? PersonSchema() : kind[0] == 'a' ? AuctionSchema() : BidSchema();
    ARROW_ASSIGN_OR_RAISE(auto table, arrow::Table::FromRecordBatches(schema, parts));
    ARROW_ASSIGN_OR_RAISE(auto file, arrow::io::FileOutputStream::Open(
                                         prefix + "_" + kind + ".parquet"));
    ARROW_RETURN_NOT_OK(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), file,
                                                   /*chunk_size=*/128 * 1024));
    ARROW_RETURN_NOT_OK(file->Close());
  }
  return arrow::Status::OK();
}

}  // namespace rill::nexmark
