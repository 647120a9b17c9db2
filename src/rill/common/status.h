// Status and Result: the error values of the core library.
//
// The core never throws: every fallible function returns arrow::Status or
// arrow::Result<T>. Use the precise code: Invalid for bad input, KeyError for an
// unknown table or column, IOError for connector I/O, Cancelled on shutdown,
// CapacityError when a bounded buffer refuses data.
#pragma once

#include <arrow/result.h>
#include <arrow/status.h>

namespace rill {

using arrow::Result;
using arrow::Status;

}  // namespace rill

/// Return early from the calling function when `expr` is not OK.
#define RILL_RETURN_NOT_OK(expr) ARROW_RETURN_NOT_OK(expr)
/// Assign the value of a Result to `lhs`, or return its error.
#define RILL_ASSIGN_OR_RAISE(lhs, rexpr) ARROW_ASSIGN_OR_RAISE(lhs, rexpr)
