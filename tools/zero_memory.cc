// zero_memory: the ZeRO paper's Table 1 for a model of any size.
//
//   bazel run //tools:zero_memory -- --params 7.5e9 --ranks 64
//   bazel run //tools:zero_memory -- --params 124e6 --ranks 8 --precision fp32
//
// Prints the per-device model-state memory of the baseline, P_os (ZeRO-1), P_os+g (ZeRO-2) and
// P_os+g+p (ZeRO-3) at N_d = --ranks, then the table over N_d = 1, 4, 16, 64, 256, 1024.
// Rajbhandari et al. 2020, §5 and Table 1; the formulas live in common/plan/memory_planner.h.
//
// Flags: --params Ψ (> 0), --ranks N_d (≥ 1), --k optimizer bytes per parameter (default 12 for
// mixed precision, 8 for fp32), --precision mixed|fp32 (2- or 4-byte parameters and gradients).
// Bad input prints one line "error: ..." and exits 2.
//
// Glossary: Ψ parameters, N_d data-parallel degree, K optimizer-state bytes per parameter.
#include <cstdio>
#include <string>

#include "common/plan/memory_planner.h"
#include "common/runtime/flags.h"
#include "common/runtime/options.h"
#include "tools/zero_memory_table.h"

int main(int argc, char** argv) {
  double params = 7.5e9, k = 12;
  int ranks = 64;
  std::string precision = "mixed";
  const llmp::AppPtr app =
      llmp::make_app("Per-device model-state memory of ZeRO stages (the ZeRO paper's Table 1)");
  llmp::add_option(*app, "--params", params, "Ψ, number of parameters (e.g. 7.5e9)");
  llmp::add_option(*app, "--ranks", ranks, "N_d, data-parallel degree to highlight");
  const CLI::Option* k_opt = llmp::add_option_no_default(
      *app, "--k", k, "K, optimizer-state bytes per parameter (default 12 mixed, 8 fp32)");
  llmp::add_option(*app, "--precision", precision, "mixed (2-byte params/grads) or fp32 (4-byte)",
                   llmp::one_of({"mixed", "fp32"}));
  llmp::parse_flags_or_exit(*app, argc, argv);  // --help: exit 0; a bad flag: one line, exit 2
  if (precision == "fp32" && !llmp::given(k_opt)) k = 8;  // fp32 Adam: m and v only
  const std::string err = llmp::zero_memory_arg_error(params, ranks, k);
  if (!err.empty()) {
    std::fprintf(stderr, "error: %s\n", err.c_str());
    return 2;
  }
  llmp::Precision prec = precision == "fp32" ? llmp::Precision::fp32()
                                             : llmp::Precision::mixed_adam();
  prec.K = k;
  std::printf("%s", llmp::render(llmp::zero_memory_table(params, ranks, prec)).c_str());
  return 0;
}
