// Value encoders behind PgColumnWriter and the date/time arithmetic they share
// with parameter decoding. Private to pgwire.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <arrow/type_fwd.h>

namespace rill::pgwire::internal {

/// Days from 1970-01-01 to 2000-01-01 (PostgreSQL's epoch).
constexpr int32_t kPgEpochDays = 10957;
constexpr int64_t kMicrosPerDay = 86400LL * 1000000;

/// The bytes of a string or binary value (any of Arrow's layouts).
std::string_view BinaryView(const arrow::Array& array, int64_t row);
/// Append the text of nested and other rare types (AppendText's fallback).
void AppendNestedText(const arrow::Array& array, int64_t row, std::string* out);
/// True if AppendBinaryValue can encode values of `type`.
bool HasBinary(const arrow::DataType& type);
/// Append the binary form of `array[row]` (not NULL).
void AppendBinaryValue(const arrow::Array& array, int64_t row, std::string* out);

/// Civil date of days since 1970-01-01.
void CivilFromDays(int64_t days, int64_t* year, int* month, int* day);
/// Days since 1970-01-01 of a civil date.
int64_t DaysFromCivil(int64_t year, int month, int day);
/// Append "YYYY-MM-DD" (with " BC" handled by the caller's suffix).
void AppendDate(int64_t days, std::string* out);
/// Append "HH:MM:SS[.ffffff]" for microseconds within a day.
void AppendTimeOfDay(int64_t micros, std::string* out);
/// Append PostgreSQL's text of an interval.
void AppendInterval(int64_t months, int64_t days, int64_t micros, std::string* out);
/// Append the binary numeric of a decimal text ("-12.340"), `dscale` digits after the point.
void AppendNumericBinary(const std::string& text, int dscale, std::string* out);
/// Decode a binary numeric to its text. False if malformed.
bool NumericBinaryToText(const std::string& bytes, std::string* out);

void PutBE16(int16_t v, std::string* out);
void PutBE32(int32_t v, std::string* out);
void PutBE64(int64_t v, std::string* out);

}  // namespace rill::pgwire::internal
