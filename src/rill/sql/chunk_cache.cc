#include "rill/sql/chunk_cache_internal.h"

#include <arrow/array.h>
#include <arrow/record_batch.h>

#include "rill/common/arrow_init.h"
#include "rill/sql/string_dictionary_internal.h"

namespace rill::sql_internal {

ChunkCache::Entry& ChunkCache::EntryLocked(const std::shared_ptr<arrow::RecordBatch>& batch) {
  auto it = entries_.find(batch.get());
  if (it != entries_.end() && it->second.batch.lock() == batch) {
    return it->second;
  }
  // A batch we have not seen: a good moment to drop the entries of the ones
  // that are gone (among them, maybe, a destroyed batch at this address).
  PruneLocked();
  Entry& entry = entries_[batch.get()];
  entry.batch = batch;
  entry.columns.assign(static_cast<size_t>(batch->num_columns()), Column{});
  return entry;
}

std::optional<ColumnSummary> ChunkCache::Summary(
    const std::shared_ptr<arrow::RecordBatch>& batch, int column) {
  if (batch == nullptr || column < 0 || column >= batch->num_columns()) {
    return std::nullopt;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Column& c = EntryLocked(batch).columns[column];
    if (c.summarized) {
      return c.summary;
    }
  }
  // Computed outside the lock; if two threads race, the first result stays.
  auto summary = SummarizeArray(*batch->column(column));
  std::lock_guard<std::mutex> lock(mu_);
  Column& c = EntryLocked(batch).columns[column];
  if (!c.summarized) {
    c.summarized = true;
    c.summary = summary;
  }
  return c.summary;
}

std::shared_ptr<arrow::Array> ChunkCache::Dictionary(
    const std::shared_ptr<arrow::RecordBatch>& batch, int column) {
  if (batch == nullptr || column < 0 || column >= batch->num_columns()) {
    return nullptr;
  }
  const auto type = batch->column(column)->type_id();
  if (type != arrow::Type::STRING && type != arrow::Type::LARGE_STRING) {
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Column& c = EntryLocked(batch).columns[column];
    if (c.encoded) {
      return c.dictionary;
    }
  }
  // Computed outside the lock; if two threads race, the first result stays, so
  // that a live batch has one encoding object per column. An allocation
  // failure leaves the column unencoded.
  auto encoded = EncodeStringDictionary(*batch->column(column), TableMemoryPool());
  std::shared_ptr<arrow::Array> dictionary = encoded.ok() ? *encoded : nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  Column& c = EntryLocked(batch).columns[column];
  if (!c.encoded) {
    c.encoded = true;
    c.dictionary = std::move(dictionary);
  }
  return c.dictionary;
}

size_t ChunkCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void ChunkCache::Prune() {
  std::lock_guard<std::mutex> lock(mu_);
  PruneLocked();
}

void ChunkCache::PruneLocked() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.batch.expired()) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace rill::sql_internal
