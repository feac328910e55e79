// lp_core/nvml.cpp: dlopen of libnvidia-ml and the utilisation reads (declared from NVML's ABI).
#include "lp_core/nvml.h"

#include <dlfcn.h>

#include <cstdlib>

#include "lp_core/clock.h"

namespace lp {

namespace {

// From nvml.h (NVML API, stable C ABI).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorNotFound = 6;
constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;

struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU timestamp in microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using CountFn = nvmlReturn_t (*)(unsigned int*);
using HandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using UtilFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using ProcUtilFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                                    unsigned long long);

template <typename F>
F sym(void* lib, const char* name, const char* fallback = nullptr) {
  void* p = dlsym(lib, name);
  if (!p && fallback) p = dlsym(lib, fallback);
  return reinterpret_cast<F>(p);
}

}  // namespace

Nvml::~Nvml() {
  if (inited_ && shutdown_) reinterpret_cast<ShutdownFn>(shutdown_)();
  // The library stays loaded: unloading a driver library at exit gains nothing and can crash.
}

bool Nvml::open(const std::string& library_path) {
  std::string path = library_path;
  if (path.empty()) {
    const char* env = std::getenv("LINEPROFILER_NVML_LIBRARY");
    if (env && *env) path = env;
  }
  const char* candidates[] = {path.empty() ? "libnvidia-ml.so.1" : path.c_str(),
                              path.empty() ? "libnvidia-ml.so" : nullptr};
  for (const char* c : candidates) {
    if (!c || lib_) continue;
    lib_ = dlopen(c, RTLD_NOW | RTLD_LOCAL);
  }
  if (!lib_) {
    const char* e = dlerror();
    error_ = std::string("cannot load NVML: ") + (e ? e : "not found");
    return false;
  }
  auto init = sym<InitFn>(lib_, "nvmlInit_v2", "nvmlInit");
  auto count = sym<CountFn>(lib_, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  auto handle = sym<HandleFn>(lib_, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
  shutdown_ = reinterpret_cast<void*>(sym<ShutdownFn>(lib_, "nvmlShutdown"));
  utilization_ = reinterpret_cast<void*>(sym<UtilFn>(lib_, "nvmlDeviceGetUtilizationRates"));
  process_utilization_ =
      reinterpret_cast<void*>(sym<ProcUtilFn>(lib_, "nvmlDeviceGetProcessUtilization"));
  if (!init || !count || !handle || !utilization_) {
    error_ = "NVML library lacks the functions needed";
    return false;
  }
  nvmlReturn_t rc = init();
  if (rc != kNvmlSuccess) {
    error_ = "nvmlInit failed (" + std::to_string(rc) + ")";
    return false;
  }
  inited_ = true;
  unsigned int n = 0;
  rc = count(&n);
  if (rc != kNvmlSuccess) {
    error_ = "nvmlDeviceGetCount failed (" + std::to_string(rc) + ")";
    return false;
  }
  for (unsigned int i = 0; i < n; ++i) {
    nvmlDevice_t d = nullptr;
    if (handle(i, &d) != kNvmlSuccess) {
      error_ = "nvmlDeviceGetHandleByIndex failed for device " + std::to_string(i);
      devices_.clear();
      return false;
    }
    devices_.push_back(d);
  }
  if (devices_.empty()) {
    error_ = "no GPU visible to NVML";
    return false;
  }
  reset_windows();
  return true;
}

void Nvml::reset_windows() {
  last_seen_us_.assign(devices_.size(), unix_ns() / 1000);
}

GpuReading Nvml::read(uint32_t index, uint32_t pid) {
  GpuReading r;
  if (index >= devices_.size()) return r;
  nvmlUtilization_t u{};
  if (reinterpret_cast<UtilFn>(utilization_)(devices_[index], &u) == kNvmlSuccess) {
    r.busy_pct = int32_t(u.gpu);
  }
  if (!process_utilization_) return r;
  auto proc = reinterpret_cast<ProcUtilFn>(process_utilization_);
  unsigned long long since = last_seen_us_[index];
  unsigned int n = 0;
  nvmlReturn_t rc = proc(devices_[index], nullptr, &n, since);
  if (rc == kNvmlErrorNotFound || (rc == kNvmlSuccess && n == 0)) {
    r.pid_pct = kGpuPidAbsent;  // no process ran a kernel in the window
    return r;
  }
  if (rc != kNvmlErrorInsufficientSize && rc != kNvmlSuccess) return r;
  std::vector<nvmlProcessUtilizationSample_t> samples(n + 8);
  n = unsigned(samples.size());
  rc = proc(devices_[index], samples.data(), &n, since);
  if (rc == kNvmlErrorNotFound) {
    r.pid_pct = kGpuPidAbsent;
    return r;
  }
  if (rc != kNvmlSuccess) return r;
  uint64_t sum = 0, count = 0;
  for (unsigned int i = 0; i < n && i < samples.size(); ++i) {
    if (samples[i].timeStamp > last_seen_us_[index]) last_seen_us_[index] = samples[i].timeStamp;
    if (samples[i].pid == pid) {
      sum += samples[i].smUtil;
      count += 1;
    }
  }
  r.pid_pct = count ? int32_t(sum / count) : kGpuPidAbsent;
  return r;
}

}  // namespace lp
