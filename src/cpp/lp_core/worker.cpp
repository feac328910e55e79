// lp_core/worker.cpp: periodic and final worker-file writes.
#include "lp_core/worker.h"

#include <unistd.h>

#include <cstring>

namespace lp {

Worker::Worker(WorkerConfig config)
    : config_(std::move(config)),
      recorder_(RecorderOptions{config_.measure_cpu}),
      sampler_(recorder_) {
  has_sampler_ = !config_.samples_path.empty();
  if (has_sampler_) {
    sampler_.configure(config_.samples_path, config_.sample_interval_ns, uint32_t(getpid()),
                       config_.sample_gpu);
  }
}

Worker::~Worker() {
  stop_thread();
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
  OwnIoMeter meter;  // the real bytes of our own write, excluded by the sampler
  int err = write_file_atomically(config_.path, text);
  meter.finish();
  if (err) {
    stats_.errors += 1;
    stats_.last_error = std::strerror(err);
  } else {
    seq_ += 1;
    stats_.writes += 1;
    stats_.own_write_bytes += text.size();
  }
  return err;
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
