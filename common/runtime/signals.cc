// SIGINT / SIGTERM handling (see signals.h). Everything the handler touches is a static buffer or
// a sig_atomic_t; it calls only unlink, write and _exit.
#include "common/runtime/signals.h"

#include <mpi.h>
#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/runtime/check.h"

namespace llmp {

namespace {

constexpr size_t kMaxPath = 4096;
char g_temp_path[kMaxPath];
volatile sig_atomic_t g_temp_set = 0;
volatile sig_atomic_t g_print = 0;
// The step as a number the handler can format; sig_atomic_t is an int, enough for steps.
volatile sig_atomic_t g_step = 0;
volatile sig_atomic_t g_deferred = 0;
volatile sig_atomic_t g_pending = 0;  // the first signal seen while deferred
// Posted by the handler when it defers a signal; the grace thread then gives the step
// kGraceSeconds to end before it ends the process itself (a rank stuck in a collective would
// otherwise ignore SIGINT and SIGTERM for ever). sem_post is async-signal-safe.
constexpr int kGraceSeconds = 10;
sem_t g_deferred_sem;

// Async-signal-safe string building into a fixed buffer.
struct Line {
  char buf[kMaxPath + 256];
  size_t n = 0;
  void add(const char* s) {
    while (*s && n + 1 < sizeof(buf)) buf[n++] = *s++;
  }
  void add_int(long v) {
    char digits[24];
    int k = 0;
    if (v < 0) {
      add("-");
      v = -v;
    }
    do {
      digits[k++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v > 0 && k < 23);
    while (k > 0 && n + 1 < sizeof(buf)) buf[n++] = digits[--k];
  }
};

int exit_code_of(int sig) {
  return sig == SIGINT ? kExitInterrupted : sig == SIGTERM ? kExitTerminated : 128 + sig;
}

const char* name_of(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

// Unlinks the temporary file, prints the line (rank 0), _exits 128 + sig. Async-signal-safe.
[[noreturn]] void exit_now(int sig, const char* note) {
  const bool removed = g_temp_set && ::unlink(g_temp_path) == 0;
  if (g_print) {
    Line line;
    line.add("error: interrupted by ");
    line.add(name_of(sig));
    if (g_step > 0) {
      line.add(" at step ");
      line.add_int(g_step);
    }
    if (removed) {
      line.add("; removed the unfinished ");
      line.add(g_temp_path);
    }
    if (note) line.add(note);
    line.add("\n");
    ssize_t ignored = ::write(STDERR_FILENO, line.buf, line.n);
    (void)ignored;
  }
  ::_exit(exit_code_of(sig));
}

void on_signal(int sig) {
  if (!g_deferred) exit_now(sig, nullptr);
  // Training: the loop stops at the end of the step (stop_if_interrupted); the grace thread
  // stops the process if the step does not end.
  if (!g_pending) {
    g_pending = sig;
    ::sem_post(&g_deferred_sem);
  }
}

void grace_thread() {
  sigset_t mine;  // signals go to the main thread; this one only waits
  sigemptyset(&mine);
  sigaddset(&mine, SIGINT);
  sigaddset(&mine, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &mine, nullptr);
  while (::sem_wait(&g_deferred_sem) != 0 && errno == EINTR) {
  }
  std::this_thread::sleep_for(std::chrono::seconds(kGraceSeconds));
  exit_now(g_pending, " (the step did not end within 10 s of the signal)");
}

}  // namespace

void install_signal_handlers(bool print) {
  g_print = print ? 1 : 0;
  ::sem_init(&g_deferred_sem, 0, 0);
  std::thread(grace_thread).detach();
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);  // one handler at a time: the second signal waits for _exit
  sigaddset(&sa.sa_mask, SIGTERM);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void set_step_for_signals(int64_t step) { g_step = static_cast<sig_atomic_t>(step); }

void defer_signals(bool on) {
  g_deferred = on ? 1 : 0;
  if (!on && g_pending) exit_now(g_pending, nullptr);
}

int pending_signal() { return g_pending; }

void stop_if_interrupted(int64_t step) {
  // Ranks may have seen different signals: SIGINT (2) before SIGTERM (15), so "min over the
  // ranks that saw one": 0 stands for none by mapping it above both.
  constexpr int kNone = 1 << 30;
  int mine = g_pending ? static_cast<int>(g_pending) : kNone, sig = mine;
  if (mpi_up()) sig = world_min(mine, "stop_if_interrupted");
  if (sig == kNone) return;
  if (g_print) {
    std::fprintf(stderr, "error: interrupted by %s at step %lld\n", name_of(sig),
                 static_cast<long long>(step));
    std::fflush(stderr);
  }
  std::fflush(stdout);
  if (mpi_up()) MPI_Finalize();
  std::exit(exit_code_of(sig));
}

void set_temp_file_for_signals(const std::string& path) {
  g_temp_set = 0;  // the handler never reads a half-copied path
  if (path.size() >= kMaxPath) return;
  std::memcpy(g_temp_path, path.c_str(), path.size() + 1);
  std::atomic_signal_fence(std::memory_order_seq_cst);  // the copy is done before the flag is set
  g_temp_set = 1;
}

void clear_temp_file_for_signals() { g_temp_set = 0; }

}  // namespace llmp
