// Logging that does not multiply by the number of ranks.
//
// N ranks running the same trainer would print every line N times. So by default only rank 0
// prints: log_info (stdout) and log_warn (stderr, prefixed "warning: "). log_all_ranks prints on
// every rank, prefixed "[rank r] ", for the lines that differ per rank (a rank's shard, its
// memory). Format strings are fmt's ("{}", "{:.4f}"), checked at compile time.
//
// Built on spdlog (two loggers with the bare "%v" pattern, flushed on every line so that the
// output of several processes interleaves by whole lines). The rank is MPI_COMM_WORLD's when MPI
// is initialised, else 0.
#pragma once

#include <string>
#include <utility>

#include <fmt/format.h>

namespace llmp {

/// This process's rank in MPI_COMM_WORLD, or 0 when MPI is not (or no longer) initialised.
int log_rank();

/// --quiet: when true, log_info prints nothing (warnings and log_all_ranks still print).
void set_log_quiet(bool quiet);
bool log_quiet();

namespace detail {
void emit_info(const std::string& line);       // rank 0 only, stdout, unless quiet
void emit_warn(const std::string& line);       // rank 0 only, stderr, "warning: " prefix
void emit_all_ranks(const std::string& line);  // every rank, stdout, "[rank r] " prefix
}  // namespace detail

/// Rank 0 prints the formatted line to stdout (nothing when quiet). log_info("step {}", 3).
template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  detail::emit_info(fmt::format(f, std::forward<Args>(args)...));
}

/// Rank 0 prints "warning: <line>" to stderr.
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  detail::emit_warn(fmt::format(f, std::forward<Args>(args)...));
}

/// Every rank prints "[rank r] <line>" to stdout.
template <typename... Args>
void log_all_ranks(fmt::format_string<Args...> f, Args&&... args) {
  detail::emit_all_ranks(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace llmp
