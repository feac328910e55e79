// lp_core/worker_dir.cpp: opening workers/<host> without following links, and no-clobber writes.
#include "lp_core/worker_dir.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "lp_core/clock.h"
#include "lp_core/identity.h"

namespace lp {

namespace {}  // namespace

int make_dirs(const std::string& path) {
  for (size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
    std::string dir = pos == std::string::npos ? path : path.substr(0, pos);
    if (!dir.empty() && mkdir(dir.c_str(), kRunDirMode) != 0 && errno != EEXIST) return errno;
    if (pos == std::string::npos) return 0;
  }
}

namespace {

// Opens (creating it when missing) the directory name inside parent_fd without following a link,
// and refuses one that belongs to another user when check_owner. Returns the fd or -1.
int open_child_dir(int parent_fd, const std::string& name, const std::string& shown,
                   bool check_owner, int* err, std::string* why) {
  if (mkdirat(parent_fd, name.c_str(), kDirMode) != 0 && errno != EEXIST) {
    *err = errno;
    *why = shown + ": " + std::strerror(errno);
    return -1;
  }
  int fd = openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    struct stat st;
    if (fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
      *err = ELOOP;
      *why = shown +
             " is a symbolic link: refused (another user could redirect the profiler's writes "
             "through it)";
    } else {
      *why = shown + ": " + std::strerror(*err);
    }
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *err = errno;
    *why = shown + ": " + std::strerror(errno);
    close(fd);
    return -1;
  }
  if (check_owner && st.st_uid != geteuid()) {
    *err = EPERM;
    *why = shown + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
           std::to_string(geteuid()) + "): refused";
    close(fd);
    return -1;
  }
  return fd;
}

// 16 unpredictable hex digits for a temporary name.
std::string random_hex() {
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != ssize_t(sizeof r)) {
    static std::atomic<uint64_t> counter{0};
    r = monotonic_ns() * 0x9E3779B97F4A7C15ull ^ (uint64_t(getpid()) << 32) ^
        counter.fetch_add(1) * 0xBF58476D1CE4E5B9ull;
  }
  static const char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 0; i < 16; ++i) out[size_t(i)] = digits[(r >> (4 * i)) & 15];
  return out;
}

}  // namespace

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int open_worker_dir(const std::string& dir, int* err, std::string* why) {
  std::string leaf = base_of(dir);
  std::string parent = dir_of(dir);
  // workers/<host>: the run directory is the anchor, "workers" and "<host>" are checked.
  bool in_workers =
      base_of(parent) == identity::kWorkersDir && parent.find('/') != std::string::npos;
  std::string anchor = in_workers ? dir_of(parent) : parent;
  if (leaf.empty() || leaf == "." || leaf == "..") {
    *err = EINVAL;
    *why = dir + ": not a usable directory name";
    return -1;
  }
  int anchor_fd = open(anchor.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (anchor_fd < 0 && errno == ENOENT) {
    int e = make_dirs(anchor);
    if (e) {
      *err = e;
      *why = anchor + ": " + std::strerror(e);
      return -1;
    }
    anchor_fd = open(anchor.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  if (anchor_fd < 0) {
    *err = errno;
    *why = anchor + ": " + std::strerror(errno);
    return -1;
  }
  int parent_fd = anchor_fd;
  if (in_workers) {
    parent_fd = open_child_dir(anchor_fd, identity::kWorkersDir, parent, false, err, why);
    close(anchor_fd);
    if (parent_fd < 0) return -1;
  }
  int fd = open_child_dir(parent_fd, leaf, dir, true, err, why);
  close(parent_fd);
  return fd;
}

WorkerDir::~WorkerDir() {
  if (fd_ >= 0) close(fd_);
}

void WorkerDir::set_path(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dir == path_) return;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  path_ = dir;
}

int WorkerDir::fd(int* err, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) fd_ = open_worker_dir(path_, err, why);
  return fd_;
}

void WorkerDir::reset_after_fork(const std::string& dir) {
  new (&mu_) std::mutex();
  set_path(dir);
}

int write_file_at(int dir_fd, const std::string& name, const std::string& text, int* keep_fd) {
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    // A leading dot and no ".json" ending: readers never take a temporary for a worker file.
    tmp = "." + name + "." + random_hex() + ".tmp";
    fd = openat(dir_fd, tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kFileMode);
    if (fd < 0 && errno != EEXIST) return errno;
  }
  if (fd < 0) return EEXIST;
  int err = 0;
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    done += size_t(n);
  }
  if (!keep_fd) {  // close first: some file systems (NFS) report a failed write only here
    if (close(fd) != 0 && !err) err = errno;
    fd = -1;
  }
  if (!err && renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) err = errno;
  if (err) {
    unlinkat(dir_fd, tmp.c_str(), 0);
    if (fd >= 0) close(fd);
    return err;
  }
  if (keep_fd) *keep_fd = fd;
  return 0;
}

int create_file_at(int dir_fd, const std::string& name) {
  const int flags = O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = openat(dir_fd, name.c_str(), flags, kFileMode);
  if (fd < 0 && errno == EEXIST) {
    if (unlinkat(dir_fd, name.c_str(), 0) != 0) return -1;
    fd = openat(dir_fd, name.c_str(), flags, kFileMode);
  }
  return fd;
}

}  // namespace lp
