// standalone/profiler.cpp: lineprofiler::Profiler: one standalone process's worker, its lifecycle.
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "lineprofiler/standalone.hpp"
#include "lp_core/clock.h"
#include "lp_core/identity.h"
#include "lp_core/meta_doc.h"
#include "lp_core/worker.h"
#include "lp_core/worker_dir.h"
#include "lp_core/worker_file.h"
#include "standalone/front.h"
#include "standalone/signals.h"

namespace lineprofiler {

namespace sa = lp::standalone;
namespace id = lp::identity;  // lp_core/identity.h: the Python profiler's rules too

struct Profiler::Impl {
  // Resolved options and identity.
  ProfilerOptions opts;
  bool enabled = false;
  std::string run_dir, role, run_id, host, uid8, worker_path;
  long pid = 0;
  uint64_t start_unix_ns = 0;

  lp::Worker* worker = nullptr;  // deleted at close unless installed (then parked for good)
  bool installed = false;
  bool signals = false;
  std::map<std::string, std::optional<std::string>> env_before;  // "" when export_env is off
  std::map<std::string, std::string> env_set;

  std::mutex life_mu;  // serialises close() with a signal's final write
  std::atomic<bool> closed{false};
  bool forked = false;  // this object was inherited through fork(): inert
  std::string exit_signal;
  bool warned = false;

  std::string meta_json() const;
  void start();
  void close();
  void warn_unwritable(const std::string& why);
  static void on_signal(void* ctx, int signum, bool final);
};

namespace {

std::mutex* g_live_mu = new std::mutex();
std::mutex* g_live_mu_at_fork = nullptr;  // a forked child's old lock: kept reachable, never used
std::vector<Profiler::Impl*>* g_live = new std::vector<Profiler::Impl*>();
// Workers that were installed: never freed, since a thread of the program may still be inside a
// front call on their recorder (reachable from here, so a leak checker does not report them).
std::vector<lp::Worker*>* g_parked = new std::vector<lp::Worker*>();

void close_all_at_exit() {
  std::vector<Profiler::Impl*> live;
  {
    std::lock_guard<std::mutex> lock(*g_live_mu);
    live = *g_live;
  }
  for (auto it = live.rbegin(); it != live.rend(); ++it) (*it)->close();
}

void after_fork_in_child() {
  g_live_mu_at_fork = g_live_mu;
  g_live_mu = new (std::nothrow) std::mutex();  // a parent thread may have held the old one
  for (Profiler::Impl* p : *g_live) p->forked = true;
  g_live->clear();
  sa::forget_after_fork_in_child();
  sa::signals_forget_after_fork();
}

void process_hooks_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* forced = std::getenv("LINEPROFILER_WALL_CLOCK");
    lp::wall_clock_init(!(forced && std::strcmp(forced, "monotonic") == 0));
    std::atexit(close_all_at_exit);
    pthread_atfork(nullptr, nullptr, after_fork_in_child);
  });
}

const char* signal_name(int signum) {
  switch (signum) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal";
  }
}

// mkdir -p, each directory created 0755 less the umask (never group- or world-writable, as
// Python's lineprofiler.safe_write.make_dirs), and the path must end up a directory.
int make_dirs(const std::string& path) {
  if (int err = lp::make_dirs(path)) return err;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

}  // namespace

std::string Profiler::Impl::meta_json() const {
  lp::MetaDoc doc;  // lp_core/meta_doc.h: the Python profiler's builder too
  doc.role = role;
  doc.pid = pid;
  doc.host_dir = host;
  doc.run_id = run_id;
  doc.uuid = uid8;
  doc.start_unix_ns = start_unix_ns;
  doc.argv = id::process_argv(lp::kMetaArgvMax);
  doc.signal_flush = signals;
  doc.runtime = "c++";
  doc.measure_cpu = opts.measure_cpu;
  doc.snapshot_interval_s = opts.snapshot_interval_s;
  doc.sample_interval_s = opts.sample_interval_s;
  doc.thread_names = opts.thread_names;
  doc.exit_signal = exit_signal;
  return lp::meta_json(doc);
}

void Profiler::Impl::warn_unwritable(const std::string& why) {
  if (warned) return;
  warned = true;
  std::fprintf(stderr,
               "lineprofiler: cannot write the worker file under %s (%s); recording continues in "
               "memory and failed writes are counted\n",
               run_dir.c_str(), why.c_str());
}

void Profiler::Impl::start() {
  process_hooks_once();
  lp::WorkerConfig config;
  config.path = worker_path;
  config.meta_json = meta_json();
  config.measure_cpu = opts.measure_cpu;
  config.snapshot_interval_ns =
      opts.snapshot_interval_s > 0 ? uint64_t(opts.snapshot_interval_s * 1e9) : 0;
  if (opts.sample_interval_s > 0) {
    config.samples_path = lp::with_suffix(worker_path, ".json", ".samples");
    config.sample_interval_ns = uint64_t(opts.sample_interval_s * 1e9);
  }
  config.sample_gpu = opts.sample_gpu;
  worker = new lp::Worker(std::move(config));
  // The sampler tags each interval with the phase open on the recorder's first thread: this one.
  char name[64] = {0};
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) name[0] = '\0';
  worker->recorder().register_thread(name);

  bool first;
  {
    std::lock_guard<std::mutex> lock(*g_live_mu);
    first = g_live->empty();
    g_live->push_back(this);
  }
  if (opts.handle_signals && first) signals = sa::signals_attach(&Impl::on_signal, this);
  if (signals) worker->set_meta(meta_json());  // signal_flush: true

  int err = make_dirs(run_dir);
  if (err) warn_unwritable(std::strerror(err));
  if (worker->flush(false)) warn_unwritable(worker->stats().last_error);  // visible from now on
  {
    sa::BlockFlushSignals blocked;  // the snapshot and sampler threads never run the handler
    worker->start_thread();
  }
  if (opts.export_env) {
    env_set = {{id::kEnvProfile, "1"},
               {id::kEnvRunDir, run_dir},
               {id::kEnvRunId, run_id},
               {id::kEnvParentRole, role}};
    for (auto& [key, value] : env_set) {
      env_before[key] = id::env(key.c_str());
      setenv(key.c_str(), value.c_str(), 1);
    }
  }
  // This binary's table slot, which LP_PHASE/LP_COUNT read (the program and liblineprofiler.a
  // linked into it share one).
  sa::standalone_api()->attach(lineprofiler::detail::api_slot());
  if (opts.install && first && sa::installed_recorder() == nullptr) {
    sa::install_recorder(&worker->recorder());
    installed = true;
  }
}

void Profiler::Impl::on_signal(void* ctx, int signum, bool final) {
  Impl* self = static_cast<Impl*>(ctx);
  std::lock_guard<std::mutex> lock(self->life_mu);
  if (self->closed) return;  // close() wrote the final file already
  if (!final) {
    self->worker->flush(false);  // a handler below keeps the process running
    return;
  }
  // The process ends when this returns: stop the threads (no later periodic write may replace the
  // final one) and write the final file, naming the signal.
  self->exit_signal = signal_name(signum);
  self->worker->set_meta(self->meta_json());
  self->worker->stop_thread();
  self->worker->flush(true);
}

void Profiler::Impl::close() {
  if (forked) return;  // the parent's: not ours to write, and its threads are not here
  {
    std::lock_guard<std::mutex> lock(life_mu);
    if (closed || worker == nullptr) return;
    closed = true;
    if (installed) sa::install_recorder(nullptr);
    worker->stop_thread();
    if (worker->flush(true)) warn_unwritable(worker->stats().last_error);
  }
  if (signals) sa::signals_detach();  // joins the flusher (which sees closed and returns)
  signals = false;
  for (auto& [key, value] : env_set) {  // put back what was there, unless changed since
    const char* now = std::getenv(key.c_str());
    if (!now || value != now) continue;
    const std::optional<std::string>& before = env_before[key];
    if (before) {
      setenv(key.c_str(), before->c_str(), 1);
    } else {
      unsetenv(key.c_str());
    }
  }
  env_set.clear();
  std::lock_guard<std::mutex> lock(*g_live_mu);
  g_live->erase(std::remove(g_live->begin(), g_live->end(), this), g_live->end());
}

Profiler::Profiler(ProfilerOptions options) : impl_(new Impl()) {
  Impl& p = *impl_;
  p.opts = std::move(options);
  p.enabled = p.opts.enabled.has_value() ? *p.opts.enabled : id::env_enabled();
  std::string dir = p.opts.run_dir;
  if (dir.empty()) dir = id::env(id::kEnvRunDir).value_or("");
  if (dir.empty()) dir = "profile";
  p.run_dir = id::abspath(dir);
  p.role = p.opts.role;
  if (p.role.empty()) p.role = id::env(id::kEnvRole).value_or("");
  if (p.role.empty()) p.role = "main";
  p.run_id = id::resolve_run_id(p.run_dir);
  p.host = id::host_name();
  p.pid = long(getpid());
  p.uid8 = id::random_hex(4);
  p.start_unix_ns = lp::unix_ns();
  if (!p.enabled) return;
  p.worker_path = id::worker_path(p.run_dir, p.host, p.run_id, p.pid, p.uid8);
  p.start();
}

Profiler::~Profiler() {
  if (!impl_) return;
  Impl& p = *impl_;
  if (p.forked) {
    // Inherited through fork(): the parent's threads are not in this process, so the worker is
    // never destroyed here (its destructor would join them).
    if (p.worker) g_parked->push_back(p.worker);
    return;
  }
  p.close();
  if (p.worker && p.installed) {
    g_parked->push_back(p.worker);  // a thread may still be inside a front call on its recorder
  } else {
    delete p.worker;
  }
  p.worker = nullptr;
}

int Profiler::flush() {
  Impl& p = *impl_;
  if (!p.worker || p.forked || p.closed) return 0;
  int err = p.worker->flush(false);
  if (err) p.warn_unwritable(p.worker->stats().last_error);
  return err;
}

void Profiler::close() {
  impl_->close();
}

bool Profiler::enabled() const {
  return impl_->enabled;
}
bool Profiler::closed() const {
  return impl_->closed || !impl_->enabled;
}
const std::string& Profiler::run_dir() const {
  return impl_->run_dir;
}
const std::string& Profiler::role() const {
  return impl_->role;
}
const std::string& Profiler::run_id() const {
  return impl_->run_id;
}
const std::string& Profiler::worker_path() const {
  return impl_->worker_path;
}

FlushStats Profiler::stats() const {
  FlushStats out;
  if (!impl_->worker) return out;
  lp::FlushStats s = impl_->worker->stats();
  out.writes = s.writes;
  out.errors = s.errors;
  out.last_error = s.last_error;
  out.own_write_bytes = s.own_write_bytes;
  return out;
}

}  // namespace lineprofiler
