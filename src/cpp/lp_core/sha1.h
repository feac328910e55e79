// lp_core/sha1.h: SHA-1 of a byte string (FIPS 180-4), for launcher-derived run ids.
#pragma once

#include <string>
#include <string_view>

namespace lp::identity {

/// The SHA-1 digest of data as 40 lowercase hex digits.
std::string sha1_hex(std::string_view data);

}  // namespace lp::identity
