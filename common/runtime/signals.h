// What SIGINT (Ctrl-C) and SIGTERM do to a run: end it promptly with a known exit status and one
// line, and never leave half a checkpoint behind.
//
// Delivery: Ctrl-C in a terminal signals the whole foreground process group (mpiexec and every
// rank); `kill -INT <pid of mpiexec>` makes MPICH's hydra forward SIGINT to every rank ("Sending
// Ctrl-C to processes as requested"), SIGTERM likewise. Hydra passes the ranks' exit status on as
// its own, so the launched command exits 130 / 143 (check.h, ExitCode) -- when hydra hears of
// them. Measured here (MPICH 4.0.2): a signal to the ranks only, 10 of 10 runs exit 143. When
// mpiexec itself gets the signal, hydra sometimes exits 0 although every rank printed its line and
// exited 130 / 143: SIGTERM to the whole process group 5 runs of 10, SIGINT to the group (Ctrl-C)
// about 1 in 30, SIGINT to mpiexec alone 1 in 8. Hydra's proxy dies before reporting the ranks'
// status and hydra counts a status it never got as 0; the ranks' status is right.
//
// Two modes:
//  - During the training loop (defer_signals(true)) the handler only records the signal. At the
//    end of the step every rank calls stop_if_interrupted(step), one all_reduce(min) of the
//    recorded signal over the world: if any rank was signalled, rank 0 prints one line
//    "error: interrupted by SIGINT at step 12" and every rank finalises MPI and exits 128 +
//    signal: a clean exit the ranks agree on. A step that does not end within 10 s of the signal
//    (a rank stuck in a collective, a very long step) is cut short: a helper thread, woken by
//    the handler, then acts as below, adding "(the step did not end within 10 s of the signal)".
//  - Anywhere else (start-up, the save, the report) the handler acts at once:
//      1. unlinks the temporary file of a save in progress (the path recorded by
//         set_temp_file_for_signals; the target, written by rename(2) only when complete, keeps
//         its old contents),
//      2. on world rank 0 only, writes the same one line,
//      3. _exit(128 + signal): 130 for SIGINT, 143 for SIGTERM.
// The handler only calls async-signal-safe functions (unlink, write, _exit: signal-safety(7)) and
// touches sig_atomic_t flags and a static buffer filled before the temporary file is created.
//
// A writer killed by SIGKILL (or a process without these handlers) can still leave
// "<path>.tmp.<pid>"; the next save_safetensors to the same path removes it once that pid is gone.
//
// Glossary: rank = index in MPI_COMM_WORLD; tmp = "<target>.tmp.<pid>" (checkpoint.h).
#pragma once

#include <cstdint>
#include <string>

namespace llmp {

/// Installs the SIGINT and SIGTERM handlers described above (sigaction) and starts the grace
/// thread (it waits on a semaphore and never calls MPI). `print` says whether this process writes
/// the one-line message (world rank 0 does; the others stay silent so a 4-rank job prints one
/// line, not four). Call once per process, after MPI_Init.
void install_signal_handlers(bool print);

/// Records the step the run is on, for the message ("at step 12"); 0 = before the first step.
void set_step_for_signals(int64_t step);

/// true: from now on a signal is only recorded, for stop_if_interrupted; false: it acts at once
/// (and one recorded meanwhile is acted on now).
void defer_signals(bool on);

/// The signal recorded while deferred (SIGINT or SIGTERM), or 0.
int pending_signal();

/// Collective over MPI_COMM_WORLD (every rank calls it at the same point, e.g. the end of each
/// step): returns when no rank has a pending signal; otherwise rank 0 prints
/// "error: interrupted by SIGINT at step <step>", and every rank finalises MPI and exits 130
/// (143 for SIGTERM; SIGINT wins when ranks saw different signals). Without MPI, the same on
/// this process alone.
void stop_if_interrupted(int64_t step);

/// Records the temporary file a save is writing, so the handler unlinks it. Call it before the
/// file is created; paths longer than 4095 bytes are not recorded (the stale-file sweep of the
/// next save removes such a file).
void set_temp_file_for_signals(const std::string& path);

/// Forgets the temporary file (after its rename, or after it was removed on an error).
void clear_temp_file_for_signals();

}  // namespace llmp
