// lp_core/worker.cpp: periodic and final worker-file writes.
#include "lp_core/worker.h"

#include <unistd.h>

#include <cstring>

#include "lp_core/clock.h"

namespace lp {

Worker::Worker(WorkerConfig config)
    : config_(std::move(config)),
      recorder_(RecorderOptions{config_.measure_cpu}),
      sampler_(recorder_) {
  has_sampler_ = !config_.samples_path.empty();
  dir_.set_path(dir_of(config_.path));
  sampler_.set_dir(&dir_);
  if (has_sampler_) {
    sampler_.configure(config_.samples_path, config_.sample_interval_ns, uint32_t(getpid()),
                       config_.sample_gpu);
  }
}

Worker::~Worker() {
  stop_thread();
  if (last_fd_ >= 0) close(last_fd_);
}

std::string Worker::render(bool final) const {
  WorkerFileHeader h;
  h.meta_json = config_.meta_json;
  h.snapshot_seq = seq_ + 1;
  h.final = final;
  h.measure_cpu = config_.measure_cpu;
  h.wall_clock = wall_clock_name();
  h.cpu_clock = cpu_clock_tier_name(recorder_.cpu_tier());
  h.flush_errors = stats_.errors;
  h.last_flush_error = stats_.last_error;
  h.own_write_bytes = stats_.own_write_bytes;
  if (has_sampler_) h.samples_json = sampler_.status_json();
  return worker_file_json(recorder_.snapshot(), h);
}

int Worker::flush(bool final) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string text = render(final);
  int err = 0;
  std::string why;
  int dir_fd = dir_.fd(&err, &why);
  if (dir_fd >= 0) {
    OwnIoMeter meter;  // the real bytes of our own write, excluded by the sampler
    int fd = -1;
    err = write_file_at(dir_fd, base_of(config_.path), text, &fd);
    meter.finish();
    if (!err) {
      if (last_fd_ >= 0) close(last_fd_);
      last_fd_ = fd;
      errors_at_write_ = stats_.errors;
      size_t key = text.find(kLateFlushErrorKey);
      slot_offset_ = key == std::string::npos ? 0 : key + std::strlen(kLateFlushErrorKey) + 3;
    }
  }
  if (err) {
    stats_.errors += 1;
    stats_.last_error = why.empty() ? std::string(std::strerror(err)) : why;
    note_late_failure_locked();
  } else {
    seq_ += 1;
    stats_.writes += 1;
    stats_.own_write_bytes += text.size();
  }
  return err;
}

// After a failed write: overwrites the late_flush_error slot of the file already on disk in place
// (its blocks exist, so a full disk still takes it), so the report can name the failure.
void Worker::note_late_failure_locked() {
  if (last_fd_ < 0 || slot_offset_ == 0) return;
  std::string text = std::to_string(stats_.errors - errors_at_write_) +
                     " later write(s) failed, the last at unix " +
                     std::to_string(unix_ns() / 1000000000ull) + " s: " + stats_.last_error;
  for (char& c : text) {
    if (c < ' ' || c > '~' || c == '"' || c == '\\') c = '?';  // a valid JSON string as is
  }
  text.resize(kLateFlushErrorWidth, ' ');
  OwnIoMeter meter;
  ssize_t n = pwrite(last_fd_, text.data(), text.size(), off_t(slot_offset_));
  (void)n;  // nothing more to do if even this fails
}

std::string Worker::snapshot_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  return render(false);
}

void Worker::start_thread() {
  if (has_sampler_) sampler_.start();
  if (config_.snapshot_interval_ns == 0 || thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { run_thread(); });
}

void Worker::stop_thread() {
  if (has_sampler_) sampler_.stop();
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  // Called from the snapshot thread itself (a periodic hook that closes the profiler): it ends
  // after the hook returns; whoever stops it next (or the destructor) joins it.
  if (thread_.get_id() == std::this_thread::get_id()) return;
  thread_.join();
}

void Worker::run_thread() {
  auto interval = std::chrono::nanoseconds(config_.snapshot_interval_ns);
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stop_) {
    if (stop_cv_.wait_for(lock, interval, [this] { return stop_; })) break;
    lock.unlock();
    flush(false);
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> g(mu_);
      hook = hook_;
    }
    if (hook) hook();
    lock.lock();
  }
}

void Worker::reset_after_fork(std::string path, std::string meta_json) {
  new (&mu_) std::mutex();  // a parent thread may have held it at the fork
  reset_own_io_mutex_after_fork();
  recorder_.reset_after_fork();
  config_.path = std::move(path);
  config_.meta_json = std::move(meta_json);
  dir_.reset_after_fork(dir_of(config_.path));  // the host may differ (unshare --uts)
  if (last_fd_ >= 0) close(last_fd_);           // the parent's file: never the child's to patch
  last_fd_ = -1;
  slot_offset_ = 0;
  errors_at_write_ = 0;
  if (has_sampler_) {
    config_.samples_path = with_suffix(config_.path, ".json", ".samples");
    sampler_.reset_after_fork(config_.samples_path, uint32_t(getpid()));
  }
  stats_ = FlushStats{};
  seq_ = 0;
  // The parent's snapshot thread does not exist here (it was stopped before the fork); forget any
  // handle without touching it.
  new (&thread_) std::thread();
}

void Worker::set_meta(std::string meta_json) {
  std::lock_guard<std::mutex> lock(mu_);
  config_.meta_json = std::move(meta_json);
}

void Worker::set_periodic_hook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  hook_ = std::move(hook);
}

FlushStats Worker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::string Worker::path() const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_.path;
}

}  // namespace lp
