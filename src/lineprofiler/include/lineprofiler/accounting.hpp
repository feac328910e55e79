// lineprofiler/accounting.hpp: phases and counters from C++, recorded by lineprofiler.accounting.
//
//   #include <lineprofiler/accounting.hpp>
//
//   void expand(Node& n) {
//     LP_PHASE("expand");                       // closes at the end of the enclosing block
//     ...
//     LP_COUNT("simulations", 64);
//   }
//
// Nothing here records by itself: the calls go through a function table that a provider installs.
// In a Python extension the provider is lineprofiler._core, reached with lineprofiler::import_api()
// from <lineprofiler/python.hpp>; in a C++ program with no Python it is liblineprofiler.a
// (lineprofiler::Profiler). Until a provider is installed, and whenever it has no profiler to
// record into, every scope, count() and current() is a no-op costing one load and one branch.
//
// Names are string literals or std::string_views whose text the caller keeps alive. LP_PHASE,
// LP_COUNT and a `static const lineprofiler::Name` cache the name's handle at the call site (no
// lookup after the first use); Phase(std::string_view) and count(std::string_view, n) find it in a
// small per-thread cache (a compare of the text), falling back to the provider's intern().
//
// C++17, GCC or Clang, header-only; -Wall -Wextra -Werror clean. Links nothing of lineprofiler's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#if defined(__GNUC__) && defined(__has_include)
#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#define LP_API_EH_GLOBALS 1
#endif
#endif

// ------------------------------------------------------------------------------------------------
// The function table (a plain C struct: the ABI between this header and a provider).
//
// Versioning rule:
//   * LP_API_ABI_VERSION changes only for an incompatible change (a member removed, reordered or
//     re-typed). A consumer refuses a table whose abi_version differs from its own; within one ABI
//     version nothing is ever removed or reordered.
//   * The table only grows: new members are appended at the end, and a provider sets `size` to
//     sizeof(its lp_api). A consumer uses a member that is not in the first table (LP_API_V1_SIZE)
//     only when LP_API_HAS(table, member) says the provider's table reaches it, so an extension
//     built against an older header keeps working with a newer provider (it never looks past the
//     end it knows), and one built against a newer header degrades member by member with an
//     older provider (its current() returns "" when the table has no `current`).
//   * A provider keeps its table, and every function in it, valid until the process exits (a
//     scope entered through a table may exit after that table was replaced).
//   * Handles from intern() are valid with every table that shows the same names_epoch. A provider
//     changes names_epoch when handles it gave out stop being valid (never, for _core: its names
//     live as long as the process); call sites cache a handle together with the epoch.
//
// LINEPROFILER_API_LEVEL (default: the newest) declares the table as an earlier header did; the
// test suite builds an extension with LINEPROFILER_API_LEVEL=1 to prove the rule above.

#define LP_API_ABI_VERSION 1u
#define LP_API_LEVEL_NEWEST 4
#ifndef LINEPROFILER_API_LEVEL
#define LINEPROFILER_API_LEVEL LP_API_LEVEL_NEWEST
#endif

extern "C" {

/// Storage a provider fills at enter() and reads at exit(); the caller keeps it, at a fixed
/// address, from enter() to exit() (its address identifies the entry).
typedef struct lp_frame {
  void* impl[3];
} lp_frame;

typedef struct lp_api lp_api;

struct lp_api {
  // --- level 1 (the first table) ---
  uint32_t abi_version;  // LP_API_ABI_VERSION of the provider
  uint32_t size;         // sizeof(lp_api) as the provider was built: members below it exist
  uint32_t names_epoch;  // nonzero; see the versioning rule
  uint32_t reserved;     // 0
  const char* provider;  // e.g. "lineprofiler._core 0.1.0": for messages only

  /// Handle of a name (UTF-8, len bytes), interned on first sight; thread-safe. 0: no handle
  /// (the empty name, or the provider could not intern it); enter() and count() ignore 0.
  uint32_t (*intern)(const char* name, size_t len);
  /// Opens a phase under the innermost phase open on the calling thread (in a Python thread, the
  /// innermost Python or C++ phase; in an asyncio task, the task's). Returns nonzero when the
  /// entry was recorded and must be closed with exit(frame), 0 when nothing was recorded (no
  /// profiler, name 0, an enclosing sampled phase skipped this entry, depth overflow).
  int (*enter)(uint32_t name, lp_frame* frame);
  /// Closes an entry enter() recorded, on the thread that opened it. Safe after the profiler was
  /// closed or replaced, and in a forked child (it then records nothing).
  void (*exit)(lp_frame* frame);
  /// Adds n to the counter `name` on the calling thread's innermost open phase (the root when
  /// none is open); saturates at the int64 range.
  void (*count)(uint32_t name, int64_t n);
  /// Registers a consumer's table pointer: the provider stores itself into *slot (an atomic
  /// store) while it has a profiler to record into and nullptr otherwise, now and on every change,
  /// so a disabled scope costs one load of *slot. The slot must live until the process exits.
  void (*attach)(const lp_api** slot);

#if LINEPROFILER_API_LEVEL >= 2
  // --- level 2 ---
  /// Copies the name of the calling thread's innermost open phase ("" at the root) into buf (at
  /// most cap bytes, not NUL-terminated); returns its full length in bytes.
  size_t (*current)(char* buf, size_t cap);
#endif

#if LINEPROFILER_API_LEVEL >= 3
  // --- level 3 ---
  /// exit() for an entry left by an exception (its scope destroyed while unwinding): the entry
  /// is counted in its phase's `raised`, then closed as exit() closes it.
  void (*exit_raised)(lp_frame* frame);
#endif

#if LINEPROFILER_API_LEVEL >= 4
  // --- level 4 ---
  /// Copies the handles of the phases open on the calling thread (in an asyncio task, the
  /// task's), outermost first and without "[threads]" elements, into names (at most cap of them);
  /// returns how many are open (more than cap: only the first cap were copied).
  size_t (*capture)(uint32_t* names, size_t cap);
  /// Makes the calling thread's phases nest under names[0..n) followed by a "[threads]" element
  /// (work handed to this thread by the one that captured names) until detach(frame). The caller
  /// keeps frame at a fixed address until then. Returns nonzero when attached, 0 when not (no
  /// profiler, n == 0, depth overflow); only an attached frame is given to detach().
  int (*attach_path)(const uint32_t* names, size_t n, lp_frame* frame);
  /// Ends what attach_path() attached, on the thread that attached it; phases still open inside
  /// are dropped unrecorded. Safe after the profiler was closed or replaced.
  void (*detach)(lp_frame* frame);
#endif
};

}  // extern "C"

/// Size of the level-1 table: the smallest table a consumer accepts.
#define LP_API_V1_SIZE (offsetof(lp_api, attach) + sizeof(void (*)(const lp_api**)))

/// Whether the provider's table `api` (a const lp_api*) has `member`.
#define LP_API_HAS(api, member) \
  ((api)->size >= offsetof(lp_api, member) + sizeof(static_cast<const lp_api*>(nullptr)->member))

#if defined(__GNUC__)
#define LP_API_LIKELY(x) __builtin_expect(!!(x), 1)
#define LP_API_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LP_API_HIDDEN __attribute__((visibility("hidden")))
#define LP_API_NOINLINE __attribute__((noinline, cold))
#else
#define LP_API_LIKELY(x) (x)
#define LP_API_UNLIKELY(x) (x)
#define LP_API_HIDDEN
#define LP_API_NOINLINE
#endif

namespace lineprofiler {
namespace detail {

// The table this binary (this shared object, or this program) records through; nullptr while no
// provider is installed or it has no profiler. Hidden: each extension has its own, so extensions
// built against different headers never share one.
inline LP_API_HIDDEN const lp_api* g_api = nullptr;

/// The installed table, or nullptr (one relaxed load).
inline const lp_api* api() noexcept {
  return __atomic_load_n(&g_api, __ATOMIC_ACQUIRE);
}

/// Installs a provider's table (nullptr: none); for providers (liblineprofiler's Profiler, tests).
/// In a Python extension use lineprofiler::import_api() instead, which attaches this binary's
/// slot to _core. Returns 0, or -1 when the table's ABI version or size is not one this header
/// accepts (nothing is installed then).
inline int install_api(const lp_api* table) noexcept {
  if (table && (table->abi_version != LP_API_ABI_VERSION || table->size < LP_API_V1_SIZE)) {
    return -1;
  }
  __atomic_store_n(&g_api, table, __ATOMIC_RELEASE);
  return 0;
}

/// The slot a provider's attach() writes: this binary's table pointer.
inline const lp_api** api_slot() noexcept {
  return &g_api;
}

/// Handle of name in api, cached in *cache as (names_epoch << 32 | handle) (0: not cached).
LP_API_NOINLINE inline uint32_t intern_into(const lp_api* api, std::string_view name,
                                            uint64_t* cache) noexcept {
  uint32_t id = api->intern(name.data(), name.size());
  if (id) __atomic_store_n(cache, (uint64_t(api->names_epoch) << 32) | id, __ATOMIC_RELAXED);
  return id;
}

// A per-thread cache of handles for names given as std::string_view (no call-site cache): keyed
// by the text's address and length, confirmed by comparing the text (a string freed and another
// built at its address cannot take its handle). Names longer than kShortName are not cached.
constexpr size_t kShortName = 40;
struct ViewCacheEntry {
  const char* data;
  uint64_t tagged;  // (names_epoch << 32 | handle), 0: empty
  uint32_t len;
  char text[kShortName];
};
constexpr size_t kViewCacheSize = 32;
inline thread_local LP_API_HIDDEN ViewCacheEntry t_view_cache[kViewCacheSize];

/// Handle of a name given as a view: from the per-thread cache, else interned (and cached).
inline uint32_t view_handle(const lp_api* api, std::string_view name) noexcept {
  if (name.size() > kShortName) return api->intern(name.data(), name.size());
  ViewCacheEntry& e =
      t_view_cache[(reinterpret_cast<uintptr_t>(name.data()) >> 3) % kViewCacheSize];
  if (LP_API_LIKELY(e.data == name.data() && e.len == name.size() &&
                    (e.tagged >> 32) == api->names_epoch &&
                    std::memcmp(e.text, name.data(), name.size()) == 0)) {
    return uint32_t(e.tagged);
  }
  uint32_t id = api->intern(name.data(), name.size());
  if (id) {
    e.data = name.data();
    e.len = uint32_t(name.size());
    std::memcpy(e.text, name.data(), name.size());
    e.tagged = (uint64_t(api->names_epoch) << 32) | id;
  }
  return id;
}

/// Length of the NUL-terminated text in a char array (at most N - 1), at compile time when it
/// can be: what lets GCC constant-initialise a Name made from a literal (its
/// std::string_view(const char*) is not a constant expression in a static's initialiser there,
/// which costs every LP_PHASE a guard-variable check).
template <size_t N>
constexpr size_t array_len(const char (&text)[N]) noexcept {
  size_t n = 0;
  while (n + 1 < N && text[n] != '\0') ++n;
  return n;
}

#if LINEPROFILER_API_LEVEL >= 3
#if defined(LP_API_EH_GLOBALS)
// The calling thread's count of exceptions in flight, the one std::uncaught_exceptions() reads:
// the Itanium C++ ABI (2.2.2, "Caught Exception Stack") lays each thread's __cxa_eh_globals out as
// {__cxa_exception* caughtExceptions; unsigned int uncaughtExceptions; ...}, and
// __cxa_get_globals() returns it (GCC's libsupc++, libc++abi and libcxxrt alike). A scope finds it
// once at entry and reads it at exit with one load instead of a second call into the runtime.
struct EhGlobalsHead {
  void* caught;
  unsigned int uncaught;
};
inline const unsigned int* uncaught_counter() noexcept {
  return reinterpret_cast<const unsigned int*>(
      reinterpret_cast<const char*>(abi::__cxa_get_globals()) + offsetof(EhGlobalsHead, uncaught));
}
#endif
#endif

}  // namespace detail

/// A phase or counter name whose handle is cached in the object: declare it once, static,
/// (`static const lineprofiler::Name kExpand("expand");`) and use it at every call. Constant-
/// initialised (no guard, no constructor at startup). The text must outlive the object.
class Name {
 public:
  constexpr explicit Name(std::string_view text) noexcept : text_(text) {}
  /// A name from a string literal: its text up to the first NUL, constant-initialised.
  template <size_t N>
  constexpr explicit Name(const char (&text)[N]) noexcept : text_(text, detail::array_len(text)) {}
  Name(const Name&) = delete;
  Name& operator=(const Name&) = delete;

  /// The handle of this name in api (interned on first use, and again when the epoch changes).
  uint32_t handle(const lp_api* api) const noexcept {
    uint64_t c = __atomic_load_n(&cache_, __ATOMIC_RELAXED);
    if (LP_API_LIKELY(c != 0 && (c >> 32) == api->names_epoch)) return uint32_t(c);
    return detail::intern_into(api, text_, &cache_);
  }
  std::string_view text() const noexcept { return text_; }

 private:
  std::string_view text_;
  mutable uint64_t cache_ = 0;  // (names_epoch << 32 | handle); accessed atomically
};

/// An RAII phase: open from construction to destruction, nested under the phases open on the
/// calling thread. Neither copyable nor movable (its address identifies the entry).
class Phase {
 public:
  /// A phase named by a cached Name (what LP_PHASE uses).
  explicit Phase(const Name& name) noexcept {
    const lp_api* api = detail::api();
    if (LP_API_UNLIKELY(api != nullptr)) open(api, name.handle(api));
  }
  /// A phase named by text the caller keeps alive (looked up in a per-thread cache).
  explicit Phase(std::string_view name) noexcept {
    const lp_api* api = detail::api();
    if (LP_API_UNLIKELY(api != nullptr)) open(api, detail::view_handle(api, name));
  }
  ~Phase() {
    if (LP_API_UNLIKELY(api_ != nullptr)) close();
  }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

  /// Whether this entry is being recorded.
  bool recorded() const noexcept { return api_ != nullptr; }

 private:
  void open(const lp_api* api, uint32_t handle) noexcept {
    if (api->enter(handle, &frame_)) {
      api_ = api;
#if LINEPROFILER_API_LEVEL >= 3 && defined(LP_API_EH_GLOBALS)
      uncaught_at_ = detail::uncaught_counter();
      uncaught_ = *uncaught_at_;
#elif LINEPROFILER_API_LEVEL >= 3
      uncaught_ = unsigned(std::uncaught_exceptions());
#endif
    }
  }
  void close() noexcept {
#if LINEPROFILER_API_LEVEL >= 3
    // More exceptions in flight than at entry: this scope is being destroyed by unwinding.
#if defined(LP_API_EH_GLOBALS)
    unsigned now = *uncaught_at_;
#else
    unsigned now = unsigned(std::uncaught_exceptions());
#endif
    if (LP_API_UNLIKELY(now > uncaught_) && LP_API_HAS(api_, exit_raised)) {
      api_->exit_raised(&frame_);
      return;
    }
#endif
    api_->exit(&frame_);
  }
  const lp_api* api_ = nullptr;  // the table that recorded the entry (exit goes to the same one)
  lp_frame frame_;
#if LINEPROFILER_API_LEVEL >= 3
#if defined(LP_API_EH_GLOBALS)
  const unsigned int* uncaught_at_ = nullptr;  // this thread's count of exceptions in flight
#endif
  unsigned uncaught_ = 0;  // exceptions in flight at entry
#endif
};

/// Adds n to the counter `name` on the calling thread's innermost open phase (the root when none
/// is open).
inline void count(const Name& name, int64_t n = 1) noexcept {
  const lp_api* api = detail::api();
  if (LP_API_UNLIKELY(api != nullptr)) api->count(name.handle(api), n);
}

/// count() with a name given as text the caller keeps alive (looked up in a per-thread cache).
inline void count(std::string_view name, int64_t n = 1) noexcept {
  const lp_api* api = detail::api();
  if (LP_API_UNLIKELY(api != nullptr)) api->count(detail::view_handle(api, name), n);
}

/// The name of the calling thread's innermost open phase, or "" (none open, no profiler, or a
/// provider whose table predates current()). Allocates: for log lines, not for hot loops.
inline std::string current() {
  std::string out;
#if LINEPROFILER_API_LEVEL >= 2
  const lp_api* api = detail::api();
  if (api == nullptr || !LP_API_HAS(api, current)) return out;
  char buf[128];
  size_t n = api->current(buf, sizeof buf);
  if (n <= sizeof buf) {
    out.assign(buf, n);
  } else {  // a long name: ask again with room for it (the same thread's phase, unchanged)
    out.resize(n);
    api->current(&out[0], n);
  }
#endif
  return out;
}

/// The deepest phase path a Context holds (the recorder's own depth limit).
constexpr size_t kMaxContextDepth = 128;

/// The phases open on one thread, captured by capture() for Attach in another: a plain value
/// (copy it into the task you hand to a pool). Empty when nothing was open or nothing records.
class Context {
 public:
  Context() noexcept = default;
  /// How many phases the captured path holds (0: attaching does nothing).
  size_t depth() const noexcept {
#if LINEPROFILER_API_LEVEL >= 4
    return depth_;
#else
    return 0;  // a table without capture(): nothing is ever captured
#endif
  }

#if LINEPROFILER_API_LEVEL >= 4
 private:
  friend Context capture() noexcept;
  friend class Attach;
  uint32_t epoch_ = 0;  // the names_epoch the handles belong to
  uint32_t depth_ = 0;
  uint32_t names_[kMaxContextDepth] = {};
#endif
};

/// The calling thread's (or asyncio task's) open phase path, for Attach in another thread.
inline Context capture() noexcept {
  Context ctx;
#if LINEPROFILER_API_LEVEL >= 4
  const lp_api* api = detail::api();
  if (api == nullptr || !LP_API_HAS(api, detach)) return ctx;
  size_t n = api->capture(ctx.names_, kMaxContextDepth);
  ctx.depth_ = uint32_t(n < kMaxContextDepth ? n : kMaxContextDepth);
  ctx.epoch_ = api->names_epoch;
#endif
  return ctx;
}

/// While alive, the calling thread's phases nest under a Context captured in another thread,
/// marked as run on other threads (`iteration/self_play/[threads]/search`). RAII, like Phase:
/// neither copyable nor movable. Does nothing for an empty Context, without a profiler, or with a
/// provider whose table predates it.
class Attach {
 public:
  explicit Attach(const Context& ctx) noexcept {
#if LINEPROFILER_API_LEVEL >= 4
    const lp_api* api = detail::api();
    if (api == nullptr || ctx.depth_ == 0 || !LP_API_HAS(api, detach) ||
        ctx.epoch_ != api->names_epoch) {
      return;
    }
    if (api->attach_path(ctx.names_, ctx.depth_, &frame_)) api_ = api;
#else
    (void)ctx;
#endif
  }
  ~Attach() {
#if LINEPROFILER_API_LEVEL >= 4
    if (api_ != nullptr) api_->detach(&frame_);
#endif
  }
  Attach(const Attach&) = delete;
  Attach& operator=(const Attach&) = delete;

  /// Whether this thread's phases now nest under the captured path.
  bool attached() const noexcept {
#if LINEPROFILER_API_LEVEL >= 4
    return api_ != nullptr;
#else
    return false;
#endif
  }

#if LINEPROFILER_API_LEVEL >= 4
 private:
  const lp_api* api_ = nullptr;
  lp_frame frame_;
#endif
};

/// Whether scopes record right now: a provider is installed and has a profiler.
inline bool enabled() noexcept {
  return detail::api() != nullptr;
}

}  // namespace lineprofiler

#define LP_API_CONCAT2(a, b) a##b
#define LP_API_CONCAT(a, b) LP_API_CONCAT2(a, b)

/// A phase named by a string literal, open until the end of the enclosing block; the name's handle
/// is cached at the call site.
#define LP_PHASE(literal) LP_API_PHASE_AT(literal, LP_API_CONCAT(lp_phase_, __COUNTER__))
#define LP_API_PHASE_AT(literal, id)                                   \
  static const ::lineprofiler::Name LP_API_CONCAT(id, _name){literal}; \
  const ::lineprofiler::Phase id(LP_API_CONCAT(id, _name))

/// count() with a string-literal name whose handle is cached at the call site.
#define LP_COUNT(literal, n)                                   \
  do {                                                         \
    static const ::lineprofiler::Name lp_count_name_{literal}; \
    ::lineprofiler::count(lp_count_name_, (n));                \
  } while (0)
