// lp_core/nvml.h: the few NVML calls the sampler needs, loaded with dlopen at run time.
//
// No CUDA or NVML headers are needed: the functions and structs used are declared here from
// NVML's documented, stable C ABI. A missing library, a failing nvmlInit() or zero devices all
// leave the reader unavailable; nothing here throws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lp {

/// One device's reading for one sample window.
struct GpuReading {
  int32_t busy_pct = -1;  // nvmlDeviceGetUtilizationRates().gpu, or -1 when the call failed
  // nvmlDeviceGetProcessUtilization() for our pid: its smUtil (>= 0), kGpuPidAbsent when the call
  // succeeded without a sample for our pid (counts as 0 for the window), or -1 when it failed.
  int32_t pid_pct = -1;
};
constexpr int32_t kGpuPidAbsent = -2;

class Nvml {
 public:
  Nvml() = default;
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  /// Loads the library (library_path, else $LINEPROFILER_NVML_LIBRARY, else libnvidia-ml.so.1)
  /// and initialises it. Returns true when at least one device is visible; otherwise error()
  /// says why. Call once.
  bool open(const std::string& library_path = "");

  /// Number of devices NVML sees (NVML's physical indices 0..n-1); 0 when unavailable.
  uint32_t device_count() const { return uint32_t(devices_.size()); }

  /// Reads device `index` for the window since the previous call for that device. pid is the
  /// process whose share is read; samples of other pids are ignored.
  GpuReading read(uint32_t index, uint32_t pid);

  /// Why the reader is unavailable ("" when it is available, or open() was not called).
  const std::string& error() const { return error_; }

  /// In a forked child: keep the loaded library and handles, restart the per-device windows.
  void reset_windows();

 private:
  void* lib_ = nullptr;
  bool inited_ = false;
  std::string error_;
  std::vector<void*> devices_;
  std::vector<unsigned long long> last_seen_us_;
  void* shutdown_ = nullptr;
  void* utilization_ = nullptr;
  void* process_utilization_ = nullptr;
};

}  // namespace lp
