// bazel run //stages/recompute:train  — the activation-memory table of recomputation, measured on
// one rank: L = 4, 9 and 16 blocks of the tiny widths with --recompute none, full every √L, full
// and selective (table.h); with --device cuda on the GPU, its device bytes, and ZeRO-R's Pa+cpu
// as one more row. Training any stage with recomputation is a flag of that stage:
//   bazel run //stages/zero2:train -- --recompute full --recompute_every 2
#include <cstdio>
#include <string>
#include <vector>

#include "common/runtime/check.h"
#include "common/runtime/flags.h"
#include "common/runtime/options.h"
#include "kernels/ops/kernel_ops.h"
#include "stages/recompute/table.h"

int main(int argc, char** argv) {
  int batch = 16, timed = 5;
  std::string device = "cpu";
  std::vector<int> layers = {4, 9, 16};
  const llmp::AppPtr app =
      llmp::make_app("recompute: activation peak, bytes kept per block, recomputed FLOPs and step "
                     "time of --recompute none, full every √L, full and selective, for L = 4, 9, 16");
  llmp::add_option(*app, "--batch", batch, "sequences per walk (B)", llmp::in_range(1, 4096));
  llmp::add_option(*app, "--timed", timed, "timed walks per row (the median is printed)",
                   llmp::in_range(1, 1000));
  llmp::add_option(*app, "--layers", layers, "the L of the rows", llmp::in_range(1, 256));
  llmp::add_option(*app, "--device", device,
                   "where the walks run: cpu, or cuda (the peaks are then the GPU's bytes; one "
                   "more row: full with Pa+cpu)",
                   llmp::one_of({"cpu", "cuda"}));
  llmp::parse_flags_or_exit(*app, argc, argv);
  const llmp::Device d = device == "cuda" ? llmp::Device::kCUDA : llmp::Device::kCPU;
  if (const std::string why = llmp::device_unavailable_reason(d); !why.empty())
    llmp::user_error("--device " + device + ": " + why);
  const std::string table = llmp::recompute_markdown(llmp::recompute_table(layers, batch, timed, d));
  std::printf("tiny widths (C = 32, H = 2, T = 16), B = %d, one rank on %s; times are the median "
              "of %d walks (forward + backward)\n\n%s",
              batch, device.c_str(), timed, table.c_str());
  return 0;
}
