// lp_core/io_counters.cpp: parsing /proc io text and the kept-open, pread-based reader.
#include "lp_core/io_counters.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace lp {

namespace {

std::mutex g_paths_mu;
std::string g_thread_path;   // "" = default
std::string g_process_path;  // "" = default

std::atomic<uint64_t> g_own_rchar{0};
std::atomic<uint64_t> g_own_wchar{0};
std::atomic<uint64_t> g_own_read_bytes{0};
std::atomic<uint64_t> g_own_write_bytes{0};

}  // namespace

bool parse_proc_io(const char* text, size_t len, IoCounters* out) {
  IoCounters c;
  unsigned found = 0;
  const char* p = text;
  const char* end = text + len;
  while (p < end) {
    const char* colon = static_cast<const char*>(std::memchr(p, ':', size_t(end - p)));
    if (!colon) break;
    // Keys are told apart by length and first letter: rchar, wchar, read_bytes, write_bytes.
    size_t klen = size_t(colon - p);
    uint64_t* slot = nullptr;
    unsigned bit = 0;
    if (klen == 5 && std::memcmp(p, "rchar", 5) == 0) {
      slot = &c.rchar, bit = 1;
    } else if (klen == 5 && std::memcmp(p, "wchar", 5) == 0) {
      slot = &c.wchar, bit = 2;
    } else if (klen == 10 && std::memcmp(p, "read_bytes", 10) == 0) {
      slot = &c.read_bytes, bit = 4;
    } else if (klen == 11 && std::memcmp(p, "write_bytes", 11) == 0) {
      slot = &c.write_bytes, bit = 8;
    }
    const char* q = colon + 1;
    while (q < end && *q == ' ') ++q;
    if (slot) {
      if (q == end || *q < '0' || *q > '9') return false;
      uint64_t v = 0;
      while (q < end && *q >= '0' && *q <= '9') v = v * 10 + uint64_t(*q++ - '0');
      *slot = v;
      found |= bit;
    }
    const char* eol = static_cast<const char*>(std::memchr(q, '\n', size_t(end - q)));
    if (!eol) break;
    p = eol + 1;
  }
  if (found != 15) return false;
  *out = c;
  return true;
}

int IoCounterFile::open(const std::string& path) {
  close();
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  return fd_ < 0 ? errno : 0;
}

long IoCounterFile::read(IoCounters* out) {
  if (fd_ < 0) return -1;
  char buf[512];
  ssize_t n;
  do {
    n = ::pread(fd_, buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return -1;
  g_own_rchar.fetch_add(uint64_t(n), std::memory_order_relaxed);
  if (!parse_proc_io(buf, size_t(n), out)) return -1;
  return long(n);
}

void IoCounterFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

IoCounters own_io_totals() {
  IoCounters c;
  c.rchar = g_own_rchar.load(std::memory_order_relaxed);
  c.wchar = g_own_wchar.load(std::memory_order_relaxed);
  c.read_bytes = g_own_read_bytes.load(std::memory_order_relaxed);
  c.write_bytes = g_own_write_bytes.load(std::memory_order_relaxed);
  return c;
}

void add_own_io(const IoCounters& d) {
  if (d.rchar) g_own_rchar.fetch_add(d.rchar, std::memory_order_relaxed);
  if (d.wchar) g_own_wchar.fetch_add(d.wchar, std::memory_order_relaxed);
  if (d.read_bytes) g_own_read_bytes.fetch_add(d.read_bytes, std::memory_order_relaxed);
  if (d.write_bytes) g_own_write_bytes.fetch_add(d.write_bytes, std::memory_order_relaxed);
}

namespace {
std::mutex* g_own_io_mutex = new std::mutex();  // never destroyed (used until exit)
}  // namespace

std::mutex& own_io_mutex() {
  return *g_own_io_mutex;
}

void reset_own_io_mutex_after_fork() {
  g_own_io_mutex = new std::mutex();
}

OwnIoMeter::OwnIoMeter() : lock_(own_io_mutex()) {
  if (file_.open(thread_io_path()) == 0) started_ = file_.read(&before_) >= 0;
}

void OwnIoMeter::finish() {
  if (done_) return;
  done_ = true;
  IoCounters after;
  long n = started_ ? file_.read(&after) : -1;
  file_.close();
  if (n < 0) {
    lock_.unlock();
    return;
  }
  // rchar is left out: the two reads' own bytes were already added to the totals by read(), and
  // the writes being measured read nothing through read(2).
  IoCounters d;
  d.wchar = after.wchar >= before_.wchar ? after.wchar - before_.wchar : 0;
  d.read_bytes = after.read_bytes >= before_.read_bytes ? after.read_bytes - before_.read_bytes : 0;
  d.write_bytes =
      after.write_bytes >= before_.write_bytes ? after.write_bytes - before_.write_bytes : 0;
  delta_ = d;
  ok_ = true;
  add_own_io(d);
  lock_.unlock();
}

std::string thread_io_path() {
  {
    std::lock_guard<std::mutex> lock(g_paths_mu);
    if (!g_thread_path.empty()) return g_thread_path;
  }
  if (::access("/proc/thread-self/io", R_OK) == 0) return "/proc/thread-self/io";
  return "/proc/self/task/" + std::to_string(long(syscall(SYS_gettid))) + "/io";
}

std::string process_io_path() {
  std::lock_guard<std::mutex> lock(g_paths_mu);
  return g_process_path.empty() ? std::string("/proc/self/io") : g_process_path;
}

void set_io_counter_paths(const std::string& thread_path, const std::string& process_path) {
  std::lock_guard<std::mutex> lock(g_paths_mu);
  g_thread_path = thread_path;
  g_process_path = process_path;
}

}  // namespace lp
