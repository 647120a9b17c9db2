// Helpers shared by the metrics tests.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"

namespace rill::testing_metrics {

/// A clock the test moves by hand.
struct FakeClock {
  std::shared_ptr<std::atomic<double>> now = std::make_shared<std::atomic<double>>(1000.0);
  Clock clock() const {
    return [n = now] { return n->load(); };
  }
  void Set(double t) { now->store(t); }
  void Advance(double dt) { now->store(now->load() + dt); }
};

/// A path in the test temp dir, removed (with its WAL) on destruction.
struct TempDbPath {
  explicit TempDbPath(const std::string& stem)
      : path(::testing::TempDir() + "/" + stem + "_" + std::to_string(getpid()) + ".db") {
    Remove();
  }
  ~TempDbPath() { Remove(); }
  void Remove() const {
    std::remove(path.c_str());
    std::remove((path + ".wal").c_str());
  }
  std::string path;
};

inline std::shared_ptr<arrow::Schema> OrdersSchema() {
  return arrow::schema({arrow::field("order_id", arrow::int64()),
                        arrow::field("user_tier", arrow::utf8()),
                        arrow::field("amount", arrow::float64())});
}

inline std::shared_ptr<arrow::RecordBatch> Orders(std::vector<int64_t> ids,
                                                  std::vector<std::string> tiers,
                                                  std::vector<double> amounts) {
  arrow::Int64Builder id;
  arrow::StringBuilder tier;
  arrow::DoubleBuilder amount;
  EXPECT_TRUE(id.AppendValues(ids).ok());
  EXPECT_TRUE(tier.AppendValues(tiers).ok());
  EXPECT_TRUE(amount.AppendValues(amounts).ok());
  return arrow::RecordBatch::Make(OrdersSchema(), static_cast<int64_t>(ids.size()),
                                  {*id.Finish(), *tier.Finish(), *amount.Finish()});
}

/// Run `sql` on the store; fail the test on error.
inline std::shared_ptr<arrow::Table> Query(const MetricsStore& store, const std::string& sql) {
  auto result = store.QueryMetrics(sql);
  EXPECT_TRUE(result.ok()) << sql << ": " << result.status();
  return result.ok() ? *result : nullptr;
}

/// The single value of a one-row, one-column result, as int64.
inline int64_t Count(const MetricsStore& store, const std::string& sql) {
  auto table = Query(store, sql);
  if (table == nullptr || table->num_rows() != 1) {
    ADD_FAILURE() << sql << " did not return one row";
    return -1;
  }
  auto scalar = table->column(0)->GetScalar(0);
  auto cast = (*scalar)->CastTo(arrow::int64());
  if (!cast.ok() || !(*cast)->is_valid) return -1;
  return std::static_pointer_cast<arrow::Int64Scalar>(*cast)->value;
}

/// The single value of a one-row, one-column result, as double (NaN if null).
inline double Value(const MetricsStore& store, const std::string& sql) {
  auto table = Query(store, sql);
  if (table == nullptr || table->num_rows() != 1) {
    ADD_FAILURE() << sql << " did not return one row";
    return -1;
  }
  auto scalar = table->column(0)->GetScalar(0);
  auto cast = (*scalar)->CastTo(arrow::float64());
  if (!cast.ok() || !(*cast)->is_valid) return std::nan("");
  return std::static_pointer_cast<arrow::DoubleScalar>(*cast)->value;
}

/// The single value of a one-row, one-column result, as text ("<null>" if null).
inline std::string Text(const MetricsStore& store, const std::string& sql) {
  auto table = Query(store, sql);
  if (table == nullptr || table->num_rows() != 1) {
    ADD_FAILURE() << sql << " did not return one row";
    return "";
  }
  auto scalar = *table->column(0)->GetScalar(0);
  if (!scalar->is_valid) return "<null>";
  return scalar->ToString();
}

}  // namespace rill::testing_metrics
