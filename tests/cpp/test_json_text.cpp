// tests/cpp/test_json_text.cpp: JSON escaping of any phase name.
#include <doctest/doctest.h>

#include <string>

#include "lp_core/json_text.h"

static std::string esc(std::string_view s) {
  std::string out;
  lp::append_json_string(out, s);
  return out;
}

TEST_CASE("quotes, backslashes and control characters are escaped") {
  CHECK(esc("a\"b") == "\"a\\\"b\"");
  CHECK(esc("a\\b") == "\"a\\\\b\"");
  CHECK(esc("tab\there") == "\"tab\\u0009here\"");
  CHECK(esc(std::string("nul\0x", 5)) == "\"nul\\u0000x\"");
  CHECK(esc("\x7f") == "\"\\u007f\"");
}

TEST_CASE("valid UTF-8 passes through; invalid bytes become U+FFFD") {
  CHECK(esc("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80") ==
        "\"caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80\"");
  CHECK(esc("bad\xff") == "\"bad\\ufffd\"");
  CHECK(esc("\xc3") == "\"\\ufffd\"");                        // truncated sequence
  CHECK(esc("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // encoded surrogate
  CHECK(esc("\xc0\xaf") == "\"\\ufffd\\ufffd\"");             // overlong
}

TEST_CASE("numbers") {
  std::string out;
  lp::append_json_uint(out, 18446744073709551615ull);
  out.push_back(' ');
  lp::append_json_int(out, -5);
  out.push_back(' ');
  lp::append_json_double(out, 0.5);
  out.push_back(' ');
  lp::append_json_double(out, 1.0 / 0.0);
  CHECK(out == "18446744073709551615 -5 0.5 null");
}
