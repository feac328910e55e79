// tests/cpp/test_meta_doc.cpp: the worker file's meta object (lp_core/meta_doc.h), both
// profilers' one builder: its keys and their order, escaping, nulls, exit_signal only when set,
// and the facts it computes itself checked against what this test reads from /proc and
// pyproject.toml.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "lp_core/identity.h"
#include "lp_core/meta_doc.h"

namespace {

// The top-level keys of a flat JSON object, in order (values: strings, numbers, literals and
// arrays of strings), read by a scanner of this test's own.
std::vector<std::string> keys_of(const std::string& json) {
  std::vector<std::string> keys;
  int depth = 0;
  bool expect_key = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (c == '"') {
      size_t j = i + 1;
      std::string s;
      while (j < json.size() && json[j] != '"') {
        if (json[j] == '\\') ++j;  // the escaped character is part of the string
        s.push_back(json[j]);
        ++j;
      }
      if (depth == 1 && expect_key) keys.push_back(s);
      expect_key = false;
      i = j;
    } else if (c == '{' || c == '[') {
      ++depth;
      expect_key = c == '{';
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == ',' && depth == 1) {
      expect_key = true;
    }
  }
  return keys;
}

// The raw JSON text of a top-level key's value (up to the next "," or "}" outside strings and
// arrays), or "<absent>".
std::string value_of(const std::string& json, const std::string& key) {
  std::string needle = "\"" + key + "\":";
  size_t at = json.find(needle);
  if (at == std::string::npos) return "<absent>";
  size_t i = at + needle.size();
  int depth = 0;
  bool in_string = false;
  std::string out;
  for (; i < json.size(); ++i) {
    char c = json[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\') {
        out.push_back(json[++i]);
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (depth == 0 && (c == ',' || c == '}')) break;
    if (c == '"') in_string = true;
    if (c == '[') ++depth;
    if (c == ']') --depth;
    out.push_back(c);
  }
  return out;
}

const std::vector<std::string> kKeys = {"role",
                                        "process_name",
                                        "parent_role",
                                        "pid",
                                        "process_start",
                                        "ppid",
                                        "host",
                                        "host_dir",
                                        "run_id",
                                        "uuid",
                                        "start_unix_ns",
                                        "start_time",
                                        "rank",
                                        "rank_source",
                                        "local_rank",
                                        "job_id",
                                        "argv",
                                        "signal_flush",
                                        "python",
                                        "runtime",
                                        "measure_cpu",
                                        "snapshot_interval_s",
                                        "sample_interval_s",
                                        "thread_names",
                                        "strict_names",
                                        "annotate",
                                        "backend",
                                        "lines",
                                        "lines_entries",
                                        "lineprofiler_version"};

lp::MetaDoc sample_doc() {
  lp::MetaDoc doc;
  doc.role = "a\"b\\c\x01\n caf\xc3\xa9 \xe6\x97\xa5";
  doc.pid = 4242;
  doc.host_dir = "node07";
  doc.run_id = "20261202T1535-471c94";
  doc.uuid = "6ab9aed9";
  doc.start_unix_ns = 1796226212307709290ull;
  doc.argv = {"train.py", "--token=se\"cr\\et", "--name", "r\xc3\xa9sum\xc3\xa9\t\x7f", "bad\xff"};
  doc.runtime = "c++";
  return doc;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("one key set in one order; exit_signal last, only when set") {
  lp::MetaDoc doc = sample_doc();
  std::string json = lp::meta_json(doc);
  CHECK(keys_of(json) == kKeys);
  CHECK(value_of(json, "exit_signal") == "<absent>");
  doc.exit_signal = "SIGTERM";
  json = lp::meta_json(doc);
  std::vector<std::string> with_signal = kKeys;
  with_signal.push_back("exit_signal");
  CHECK(keys_of(json) == with_signal);
  CHECK(value_of(json, "exit_signal") == "\"SIGTERM\"");
  CHECK(json.front() == '{');
  CHECK(json.back() == '}');
}

TEST_CASE("quotes, backslashes, control characters and non-ASCII in role and argv") {
  std::string json = lp::meta_json(sample_doc());
  CHECK(value_of(json, "role") == "\"a\\\"b\\\\c\\u0001\\u000a caf\xc3\xa9 \xe6\x97\xa5\"");
  // The secret's value is masked (quote and backslash gone with it); the rest escaped as text.
  CHECK(value_of(json, "argv") ==
        "[\"train.py\",\"--token=<masked>\",\"--name\",\"r\xc3\xa9sum\xc3\xa9\\u0009\\u007f\","
        "\"bad\\ufffd\"]");
}

TEST_CASE("unknown optionals are null; options as given") {
  lp::MetaDoc doc = sample_doc();
  std::string json = lp::meta_json(doc);
  for (const char* key : {"process_name", "parent_role", "python", "backend", "lines_entries",
                          "snapshot_interval_s", "sample_interval_s"}) {
    CAPTURE(key);
    CHECK(value_of(json, key) == "null");
  }
  CHECK(value_of(json, "lines") == "[]");
  CHECK(value_of(json, "runtime") == "\"c++\"");
  CHECK(value_of(json, "signal_flush") == "false");
  CHECK(value_of(json, "measure_cpu") == "true");

  doc.process_name = "ForkPoolWorker-2";
  doc.parent_role = "learner";
  doc.python = "3.11.7";
  doc.runtime = "python";
  doc.backend = "torch";
  doc.lines = {"train_step", "a\"b"};
  doc.lines_entries = 20;
  doc.snapshot_interval_s = 0.5;
  doc.sample_interval_s = 2;
  doc.signal_flush = true;
  doc.measure_cpu = false;
  doc.thread_names = doc.strict_names = doc.annotate = true;
  json = lp::meta_json(doc);
  CHECK(value_of(json, "process_name") == "\"ForkPoolWorker-2\"");
  CHECK(value_of(json, "parent_role") == "\"learner\"");
  CHECK(value_of(json, "python") == "\"3.11.7\"");
  CHECK(value_of(json, "runtime") == "\"python\"");
  CHECK(value_of(json, "backend") == "\"torch\"");
  CHECK(value_of(json, "lines") == "[\"train_step\",\"a\\\"b\"]");
  CHECK(value_of(json, "lines_entries") == "20");
  CHECK(value_of(json, "snapshot_interval_s") == "0.5");
  CHECK(value_of(json, "sample_interval_s") == "2");
  for (const char* key : {"signal_flush", "thread_names", "strict_names", "annotate"}) {
    CAPTURE(key);
    CHECK(value_of(json, key) == "true");
  }
  CHECK(value_of(json, "measure_cpu") == "false");
  CHECK(keys_of(json) == kKeys);
}

TEST_CASE("at most 8 arguments of argv are written") {
  lp::MetaDoc doc = sample_doc();
  doc.argv.clear();
  for (int i = 0; i < 12; ++i) doc.argv.push_back("a" + std::to_string(i));
  CHECK(value_of(lp::meta_json(doc), "argv") ==
        "[\"a0\",\"a1\",\"a2\",\"a3\",\"a4\",\"a5\",\"a6\",\"a7\"]");
}

TEST_CASE("the shared facts: ids as given, ppid, process start, host and version") {
  lp::MetaDoc doc = sample_doc();
  std::string json = lp::meta_json(doc);
  CHECK(value_of(json, "pid") == "4242");
  CHECK(value_of(json, "run_id") == "\"20261202T1535-471c94\"");
  CHECK(value_of(json, "uuid") == "\"6ab9aed9\"");
  CHECK(value_of(json, "host_dir") == "\"node07\"");
  CHECK(value_of(json, "start_unix_ns") == "1796226212307709290");
  CHECK(std::stod(value_of(json, "start_time")) == doc.start_unix_ns / 1e9);
  CHECK(value_of(json, "ppid") == std::to_string(getppid()));
  CHECK(value_of(json, "host") == "\"" + lp::identity::real_host_name() + "\"");

  // process_start: "<boot id>:<field 22 of /proc/self/stat>", read here by other code.
  std::string stat = read_file("/proc/self/stat");
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::vector<std::string> fields((std::istream_iterator<std::string>(rest)),
                                  std::istream_iterator<std::string>());
  REQUIRE(fields.size() > 19);
  std::string boot = read_file("/proc/sys/kernel/random/boot_id");
  while (!boot.empty() && (boot.back() == '\n' || boot.back() == ' ')) boot.pop_back();
  CHECK(value_of(json, "process_start") == "\"" + boot + ":" + fields[19] + "\"");
  CHECK(lp::identity::own_process_start() == boot + ":" + fields[19]);

  // The version: pyproject.toml's, as CMake compiled it in.
  std::string source = __FILE__;
  std::string pyproject = read_file(source.substr(0, source.rfind("/tests/")) + "/pyproject.toml");
  size_t at = pyproject.find("\nversion = \"");
  REQUIRE(at != std::string::npos);
  at += 12;
  std::string version = pyproject.substr(at, pyproject.find('"', at) - at);
  CHECK(value_of(json, "lineprofiler_version") == "\"" + version + "\"");
  CHECK(std::string(lp::package_version()) == version);
}
