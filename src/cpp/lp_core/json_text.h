// lp_core/json_text.h: appending JSON strings (escaped, UTF-8 validated) and numbers to a buffer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lp {

/// Appends s as a JSON string literal, quotes included. Control characters, quotes and
/// backslashes are escaped; valid UTF-8 passes through; each invalid byte becomes U+FFFD.
void append_json_string(std::string& out, std::string_view s);

/// Appends an unsigned or signed integer in decimal.
void append_json_uint(std::string& out, uint64_t v);
void append_json_int(std::string& out, int64_t v);

/// Appends a finite double with enough digits to round-trip ("null" for NaN or infinity).
void append_json_double(std::string& out, double v);

}  // namespace lp
