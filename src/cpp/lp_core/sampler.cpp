// lp_core/sampler.cpp: the sampler's step (counters, RSS, GPU, tag), its sidecar files and thread.
#include "lp_core/sampler.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "lp_core/clock.h"
#include "lp_core/json_text.h"
#include "lp_core/names.h"
#include "lp_core/recorder.h"
#include "lp_core/worker_file.h"

namespace lp {

namespace {

// Writes all of buf; returns 0 or errno.
int write_all(int fd, const void* buf, size_t len) {
  const char* p = static_cast<const char*>(buf);
  while (len) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    len -= size_t(n);
  }
  return 0;
}

void put_u32(char* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}
void put_u64(char* p, uint64_t v) {
  std::memcpy(p, &v, 8);
}

// RSS in bytes from /proc/self/statm ("size resident ..." in pages), or -1.
int64_t read_rss(int fd) {
  if (fd < 0) return -1;
  char buf[128];
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  add_own_io(IoCounters{uint64_t(n), 0, 0, 0});
  buf[n] = 0;
  char* p = buf;
  while (*p && *p != ' ') ++p;
  if (*p != ' ') return -1;
  ++p;
  if (*p < '0' || *p > '9') return -1;
  int64_t pages = 0;
  while (*p >= '0' && *p <= '9') pages = pages * 10 + (*p++ - '0');
  return pages * int64_t(sysconf(_SC_PAGESIZE));
}

}  // namespace

Sampler::Sampler(const Recorder& recorder) : recorder_(recorder) {}

Sampler::~Sampler() {
  stop();
  if (statm_fd_ >= 0) ::close(statm_fd_);
  if (samples_fd_ >= 0) ::close(samples_fd_);
  if (tags_fd_ >= 0) ::close(tags_fd_);
  delete nvml_;
}

void Sampler::set_dir(WorkerDir* dir) {
  std::lock_guard<std::mutex> lock(mu_);
  dir_ = dir ? dir : &own_dir_;
}

// Creates a sidecar (see create_file_at: never through a link planted at its name). Returns the
// fd or -1, with the reason in stats_.last_error.
int Sampler::open_sidecar_locked(const std::string& path) {
  if (dir_ == &own_dir_) own_dir_.set_path(dir_of(path));
  int err = 0;
  std::string why;
  int dir_fd = dir_->fd(&err, &why);
  if (dir_fd < 0) {
    stats_.last_error = why;
    return -1;
  }
  int fd = create_file_at(dir_fd, base_of(path));
  if (fd < 0) stats_.last_error = std::strerror(errno);
  return fd;
}

// Appends one whole row (or the header), or nothing: a write that fails part-way (a full disk) is
// rolled back to the last whole row, so every later row stays aligned. If even the rollback
// fails, no further row is written.
bool Sampler::write_row_bytes_locked(const void* data, size_t len) {
  int err = write_all(samples_fd_, data, len);
  if (!err) {
    samples_bytes_ += len;
    return true;
  }
  stats_.write_errors += 1;
  stats_.last_error = std::strerror(err);
  if (ftruncate(samples_fd_, off_t(samples_bytes_)) != 0) {
    stats_.last_error += " (and the partial row could not be removed: no further rows)";
    ::close(samples_fd_);
    samples_fd_ = -1;
  }
  return false;
}

void Sampler::configure(std::string samples_path, uint64_t interval_ns, uint32_t pid, bool gpu) {
  std::lock_guard<std::mutex> lock(mu_);
  path_ = std::move(samples_path);
  tags_path_ = with_suffix(path_, ".samples", ".tags");
  interval_ns_ = interval_ns;
  pid_ = pid;
  gpu_wanted_ = gpu;
}

void Sampler::set_cuda_probe(CudaProbe probe) {
  std::lock_guard<std::mutex> lock(mu_);
  cuda_probe_ = std::move(probe);
}

// The sum, over the process's live threads, of their I/O since the previous call (a thread seen
// for the first time counts from its birth). Each thread's file is opened, read and closed: a
// process with hundreds of threads must not find hundreds of descriptors taken by its profiler.
bool Sampler::read_tasks_locked(IoCounters* live_delta) {
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return false;
  IoCounters sum;
  for (auto& t : tasks_) t.second.seen = false;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    long tid = std::strtol(e->d_name, nullptr, 10);
    IoCounterFile file;
    if (file.open("/proc/self/task/" + std::string(e->d_name) + "/io") != 0) continue;
    IoCounters now;
    if (file.read(&now) < 0) continue;  // exited between readdir and read
    auto it = tasks_.find(tid);
    bool fresh = it == tasks_.end();
    if (fresh) it = tasks_.emplace(tid, TaskIo{}).first;
    TaskIo& t = it->second;
    t.seen = true;
    IoCounters from = fresh ? IoCounters{} : t.last;
    if (now.rchar < from.rchar || now.wchar < from.wchar || now.read_bytes < from.read_bytes ||
        now.write_bytes < from.write_bytes) {
      from = IoCounters{};  // a reused tid: a new thread, counted from its birth
    }
    sum.rchar += now.rchar - from.rchar;
    sum.wchar += now.wchar - from.wchar;
    sum.read_bytes += now.read_bytes - from.read_bytes;
    sum.write_bytes += now.write_bytes - from.write_bytes;
    t.last = now;
  }
  closedir(dir);
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    it = it->second.seen ? std::next(it) : tasks_.erase(it);
  }
  *live_delta = sum;
  return true;
}

// Whether a child process was reaped since the previous call (RUSAGE_CHILDREN moved).
bool Sampler::children_reaped_locked() {
  rusage ru{};
  if (getrusage(RUSAGE_CHILDREN, &ru) != 0) return false;
  long sig[8] = {long(ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec),
                 long(ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec),
                 ru.ru_minflt,
                 ru.ru_majflt,
                 ru.ru_inblock,
                 ru.ru_oublock,
                 ru.ru_nvcsw,
                 ru.ru_nivcsw};
  bool changed = std::memcmp(sig, children_sig_, sizeof sig) != 0;
  std::memcpy(children_sig_, sig, sizeof sig);
  return changed;
}

void Sampler::init_locked() {
  inited_ = true;
  header_written_ = false;
  std::string io_path = process_io_path();
  stats_.io_available = proc_io_.open(io_path) == 0;
  // Our own I/O is in the kernel's counters; a scripted file (tests) never contains it.
  subtract_own_ = io_path == "/proc/self/io";
  statm_fd_ = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  {
    OwnIoMeter meter;
    tags_fd_ = open_sidecar_locked(tags_path_);
    tags_.clear();
    tags_[std::vector<uint32_t>()] = 0;
    if (tags_fd_ >= 0) {
      const char line[] = "[0,[]]\n";
      write_all(tags_fd_, line, sizeof line - 1);
    }
  }
  {
    std::lock_guard<std::mutex> own_lock(own_io_mutex());
    prev_own_ = own_io_totals();
    prev_ok_ = proc_io_.read(&prev_) >= 0;
  }
  if (subtract_own_) {
    IoCounters ignored;
    tasks_.clear();
    read_tasks_locked(&ignored);
    children_reaped_locked();
  }
  for (int64_t& c : carry_) c = 0;
  prev_mono_ns_ = monotonic_ns();
  prev_tag_ = tag_locked(recorder_.first_thread_open_path());
}

// NVML (slow to initialise: on the sampler thread, at the first row) and the sidecar's header.
void Sampler::open_outputs_locked() {
  header_written_ = true;
  if (gpu_wanted_ && !nvml_) {
    nvml_ = new Nvml();
    if (!nvml_->open()) {
      stats_.gpu_error = nvml_->error();
      delete nvml_;
      nvml_ = nullptr;
    }
  }
  n_gpu_ = nvml_ ? nvml_->device_count() : 0;
  stats_.gpu_devices = n_gpu_;
  OwnIoMeter meter;
  samples_fd_ = open_sidecar_locked(path_);
  samples_bytes_ = 0;
  if (samples_fd_ < 0) {
    stats_.write_errors += 1;
    return;
  }
  char header[kSamplesHeaderBytes] = {};
  std::memcpy(header, kSamplesMagic, 8);
  put_u32(header + 8, kSamplesVersion);
  put_u32(header + 12, kSamplesHeaderBytes);
  put_u32(header + 16, kSampleBaseWords + 2 * n_gpu_);
  put_u32(header + 20, n_gpu_);
  put_u64(header + 24, interval_ns_);
  put_u64(header + 32, pid_);
  put_u64(header + 40, unix_ns());
  if (!write_row_bytes_locked(header, sizeof header) && samples_fd_ >= 0) {  // no header, no rows
    ::close(samples_fd_);
    samples_fd_ = -1;
  }
}

uint32_t Sampler::tag_locked(const std::vector<uint32_t>& path) {
  auto it = tags_.find(path);
  if (it != tags_.end()) return it->second;
  uint32_t id = uint32_t(tags_.size());
  tags_.emplace(path, id);
  if (tags_fd_ >= 0) {
    std::string line = "[" + std::to_string(id) + ",[";
    NameTable& names = NameTable::instance();
    for (size_t i = 0; i < path.size(); ++i) {
      if (i) line.push_back(',');
      append_json_string(line, names.name(path[i]));
    }
    line.append("]]\n");
    OwnIoMeter meter;
    write_all(tags_fd_, line.data(), line.size());
  }
  return id;
}

void Sampler::append_row_locked(const std::vector<int64_t>& row) {
  if (samples_fd_ < 0) {
    stats_.write_errors += 1;
    return;
  }
  OwnIoMeter meter;
  if (write_row_bytes_locked(row.data(), row.size() * sizeof(int64_t))) stats_.rows += 1;
}

void Sampler::sample_now(bool allow_probe) {
  // The probe may wait for the host's interpreter lock: call it before taking mu_, so a host
  // thread holding that lock while asking for stats() can never deadlock with us.
  CudaProbe probe;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (inited_ && allow_probe) probe = cuda_probe_;
  }
  int64_t cuda_alloc = -1, cuda_reserved = -1;
  bool cuda_ok = probe && probe(&cuda_alloc, &cuda_reserved);

  std::lock_guard<std::mutex> lock(mu_);
  if (path_.empty()) return;
  if (!inited_) {
    init_locked();
    return;
  }
  if (!header_written_) open_outputs_locked();
  uint64_t now_mono = monotonic_ns();
  std::vector<int64_t> row(kSampleBaseWords + 2 * n_gpu_, 0);
  row[kSwTimeUnixNs] = int64_t(unix_ns());
  row[kSwDtNs] = int64_t(now_mono - prev_mono_ns_);
  row[kSwTag] = prev_tag_;
  int64_t flags = 0;

  IoCounters now, own;
  bool ok;
  {
    std::lock_guard<std::mutex> own_lock(own_io_mutex());
    own = own_io_totals();  // before the read: the read's own bytes are not in `now` either
    ok = proc_io_.read(&now) >= 0;
  }
  // Cumulative counters never go backwards; a reading that does is as unusable as a failed one.
  bool backwards = ok && prev_ok_ &&
                   (now.rchar < prev_.rchar || now.wchar < prev_.wchar ||
                    now.read_bytes < prev_.read_bytes || now.write_bytes < prev_.write_bytes);
  if (backwards) ok = false;
  // The kernel folds a reaped child's whole I/O into /proc/self/io at wait(). In an interval in
  // which that happened, the process's bytes are its live threads' instead (a thread that exited
  // in that same interval loses its last bytes); the difference is counted as excluded.
  // RUSAGE_CHILDREN is read after /proc/self/io, so a reap landing between the two reads shows
  // in this check while its bytes show only in the next interval's read: an interval is treated
  // as reaped when this check or the previous one saw a reap.
  bool reaped_now = subtract_own_ && children_reaped_locked();
  bool reaped = reaped_now || reaped_last_check_;
  reaped_last_check_ = reaped_now;
  IoCounters live;
  bool live_ok = subtract_own_ && read_tasks_locked(&live);
  if (reaped && !live_ok) ok = false;
  if (ok && prev_ok_) {
    uint64_t cur[4] = {now.read_bytes, now.write_bytes, now.rchar, now.wchar};
    const uint64_t old[4] = {prev_.read_bytes, prev_.write_bytes, prev_.rchar, prev_.wchar};
    if (reaped) {
      const uint64_t lv[4] = {live.read_bytes, live.write_bytes, live.rchar, live.wchar};
      uint64_t* ex[4] = {&stats_.children_excluded.read_bytes,
                         &stats_.children_excluded.write_bytes, &stats_.children_excluded.rchar,
                         &stats_.children_excluded.wchar};
      for (int k = 0; k < 4; ++k) {
        uint64_t whole = cur[k] - old[k];
        if (whole > lv[k]) *ex[k] += whole - lv[k];
        cur[k] = old[k] + lv[k];
      }
      stats_.reap_intervals += 1;
    }
    const uint64_t own_now[4] = {own.read_bytes, own.write_bytes, own.rchar, own.wchar};
    const uint64_t own_old[4] = {prev_own_.read_bytes, prev_own_.write_bytes, prev_own_.rchar,
                                 prev_own_.wchar};
    for (int k = 0; k < 4; ++k) {
      // A write of ours that straddles the read lands here before its measurement does: the
      // excess is carried to the next interval rather than clamped away.
      int64_t own_d = subtract_own_ ? int64_t(own_now[k] - own_old[k]) : 0;
      int64_t d = int64_t(cur[k] - old[k]) - own_d + carry_[k];
      carry_[k] = d < 0 ? d : 0;
      row[kSwReadBytes + k] = d < 0 ? 0 : d;
    }
    row[kSwOwnWriteBytes] = subtract_own_ ? int64_t(own_now[1] - own_old[1]) : 0;
    flags |= kSfIo;
  } else {
    stats_.dropped += 1;
    for (int64_t& c : carry_) c = 0;
  }
  if (ok) prev_ = now;
  prev_ok_ = ok;
  prev_own_ = own;

  row[kSwRssBytes] = read_rss(statm_fd_);
  if (row[kSwRssBytes] >= 0) {
    flags |= kSfRss;
  } else {
    stats_.rss_failed += 1;
  }
  row[kSwCudaAlloc] = cuda_ok ? cuda_alloc : -1;
  row[kSwCudaReserved] = cuda_ok ? cuda_reserved : -1;
  if (cuda_ok) flags |= kSfCuda;
  for (uint32_t k = 0; k < n_gpu_; ++k) {
    GpuReading g = nvml_->read(k, pid_);
    row[kSampleBaseWords + 2 * k] = g.busy_pct;
    row[kSampleBaseWords + 2 * k + 1] = g.pid_pct;
    if (g.busy_pct >= 0) flags |= kSfGpu;
  }
  row[kSwFlags] = flags;
  prev_tag_ = tag_locked(recorder_.first_thread_open_path());
  prev_mono_ns_ = now_mono;
  append_row_locked(row);
}

void Sampler::start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (interval_ns_ == 0 || path_.empty()) return;
    // The baseline is taken here, synchronously, so counting starts at start() and not whenever
    // the new thread first runs; NVML is opened later, on the thread.
    if (!inited_) init_locked();
  }
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { run_thread(); });
}

void Sampler::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void Sampler::run_thread() {
  auto interval = std::chrono::nanoseconds(interval_ns_);
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stop_) {
    if (stop_cv_.wait_for(lock, interval, [this] { return stop_; })) break;
    lock.unlock();
    sample_now();
    lock.lock();
  }
  lock.unlock();
  sample_now(false);  // the last partial interval; never calls into the host while it stops us
}

void Sampler::reset_after_fork(std::string samples_path, uint32_t pid) {
  new (&mu_) std::mutex();
  new (&thread_) std::thread();
  // The parent's /proc/self fds name the parent: close them; the child opens its own.
  proc_io_.close();
  tasks_.clear();  // the parent's threads
  if (statm_fd_ >= 0) ::close(statm_fd_);
  if (samples_fd_ >= 0) ::close(samples_fd_);
  if (tags_fd_ >= 0) ::close(tags_fd_);
  statm_fd_ = samples_fd_ = tags_fd_ = -1;
  if (nvml_) nvml_->reset_windows();
  path_ = std::move(samples_path);
  tags_path_ = with_suffix(path_, ".samples", ".tags");
  if (dir_ == &own_dir_) own_dir_.reset_after_fork(dir_of(path_));  // else the Worker's resets
  samples_bytes_ = 0;
  pid_ = pid;
  inited_ = false;
  header_written_ = false;
  prev_ok_ = false;
  stats_ = SamplerStats{};
  tags_.clear();
}

SamplerStats Sampler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::string Sampler::status_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = "{\"file\":";
  std::string base = path_.substr(path_.rfind('/') == std::string::npos ? 0 : path_.rfind('/') + 1);
  append_json_string(out, base);
  out.append(",\"tags_file\":");
  std::string tbase =
      tags_path_.substr(tags_path_.rfind('/') == std::string::npos ? 0 : tags_path_.rfind('/') + 1);
  append_json_string(out, tbase);
  out.append(",\"interval_ns\":");
  append_json_uint(out, interval_ns_);
  out.append(",\"rows\":");
  append_json_uint(out, stats_.rows);
  out.append(",\"dropped\":");
  append_json_uint(out, stats_.dropped);
  out.append(",\"rss_failed\":");
  append_json_uint(out, stats_.rss_failed);
  out.append(",\"write_errors\":");
  append_json_uint(out, stats_.write_errors);
  out.append(",\"last_error\":");
  append_json_string(out, stats_.last_error);
  out.append(",\"io_source\":");
  out.append(!inited_ ? "null" : stats_.io_available ? "\"proc\"" : "null");
  out.append(",\"gpu_devices\":");
  append_json_uint(out, stats_.gpu_devices);
  out.append(",\"gpu_error\":");
  append_json_string(out, stats_.gpu_error);
  out.append(",\"reap_intervals\":");
  append_json_uint(out, stats_.reap_intervals);
  const IoCounters& ch = stats_.children_excluded;
  out.append(",\"children_io_excluded\":{\"read_chars\":");
  append_json_uint(out, ch.rchar);
  out.append(",\"write_chars\":");
  append_json_uint(out, ch.wchar);
  out.append(",\"read_bytes\":");
  append_json_uint(out, ch.read_bytes);
  out.append(",\"write_bytes\":");
  append_json_uint(out, ch.write_bytes);
  out.push_back('}');
  IoCounters own = own_io_totals();
  out.append(",\"own_io\":{\"read_chars\":");
  append_json_uint(out, own.rchar);
  out.append(",\"write_chars\":");
  append_json_uint(out, own.wchar);
  out.append(",\"read_bytes\":");
  append_json_uint(out, own.read_bytes);
  out.append(",\"write_bytes\":");
  append_json_uint(out, own.write_bytes);
  out.append("}}");
  return out;
}

}  // namespace lp
