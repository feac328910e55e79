// tests/cpp/test_resources.cpp: /proc io parsing, io=True arithmetic, the sampler's step and its
// race-free read of another thread's open phase (run under TSan by scripts/cpp-tests).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "lp_core/io_counters.h"
#include "lp_core/names.h"
#include "lp_core/nvml.h"
#include "lp_core/recorder.h"
#include "lp_core/sampler.h"

namespace {

std::string temp_path(const char* tag) {
  return "/tmp/lp_core_test_" + std::to_string(getpid()) + "_" + tag;
}

// Rewrites path in place (same inode), as a kept-open fd must see it.
void script_io(const std::string& path, uint64_t rchar, uint64_t wchar, uint64_t rb, uint64_t wb) {
  FILE* f = std::fopen(path.c_str(), "r+");
  if (!f) f = std::fopen(path.c_str(), "w");
  REQUIRE(f);
  std::fprintf(f,
               "rchar: %llu\nwchar: %llu\nsyscr: 1\nsyscw: 2\nread_bytes: %llu\nwrite_bytes: "
               "%llu\ncancelled_write_bytes: 0\n",
               (unsigned long long)rchar, (unsigned long long)wchar, (unsigned long long)rb,
               (unsigned long long)wb);
  std::fflush(f);
  REQUIRE(ftruncate(fileno(f), ftell(f)) == 0);
  std::fclose(f);
}

}  // namespace

TEST_CASE("parse_proc_io reads the four counters and refuses partial text") {
  const char text[] =
      "rchar: 12\nwchar: 34\nsyscr: 5\nsyscw: 6\nread_bytes: 4096\nwrite_bytes: 8192\n"
      "cancelled_write_bytes: 0\n";
  lp::IoCounters c;
  REQUIRE(lp::parse_proc_io(text, sizeof text - 1, &c));
  CHECK(c.rchar == 12);
  CHECK(c.wchar == 34);
  CHECK(c.read_bytes == 4096);
  CHECK(c.write_bytes == 8192);
  const char missing[] = "rchar: 12\nwchar: 34\nread_bytes: 1\n";
  CHECK_FALSE(lp::parse_proc_io(missing, sizeof missing - 1, &c));
  const char bad[] = "rchar: x\nwchar: 34\nread_bytes: 1\nwrite_bytes: 2\n";
  CHECK_FALSE(lp::parse_proc_io(bad, sizeof bad - 1, &c));
  CHECK_FALSE(lp::parse_proc_io("", 0, &c));
}

TEST_CASE("the real /proc/thread-self/io is readable and counts a write") {
  lp::IoCounterFile f;
  REQUIRE(f.open(lp::thread_io_path()) == 0);
  lp::IoCounters a, b;
  REQUIRE(f.read(&a) > 0);
  std::string path = temp_path("w");
  std::string data(10000, 'x');
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, data.data(), data.size()) == ssize_t(data.size()));
  ::close(fd);
  REQUIRE(f.read(&b) > 0);
  // exactly our bytes, plus whatever a sanitizer runtime may log from this thread
  CHECK(b.wchar - a.wchar >= 10000);
  CHECK(b.wchar - a.wchar < 10000 + 4096);
  std::remove(path.c_str());
}

TEST_CASE("enter_io/exit_io: deltas, own-read subtraction, failed reads") {
  std::string path = temp_path("tio");
  script_io(path, 1000, 2000, 300, 400);
  lp::set_io_counter_paths(path, "");
  {
    lp::Recorder rec(lp::RecorderOptions{false});
    lp::ThreadState* ts = rec.register_thread("main");
    uint32_t id = lp::NameTable::instance().intern("load");
    int token = 0;
    long first_len = 0;
    {
      std::ifstream in(path);
      std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      first_len = long(s.size());
    }
    ts->enter_io(id, &token);
    script_io(path, 1000 + uint64_t(first_len) + 5000, 2070, 300 + 4096, 400 + 8192);
    ts->exit_io(&token);
    // failed exit read
    ts->enter_io(id, &token);
    {
      std::ofstream out(path, std::ios::in | std::ios::out);
      out << "garbage";
    }
    ts->exit_io(&token);
    auto snap = rec.snapshot();
    REQUIRE(snap.size() == 1);
    const lp::NodeSnapshot* n = nullptr;
    for (auto& s : snap[0].nodes) {
      if (s.name_id == id) n = &s;
    }
    REQUIRE(n);
    CHECK(n->calls == 2);
    CHECK(n->io_calls == 1);
    CHECK(n->io_failed == 1);
    CHECK(n->io_rchar == 5000);
    CHECK(n->io_wchar == 70);
    CHECK(n->io_read_bytes == 4096);
    CHECK(n->io_write_bytes == 8192);
  }
  lp::set_io_counter_paths("", "");
  std::remove(path.c_str());
}

TEST_CASE("a missing NVML library is no GPU, and never throws") {
  lp::Nvml nvml;
  CHECK_FALSE(nvml.open("/nonexistent/libnvidia-ml.so.1"));
  CHECK(nvml.device_count() == 0);
  CHECK(nvml.error().find("cannot load NVML") == 0);
}

TEST_CASE("the sampler reads another thread's open phase while it records (TSan)") {
  std::string pio = temp_path("pio");
  std::string samples = temp_path("s.samples");
  script_io(pio, 0, 0, 0, 0);
  lp::set_io_counter_paths("", pio);
  {
    lp::Recorder rec(lp::RecorderOptions{false});
    lp::Sampler sampler(rec);
    sampler.configure(samples, 0, uint32_t(getpid()), false);
    std::atomic<bool> stop{false};
    std::atomic<bool> started{false};
    std::thread owner([&] {
      lp::ThreadState* ts = rec.register_thread("owner");
      uint32_t a = lp::NameTable::instance().intern("a");
      uint32_t b = lp::NameTable::instance().intern("b");
      int ta = 0, tb = 0;
      started = true;
      for (uint32_t i = 0; !stop.load(); ++i) {
        ts->enter(a, &ta);
        ts->enter(i % 3 ? b : lp::NameTable::instance().intern("c" + std::to_string(i % 50)), &tb);
        ts->exit(&tb);
        ts->exit(&ta);
      }
    });
    while (!started.load()) std::this_thread::yield();
    for (int i = 0; i < 300; ++i) {
      script_io(pio, uint64_t(i) * 10, uint64_t(i) * 20, 0, 0);
      sampler.sample_now();
      auto path = rec.first_thread_open_path();
      CHECK(path.size() <= 2);
    }
    stop = true;
    owner.join();
    lp::SamplerStats st = sampler.stats();
    CHECK(st.rows == 299);
    CHECK(st.dropped == 0);
  }
  lp::set_io_counter_paths("", "");
  std::remove(pio.c_str());
  std::remove(samples.c_str());
  std::remove((temp_path("s") + ".tags").c_str());
}
