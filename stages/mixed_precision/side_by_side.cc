// The four-run driver and its table (side_by_side.h).
#include "stages/mixed_precision/side_by_side.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "common/runtime/check.h"

extern char** environ;

namespace llmp {
namespace {

/// Whether `arg` is `flag` or `flag=...`.
bool is_flag(const std::string& arg, const std::string& flag) {
  return arg == flag || arg.rfind(flag + "=", 0) == 0;
}

/// Runs /proc/self/exe with `args` (argv[1...]) and waits. Returns its exit status, or 128 + the
/// signal that ended it.
int run_child(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"/proc/self/exe"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : all) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid;
  const int rc = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, cargv.data(), environ);
  if (rc != 0) user_error(std::string("cannot start /proc/self/exe: ") + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) user_error(std::string("waitpid: ") + std::strerror(errno));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

std::string bytes(double b) {
  return b >= (1 << 20) ? fmt::format("{:.2f} MiB", b / (1 << 20))
                        : fmt::format("{:.2f} KiB", b / (1 << 10));
}

}  // namespace

bool is_single_run(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (is_flag(argv[i], "--summary_json")) return true;
  return false;
}

std::vector<PrecisionRun> precision_runs() {
  return {{"fp32", {"--precision", "fp32"}, false},
          {"bf16", {"--precision", "bf16"}, false},
          {"fp16, dynamic S", {"--precision", "fp16"}, true},
          {"fp16, S = 1", {"--precision", "fp16", "--loss_scale", "1"}, false}};
}

std::string side_by_side_table(const std::vector<PrecisionRun>& runs,
                               const std::vector<PrecisionSummary>& results) {
  std::string out = fmt::format(
      "{:<16} {:>10} {:>9} {:>11} {:>11} {:>11} {:>7} {:>9} {:>10} {:>9}\n", "precision",
      "train loss", "val loss", "parameters", "gradients", "optimizer", "skipped", "final S",
      "underflow", "tokens/s");
  for (size_t k = 0; k < results.size(); ++k) {
    const PrecisionSummary& r = results[k];
    out += fmt::format(
        "{:<16} {:>10.4f} {:>9} {:>11} {:>11} {:>11} {:>7} {:>9g} {:>9.4f}% {:>9.0f}\n",
        runs[k].label, r.train_loss, r.val_loss < 0 ? "-" : fmt::format("{:.4f}", r.val_loss),
        bytes(r.param_bytes), bytes(r.grad_bytes), bytes(r.optimizer_bytes), r.skipped_steps,
        r.final_loss_scale, 100 * r.underflow_fraction, r.tokens_per_s);
  }
  out += "bytes per parameter, measured (parameters + gradients + optimizer state):\n";
  for (size_t k = 0; k < results.size(); ++k) {
    const PrecisionSummary& r = results[k];
    const double psi = r.psi > 0 ? static_cast<double>(r.psi) : 1.0;
    out += fmt::format("  {:<16} {:g} + {:g} + {:g} = {:g} bytes × Ψ = {}\n", runs[k].label,
                       r.param_bytes / psi, r.grad_bytes / psi, r.optimizer_bytes / psi,
                       (r.param_bytes + r.grad_bytes + r.optimizer_bytes) / psi, r.psi);
  }
  return out;
}

int run_side_by_side(int argc, char** argv) {
  const std::vector<PrecisionRun> runs = precision_runs();
  std::vector<std::string> common, scaler;  // the user's flags; the loss-scaler ones apart
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    for (const char* own : {"--precision", "--loss_scale"})
      if (is_flag(a, own))
        user_error(std::string(own) + ": mixed_precision sets it itself (it runs fp32, bf16, "
                   "fp16 with dynamic scaling and fp16 with --loss_scale 1); train one "
                   "precision with //stages/baseline:train --precision");
    bool to_scaler = false;
    for (const char* f : {"--initial_loss_scale", "--loss_scale_window", "--min_loss_scale"})
      to_scaler = to_scaler || is_flag(a, f);
    std::vector<std::string>& dst = to_scaler ? scaler : common;
    dst.push_back(a);
    if (to_scaler && a.find('=') == std::string::npos && i + 1 < argc) dst.push_back(argv[++i]);
  }

  const char* tmp = std::getenv("TMPDIR");
  // mkdtemp's template: the name ends in six X's, which it replaces.
  std::string dir =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/llmp_mixed_precision." + std::string(6, 'X');
  if (!mkdtemp(dir.data())) user_error("cannot create a directory " + dir + ": " +
                                       std::strerror(errno));
  std::vector<PrecisionSummary> results;
  int status = 0;
  for (size_t k = 0; k < runs.size() && status == 0; ++k) {
    std::printf("\n=== run %zu of %zu: %s ===\n", k + 1, runs.size(), runs[k].label.c_str());
    const std::string json = dir + "/run" + std::to_string(k) + ".json";
    std::vector<std::string> args = common;
    args.insert(args.end(), runs[k].flags.begin(), runs[k].flags.end());
    if (runs[k].takes_scaler_flags) args.insert(args.end(), scaler.begin(), scaler.end());
    args.insert(args.end(), {"--summary_json", json});
    status = run_child(args);
    if (status != 0) break;  // the run printed its own "error: ..." line
    try {
      std::ifstream in(json);
      results.push_back(nlohmann::json::parse(in).get<PrecisionSummary>());
    } catch (const std::exception& e) {
      std::filesystem::remove_all(dir);
      user_error("the " + runs[k].label + " run wrote no summary " + json + ": " + e.what());
    }
  }
  std::filesystem::remove_all(dir);
  if (status != 0) return status;
  std::printf("\n=== the same model, seed and batches in four precisions ===\n%s",
              side_by_side_table(runs, results).c_str());
  return 0;
}

}  // namespace llmp
