// lp_core/identity.cpp: run id, host, rank and worker path, for both profilers (identity.h).
#include "lp_core/identity.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

#include "lp_core/clock.h"
#include "lp_core/sha1.h"

namespace lp::identity {

namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
         (c >= '\x1c' && c <= '\x1f');
}

// Length of the UTF-8 sequence at s[i] when valid, else 1 (an invalid byte is one code point).
size_t code_point_length(const std::string& s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 1;
  if (n == 1 || i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

// Each code point of s for which keep(c) fails (every non-ASCII one does) replaced by replacement.
template <typename Keep>
std::string substitute(const std::string& s, const std::string& replacement, Keep keep) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80 && keep(char(c))) {
      out.push_back(char(c));
      ++i;
      continue;
    }
    out += replacement;
    i += c < 0x80 ? 1 : code_point_length(s, i);
  }
  return out;
}

bool run_id_safe(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
}
bool host_safe(char c) {
  return run_id_safe(c) || c == '_';
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string(fallback);
}

std::mutex g_attempts_mu;
std::map<std::string, std::string>* g_attempts = new std::map<std::string, std::string>();

// _identity._first_int: the first variable whose value is an integer (spaces around allowed).
std::optional<long long> first_int(std::initializer_list<const char*> names, std::string* source) {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (!v) continue;
    std::string s = strip(v);
    size_t digits = s.find_first_not_of('-');
    if (digits == std::string::npos || digits > 1 || digits == s.size()) continue;
    bool all_digits = true;
    for (size_t i = digits; i < s.size(); ++i) all_digits &= std::isdigit((unsigned char)s[i]) != 0;
    if (!all_digits) continue;
    errno = 0;
    long long value = std::strtoll(s.c_str(), nullptr, 10);
    if (errno) continue;
    if (source) *source = name;
    return value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

bool env_enabled() {
  std::string v = strip(env_or(kEnvProfile, ""));
  for (char& c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

std::string strip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_ascii_space(s[b])) ++b;
  while (e > b && is_ascii_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string abspath(const std::string& path) {
  std::string p = path;
  if (p.empty() || p[0] != '/') {
    char buf[4096];
    std::string cwd = getcwd(buf, sizeof buf) ? std::string(buf) : std::string("/");
    p = p.empty() ? cwd : cwd + "/" + p;
  }
  // posixpath.normpath
  int initial = p[0] == '/' ? (p.rfind("//", 0) == 0 && p.rfind("///", 0) != 0 ? 2 : 1) : 0;
  std::vector<std::string> comps;
  std::stringstream in(p);
  std::string comp;
  while (std::getline(in, comp, '/')) {
    if (comp.empty() || comp == ".") continue;
    if (comp != ".." || (!initial && comps.empty()) || (!comps.empty() && comps.back() == "..")) {
      comps.push_back(comp);
    } else if (!comps.empty()) {
      comps.pop_back();
    }
  }
  std::string out(size_t(initial), '/');
  for (size_t i = 0; i < comps.size(); ++i) {
    if (i) out.push_back('/');
    out += comps[i];
  }
  return out.empty() ? std::string(".") : out;
}

std::string sub_unsafe_run_id(const std::string& s, const std::string& replacement) {
  return substitute(s, replacement, run_id_safe);
}

std::string resolve_run_id(const std::string& run_dir) {
  std::string env_id = sub_unsafe_run_id(strip(env_or(kEnvRunId, "")), "-");
  std::optional<std::string> env_dir = env(kEnvRunDir);
  std::lock_guard<std::mutex> lock(g_attempts_mu);
  std::string run_id;
  if (!env_id.empty() && (!env_dir || env_dir->empty() || abspath(*env_dir) == run_dir)) {
    run_id = env_id;
  } else {
    auto it = g_attempts->find(run_dir);
    if (it != g_attempts->end()) {
      run_id = it->second;
    } else {
      std::optional<std::string> launcher = launcher_run_id();
      run_id = launcher ? *launcher : new_run_id();
    }
  }
  (*g_attempts)[run_dir] = run_id;
  return run_id;
}

std::optional<std::string> launcher_run_id() {
  std::string elastic = strip(env_or("TORCHELASTIC_RESTART_COUNT", "0"));
  std::string suffix =
      elastic.empty() || elastic == "0" ? "" : "-e" + sub_unsafe_run_id(elastic, "");
  std::string job = strip(env_or("SLURM_JOB_ID", ""));
  if (!job.empty()) {
    std::string restarts = strip(env_or("SLURM_RESTART_COUNT", "0"));
    std::string requeue =
        restarts.empty() || restarts == "0" ? "" : "-r" + sub_unsafe_run_id(restarts, "");
    return "slurm-" + sub_unsafe_run_id(job, "-") + requeue + suffix;
  }
  std::string elastic_id = strip(env_or("TORCHELASTIC_RUN_ID", ""));
  if (!elastic_id.empty() && elastic_id != "none") {
    return "torchrun-" + short_hash({elastic_id}) + suffix;
  }
  std::string ns = env_or("PMIX_NAMESPACE", "");
  if (ns.empty()) ns = env_or("OMPI_MCA_ess_base_jobid", "");
  if (!ns.empty() && std::getenv("OMPI_COMM_WORLD_RANK")) {
    return "mpi-" + short_hash({ns, env_or("OMPI_MCA_orte_hnp_uri", "")}) + suffix;
  }
  if (std::getenv("PMI_RANK")) {
    long ppid = long(getppid());
    return "pmi-" + short_hash({host_name(), std::to_string(ppid), process_start(ppid)}) + suffix;
  }
  return std::nullopt;
}

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(raw.data() + got, bytes - got, 0);
    if (n <= 0) break;
    got += size_t(n);
  }
  if (got < bytes) {  // no getrandom: the clock and pid, mixed (unpredictability is not needed)
    uint64_t x = monotonic_ns() ^ (uint64_t(getpid()) << 32) ^ unix_ns();
    for (size_t i = got; i < bytes; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      raw[i] = char(x & 0xff);
    }
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (char c : raw) {
    out.push_back(hex[(static_cast<unsigned char>(c) >> 4) & 0xf]);
    out.push_back(hex[static_cast<unsigned char>(c) & 0xf]);
  }
  return out;
}

std::string new_run_id() {
  time_t now = time(nullptr);
  struct tm utc;
  gmtime_r(&now, &utc);
  char buf[32];
  strftime(buf, sizeof buf, "%Y%m%dT%H%M", &utc);
  return std::string(buf) + "-" + random_hex(3);
}

std::string real_host_name() {
  struct utsname u;
  if (uname(&u) != 0 || u.nodename[0] == '\0') return "localhost";
  return u.nodename;
}

std::string host_name() {
  std::string name = substitute(real_host_name(), "_", host_safe);
  if (name.size() > 200) name.resize(200);  // all ASCII by now: 200 code points
  return name[0] == '.' ? "_" + name : name;
}

std::string short_hash(const std::vector<std::string>& parts) {
  std::string joined;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) joined.push_back('\0');
    joined += parts[i];
  }
  return sha1_hex(joined).substr(0, 8);
}

namespace {

// Field 22 of a /proc/<pid>/stat file (the start time in clock ticks since boot), or "".
std::string start_ticks_at(const std::string& stat_path) {
  std::ifstream f(stat_path);
  if (!f) return "";
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(text.substr(close + 1));
  std::string field;
  for (int i = 0; i <= 19; ++i) {
    if (!(rest >> field)) return "";
  }
  return field;
}

}  // namespace

std::string process_start(long pid) {
  return start_ticks_at("/proc/" + std::to_string(pid) + "/stat");
}

std::string own_process_start() {
  std::string ticks = start_ticks_at("/proc/self/stat");
  if (ticks.empty()) return "";
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  if (f) std::getline(f, boot);
  boot = strip(boot).substr(0, 36);
  return boot + ":" + ticks;
}

LauncherIdentity launcher_identity() {
  LauncherIdentity out;
  out.rank =
      first_int({"SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}, &out.rank_source);
  out.local_rank = first_int(
      {"SLURM_LOCALID", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}, nullptr);
  for (const char* name : {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID"}) {
    const char* v = std::getenv(name);
    if (v && *v) {
      out.job_id = std::string(v);
      break;
    }
  }
  return out;
}

std::vector<std::string> process_argv(size_t max_args) {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> out;
  std::string arg;
  while (out.size() < max_args && std::getline(f, arg, '\0')) out.push_back(arg);
  return out;
}

std::string worker_path(const std::string& run_dir, const std::string& host,
                        const std::string& run_id, long pid, const std::string& uid8) {
  std::string dir = run_dir.empty() || run_dir.back() != '/' ? run_dir + "/" : run_dir;
  return dir + kWorkersDir + "/" + host + "/w_" + run_id + "_" + std::to_string(pid) + "_" + uid8 +
         ".json";
}

}  // namespace lp::identity
