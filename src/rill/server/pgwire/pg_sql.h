// Lexical helpers over client SQL text: split a simple-query string into
// statements, find and substitute `$n` parameters, read the leading keywords.
// Quoted strings ('...', E'...', $tag$...$tag$), quoted identifiers and
// comments are skipped, so a ';' or '$1' inside them is left alone.
//
// Threads: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rill/common/status.h"

namespace rill::pgwire {

/// Split `sql` at top-level semicolons. Statements that hold only whitespace
/// and comments are dropped, so an empty result means an empty query.
std::vector<std::string> SplitStatements(std::string_view sql);

/// Return the highest `$n` parameter number used in `sql` (0 if none).
/// Invalid for a parameter number above 65535.
Result<int> CountParameters(std::string_view sql);

/// Replace each `$n` with `literals[n-1]`. Invalid when n is out of range.
Result<std::string> SubstituteParameters(std::string_view sql,
                                         const std::vector<std::string>& literals);

/// Return the first `count` words of `sql` in upper case (comments, whitespace
/// and opening parentheses skipped), e.g. {"SET", "SESSION"}.
std::vector<std::string> LeadingWords(std::string_view sql, int count);

/// True if `s` is well-formed UTF-8 (no overlong forms, surrogates or NUL).
bool IsValidUtf8(std::string_view s);

/// Return `sql` without comments and surrounding whitespace or trailing ';'.
std::string TrimStatement(std::string_view sql);

}  // namespace rill::pgwire
