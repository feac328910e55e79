// lp_core/worker_dir.h: a worker's directory opened once and safely, and files created inside it.
//
// A run directory may be shared with other local users (a run under /tmp, a team scratch folder),
// so everything written there is written as if one of them were hostile: the directory that holds
// the files (workers/<host>) is opened once, refusing a symbolic link or another user's directory,
// and every file is created relative to that descriptor with O_CREAT|O_EXCL|O_NOFOLLOW under an
// unpredictable temporary name, mode 0640 at most (a stricter umask wins). The run directory
// itself (the user's choice) may be a symbolic link.
#pragma once

#include <mutex>
#include <string>

namespace lp {

/// File mode of everything the profiler creates (further restricted by the umask).
constexpr unsigned kFileMode = 0640;
/// Mode of the directories it creates (workers/, workers/<host>/).
constexpr unsigned kDirMode = 0750;
/// Mode of the run directory and its missing parents when it creates them. The umask can only
/// narrow a mode, so no directory the profiler creates is group- or world-writable, whatever the
/// umask (the Python side's lineprofiler.safe_write uses the same two modes).
constexpr unsigned kRunDirMode = 0755;

/// mkdir -p of path (following symbolic links: the user's own run directory may be one), each
/// directory created kRunDirMode less the umask. Returns 0 or an errno value.
int make_dirs(const std::string& path);

/// Opens dir (creating what is missing) for writing worker files into. When dir's parent is named
/// "workers", the run directory above it may be a symbolic link but "workers" and dir may not;
/// otherwise only dir's last component is checked. dir must also belong to this effective user.
/// Returns an O_DIRECTORY fd (O_CLOEXEC), or -1 with *err an errno value (ELOOP: a symbolic link;
/// EPERM: another user's) and *why one line for the user.
int open_worker_dir(const std::string& dir, int* err, std::string* why);

/// The directory part of path ("." when it has none) and its last component.
std::string dir_of(const std::string& path);
std::string base_of(const std::string& path);

/// One directory, opened on first use and kept open. Thread-safe.
class WorkerDir {
 public:
  WorkerDir() = default;
  ~WorkerDir();
  WorkerDir(const WorkerDir&) = delete;
  WorkerDir& operator=(const WorkerDir&) = delete;

  /// Points the handle at dir (the open fd is closed when dir differs from the current one).
  void set_path(const std::string& dir);

  /// The directory's fd, opening it when it is not open yet (each failed call tries again).
  /// Returns -1 with *err and *why set (see open_worker_dir) when it cannot be used.
  int fd(int* err, std::string* why);

  /// In a forked child: a fresh lock (a parent thread may have held it), then set_path(dir).
  void reset_after_fork(const std::string& dir);

 private:
  std::mutex mu_;
  std::string path_;
  int fd_ = -1;
};

/// Writes text to name inside dir_fd atomically: an unpredictable temporary name created with
/// O_CREAT|O_EXCL|O_NOFOLLOW (mode kFileMode), then renameat(2) over name. Returns 0 or an errno
/// value (nothing partial is left). When keep_fd is not null the written file stays open on
/// *keep_fd (O_RDWR; the caller closes it), else it is closed.
int write_file_at(int dir_fd, const std::string& name, const std::string& text,
                  int* keep_fd = nullptr);

/// Creates name inside dir_fd for appending: O_CREAT|O_EXCL|O_NOFOLLOW, mode kFileMode; an
/// existing entry of that name (a link planted there, a leftover) is unlinked first, never opened.
/// Returns the fd (O_WRONLY|O_APPEND|O_CLOEXEC) or -1 with errno set.
int create_file_at(int dir_fd, const std::string& name);

}  // namespace lp
