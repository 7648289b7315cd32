// Rank-aware logging on spdlog. See log.h.
#include "common/runtime/log.h"

#include <atomic>
#include <memory>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "common/runtime/check.h"

namespace llmp {

namespace {

std::atomic<bool> g_quiet{false};

// A logger writing bare lines ("%v") to one stream, flushed after each line.
std::shared_ptr<spdlog::logger> make_logger(const char* name, bool to_stderr) {
  std::shared_ptr<spdlog::sinks::sink> sink;
  if (to_stderr) {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    sink = std::make_shared<spdlog::sinks::stdout_sink_mt>();
  }
  auto logger = std::make_shared<spdlog::logger>(name, sink);
  logger->set_pattern("%v");
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::trace);
  return logger;
}

spdlog::logger& out() {
  static std::shared_ptr<spdlog::logger> l = make_logger("llmp.out", false);
  return *l;
}

spdlog::logger& err() {
  static std::shared_ptr<spdlog::logger> l = make_logger("llmp.err", true);
  return *l;
}

}  // namespace

int log_rank() { return world_rank(); }

void set_log_quiet(bool quiet) { g_quiet = quiet; }
bool log_quiet() { return g_quiet; }

namespace detail {

void emit_info(const std::string& line) {
  if (g_quiet || log_rank() != 0) return;
  out().info("{}", line);
}

void emit_warn(const std::string& line) {
  if (log_rank() != 0) return;
  err().warn("warning: {}", line);
}

void emit_all_ranks(const std::string& line) { out().info("[rank {}] {}", log_rank(), line); }

}  // namespace detail

}  // namespace llmp
