// standalone/signals.h: flush on SIGTERM/SIGINT/SIGUSR1/SIGHUP from a thread of ours, then chain.
//
// The handler itself does only async-signal-safe things: it writes the signal number to a pipe,
// waits (poll, bounded) for the flusher thread to answer on a second pipe, then chains to the
// disposition that was installed before it: calls that handler, ignores, or (the default action)
// puts the default back and re-raises, so the process ends as it would have without us. The
// flusher thread does the real work (a snapshot, the JSON, the atomic write), which takes locks
// and allocates and so may never run inside a handler.
#pragma once

#include <signal.h>

#include <cstdint>

namespace lp::standalone {

/// The signals handled: SIGTERM, SIGINT, SIGUSR1, SIGHUP. A SIGINT ignored when the handlers are
/// installed (a shell's background job) is left ignored, so that programs this one execs inherit
/// the ignoring as the shell meant.
constexpr int kFlushSignalCount = 4;
extern const int kFlushSignals[kFlushSignalCount];

/// How long a handler waits for the flush before chaining anyway, in ms.
constexpr int kSignalFlushWaitMs = 10000;

/// Runs on the flusher thread for each handled signal. final: the chain ends in the default
/// action, so the process ends right after this returns (write the final file).
using SignalFlushFn = void (*)(void* ctx, int signum, bool final);

/// Installs the handlers (chaining to the current dispositions) and starts the flusher thread,
/// which calls fn(ctx, ...) per signal until signals_detach(). Returns false (nothing installed)
/// when another owner holds them or a pipe or the thread cannot be made. The flusher thread
/// blocks the handled signals. Not thread-safe against a concurrent attach/detach.
bool signals_attach(SignalFlushFn fn, void* ctx);

/// Makes the handlers inert (they only chain from now on), stops and joins the flusher thread
/// (after it finishes a flush in progress), and puts back the previous disposition of each signal
/// whose current handler is still ours (one installed on top of ours is left, and ours, inert,
/// keeps chaining under it).
void signals_detach();

/// In a forked child: the handlers go inert without touching the parent's thread or pipes.
void signals_forget_after_fork();

/// RAII: blocks the handled signals on the calling thread while alive, so that threads started
/// meanwhile (which inherit the mask) never run the handler.
class BlockFlushSignals {
 public:
  BlockFlushSignals();
  ~BlockFlushSignals();
  BlockFlushSignals(const BlockFlushSignals&) = delete;
  BlockFlushSignals& operator=(const BlockFlushSignals&) = delete;

 private:
  sigset_t saved_;
};

}  // namespace lp::standalone
