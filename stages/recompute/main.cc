// bazel run //stages/recompute:train  — the activation-memory table of recomputation, measured on
// one rank: L = 4, 9 and 16 blocks of the tiny widths with --recompute none, full every √L, full
// and selective (table.h). Training any stage with recomputation is a flag of that stage:
//   bazel run //stages/zero2:train -- --recompute full --recompute_every 2
#include <CLI/CLI.hpp>

#include <cstdio>
#include <vector>

#include "common/runtime/flags.h"
#include "stages/recompute/table.h"

int main(int argc, char** argv) {
  int batch = 16, timed = 5;
  std::vector<int> layers = {4, 9, 16};
  CLI::App app{"recompute: activation peak, bytes kept per block, recomputed FLOPs and step time "
               "of --recompute none, full every √L, full and selective, for L = 4, 9, 16"};
  app.add_option("--batch", batch, "sequences per walk (B)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--timed", timed, "timed walks per row (the median is printed)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--layers", layers, "the L of the rows")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  llmp::parse_flags_or_exit(app, argc, argv);
  std::printf("tiny widths (C = 32, H = 2, T = 16), B = %d, one rank; times are the median of %d "
              "walks (forward + backward)\n\n%s",
              batch, timed, llmp::recompute_markdown(llmp::recompute_table(layers, batch, timed)).c_str());
  return 0;
}
