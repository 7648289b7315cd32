// bazel run //stages/hybrid_3d:pp_zero_table  — pipeline parallelism with ZeRO-1 and with
// ZeRO-2 over the data-parallel group, side by side, measured (PP_ZERO2.md reads the result).
//
// 4 ranks in one job: dp 2 × pp 2 × tp 1, 1F1B, the mini model (--preset tiny for a quick look),
// B = 16 sequences of T = ctx tokens, m = 1, 4 and 8 micro-batches per replica, a few steps of
// each. Per pipeline stage (dp_rank 0's rank; the other replica's is the same), the last step's
//   dp bytes    CommStats of the dp group, next to the closed form (ZeRO-1: 2(dp-1)/dp·4Ψ_r;
//               ZeRO-2: zero2_grads.h's, and hybrid_formulas.h's in brackets)
//   dp calls    CommStats::calls of the dp group, next to 2 or m·U_r + [D_r>0] + 1 (and m + 1)
//   gradients   MemoryTracker's kGradients at the end of the step and at its peak during it
//   loss        the step's global training loss, the same under both (the same model trained)
// Flags: --preset tiny|mini (default mini), --steps N (default 3). Bad values: one line, exit 2.
//
// Glossary: dp/pp/tp the grid, m micro-batches, Ψ_r parameters of a stage's rank, D_r the
// deferred unit 0 / wte copy, U_r units reduce-scattered per micro-batch (zero2_grads.h).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/grid.h"
#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/runtime/check.h"
#include "common/runtime/flags.h"
#include "common/runtime/launch.h"
#include "common/runtime/options.h"
#include "stages/hybrid_3d/hybrid_3d.h"

namespace llmp {
namespace {

constexpr int kCols = 11;  // values per (stage, m, zero) row, see Row

/// One stage's last step: measured and closed forms.
struct Row {
  double dp, dp_form, dp_hf, calls, calls_form, calls_hf, grads, grads_form, peak, peak_form,
      loss;
};

/// The value of report row `what`'s closed form (0 when absent).
double formula_of(const std::vector<ReportRow>& rows, const std::string& what) {
  for (const ReportRow& r : rows)
    if (r.what == what) return r.formula;
  return 0;
}

Row run(const GPTConfig& cfg, ProcessGrid& grid, int zero, int m, int steps) {
  HybridOptions o;
  o.micro_batches = m, o.zero = zero;
  HybridStrategy s(cfg, grid, AdamWConfig{}, /*seed=*/7, o);
  const int B = 16, T = cfg.ctx;
  static const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  const BatchSlice sl = s.batch_slice(B);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  double loss = 0;
  for (int k = 1; k <= steps; ++k) {
    sample(corpus.train(), 3, k, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
    loss = s.train_step(tok.data(), tgt.data(), B, T, k);
  }
  const HybridMeasured g = s.last_measured();
  const HybridRankPlan e = s.expected();
  const std::vector<ReportRow> rows = s.report();
  if (zero == 1)  // the whole gradient buffer lives through the step: peak = current = 4Ψ_r
    return {g.dp, e.dp, e.dp, double(g.dp_calls), double(e.dp_calls), double(e.dp_calls),
            g.grads, e.grads, g.grads_peak, e.grads, loss};
  return {g.dp, formula_of(rows, "sent per step (dp group)"), e.dp, double(g.dp_calls),
          formula_of(rows, "dp calls per step (1 B = 1 call)"), double(e.dp_calls), g.grads,
          e.grads, g.grads_peak, formula_of(rows, "gradients, peak in step"), loss};
}

std::string kib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", bytes / 1024.0);
  return b;
}

int table_main(int argc, char** argv) {
  // The flags are read and checked before the launch (one line, exit 2, no ranks started);
  // launch_or_init then starts the 4 ranks with the same arguments.
  const AppPtr app = make_app("PP + ZeRO-1 vs PP + ZeRO-2, measured (dp 2 × pp 2 × tp 1, 4 ranks)");
  std::string preset = "mini";
  int steps = 3;
  add_option(*app, "--preset", preset, "model: tiny or mini");
  add_option(*app, "--steps", steps, "steps per configuration (the last is reported)");
  parse_flags_or_exit(*app, argc, argv);
  if (preset != "tiny" && preset != "mini") user_error("--preset " + preset + " must be tiny or mini");
  if (steps < 1) user_error("--steps " + std::to_string(steps) + " must be at least 1");
  launch_or_init(argc, argv, 4);
  const GPTConfig cfg = GPTConfig::preset(preset);
  std::shared_ptr<ProcessGroup> world = ProcessGroup::world();
  ProcessGrid grid(world, 2, 2, 1);
  std::shared_ptr<ProcessGroup> book = world->duplicate();  // gathers the rows to rank 0
  const int ms[] = {1, 4, 8};
  std::vector<double> mine;
  for (int m : ms)
    for (int zero : {1, 2}) {
      const Row r = run(cfg, grid, zero, m, steps);
      mine.insert(mine.end(), {r.dp, r.dp_form, r.dp_hf, r.calls, r.calls_form, r.calls_hf,
                               r.grads, r.grads_form, r.peak, r.peak_form, r.loss});
    }
  Tensor in = Tensor::empty({int64_t(mine.size())}, DType::kF64);
  for (size_t i = 0; i < mine.size(); ++i) in.f64()[i] = mine[i];
  Tensor all = Tensor::empty({int64_t(mine.size()) * world->size()}, DType::kF64);
  book->all_gather(in, all);
  if (world->rank() == 0) {
    std::printf("PP + ZeRO over dp: %s, dp 2 × pp 2 × tp 1, 1F1B, B = 16, T = %d, step %d of "
                "each; KiB unless a count; measured (closed form) [hybrid_formulas.h]\n\n",
                preset.c_str(), cfg.ctx, steps);
    std::printf("| stage | m | ZeRO | dp KiB/step | dp calls/step | grads KiB | grads peak KiB "
                "| loss |\n|---|---|---|---|---|---|---|---|\n");
    for (int stage = 0; stage < 2; ++stage) {  // world rank of (dp 0, stage, tp 0) = stage
      const double* v = all.f64() + stage * mine.size();
      for (size_t row = 0; row < mine.size() / kCols; ++row, v += kCols) {
        const int m = ms[row / 2], zero = 1 + int(row % 2);
        std::string hf_dp, hf_calls;
        if (zero == 2) hf_dp = " [" + kib(v[2]) + "]", hf_calls = " [" + std::to_string(int(v[5])) + "]";
        std::printf("| %d | %d | %d | %s (%s)%s | %d (%d)%s | %s (%s) | %s (%s) | %.6f |\n", stage,
                    m, zero, kib(v[0]).c_str(), kib(v[1]).c_str(), hf_dp.c_str(), int(v[3]),
                    int(v[4]), hf_calls.c_str(), kib(v[6]).c_str(), kib(v[7]).c_str(),
                    kib(v[8]).c_str(), kib(v[9]).c_str(), v[10]);
      }
    }
    bool ok = true;
    for (int r = 0; r < world->size(); ++r)
      for (size_t i = 0; i < mine.size(); i += kCols) {
        const double* v = all.f64() + r * mine.size() + i;
        ok = ok && v[0] == v[1] && v[3] == v[4] && v[6] == v[7] && v[8] == v[9];
      }
    std::printf("\nevery rank's measured values %s their closed forms\n",
                ok ? "equal" : "DIFFER FROM");
  }
  shutdown();
  return 0;
}

}  // namespace
}  // namespace llmp

int main(int argc, char** argv) { return llmp::table_main(argc, argv); }
