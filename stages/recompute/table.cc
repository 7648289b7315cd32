// Measures the recomputation table (see table.h).
#include "stages/recompute/table.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "common/nn/gpt.h"
#include "common/nn/unit_runner.h"
#include "common/plan/recompute_formulas.h"
#include "common/tensor/memory.h"
#include "kernels/cpu/flops.h"

namespace llmp {

RecomputeRun measure_recompute(int L, Recompute policy, int every, int B, int timed,
                               Device device, bool cpu_checkpoints) {
  GPTConfig cfg = GPTConfig::preset("tiny");
  cfg.layers = L;
  cfg.name = "tiny-L" + std::to_string(L);
  cfg.recompute = policy;
  cfg.recompute_every = every;
  cfg.cpu_checkpoints = cpu_checkpoints;
  const GPT model = GPT(cfg).with_device(device);
  const int T = cfg.ctx;
  const int64_t n = model.layout().num_params();
  // Initialised on the host, then copied to the device (a copy on the CPU).
  Tensor init = Tensor::empty({n}, DType::kF32, MemCategory::kOther);
  model.init_params(init.f32(), 1337);
  Tensor params = Tensor::empty({n}, DType::kF32, MemCategory::kParameters, device);
  params.copy_from(init);
  init = Tensor();
  Tensor grads = Tensor::zeros({n}, DType::kF32, MemCategory::kGradients, device);
  std::mt19937 rng(7);
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (auto* v : {&tok, &tgt})
    for (int32_t& x : *v) x = static_cast<int32_t>(rng() % cfg.vocab);

  RecomputeRun run{L, policy, every, cpu_checkpoints, device};
  MemoryTracker& mt = MemoryTracker::instance();
  RecomputeMeter& meter = RecomputeMeter::instance();
  const float scale = 1.0f / (static_cast<float>(B) * T);
  // A device runs the walk's kernels after the host has issued them: the clock stops when the
  // last of them has finished.
  auto walk = [&] {
    forward_backward(model, params.f32(), grads.f32(), tok.data(), tgt.data(), B, T, scale);
    wait_for_device(device);
  };
  const int64_t live = mt.current(device, MemCategory::kActivations);
  mt.reset_peak();
  meter.reset();
  const int64_t flops0 = cpu::flops_done();
  walk();
  run.walk_flops = cpu::flops_done() - flops0;
  run.peak_bytes = mt.peak(device, MemCategory::kActivations) - live;
  run.kept_per_block = meter.bytes_per_block();
  run.recomputed_flops = meter.recomputed_flops;
  run.checkpoint_bytes_down = meter.checkpoint_bytes_down;
  run.formula_flops = recomputed_flops_per_walk({B, T, cfg.d, cfg.heads, L}, policy);
  std::vector<double> ms;
  for (int i = 0; i < timed; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    walk();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count());
  }
  if (!ms.empty()) {
    std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
    run.ms = ms[ms.size() / 2];
  }
  return run;
}

std::vector<RecomputeRun> recompute_table(const std::vector<int>& layers, int B, int timed,
                                          Device device) {
  std::vector<RecomputeRun> runs;
  for (int L : layers) {
    const int k = std::max(1, static_cast<int>(std::lround(std::sqrt(L))));
    runs.push_back(measure_recompute(L, Recompute::kNone, 1, B, timed, device));
    runs.push_back(measure_recompute(L, Recompute::kFull, k, B, timed, device));
    runs.push_back(measure_recompute(L, Recompute::kFull, 1, B, timed, device));
    runs.push_back(measure_recompute(L, Recompute::kSelective, 1, B, timed, device));
    if (device != Device::kCPU)  // ZeRO-R's Pa+cpu: the checkpoints on the host
      runs.push_back(measure_recompute(L, Recompute::kFull, 1, B, timed, device, true));
  }
  return runs;
}

std::string recompute_markdown(const std::vector<RecomputeRun>& runs) {
  std::string out =
      "| L | policy | activation peak | of none | kept per block | recomputed FLOPs (formula) | "
      "step FLOPs | × none | ms per step | × none |\n|---|---|---|---|---|---|---|---|---|---|\n";
  const RecomputeRun* none = nullptr;
  char line[512];
  for (const RecomputeRun& r : runs) {
    if (r.policy == Recompute::kNone) none = &r;
    const std::string policy =
        r.policy == Recompute::kFull && r.every > 1
            ? "full, every " + std::to_string(r.every) + " (√L)"
            : std::string(to_string(r.policy)) + (r.cpu_checkpoints ? ", Pa+cpu" : "");
    const double of_none = none && none->L == r.L ? 100.0 * r.peak_bytes / none->peak_bytes : 0;
    const double slower = none && none->L == r.L && none->ms > 0 ? r.ms / none->ms : 0;
    const double more = none && none->L == r.L ? double(r.walk_flops) / none->walk_flops : 0;
    std::snprintf(line, sizeof line,
                  "| %d | %s | %s | %.0f%% | %s | %.2f M (%.2f M) | %.1f M | %.2f | %.2f | %.2f |\n",
                  r.L, policy.c_str(), format_bytes(static_cast<double>(r.peak_bytes)).c_str(),
                  of_none, format_bytes(r.kept_per_block).c_str(), r.recomputed_flops / 1e6,
                  r.formula_flops / 1e6, r.walk_flops / 1e6, more, r.ms, slower);
    out += line;
  }
  return out;
}

}  // namespace llmp
