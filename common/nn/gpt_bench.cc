// Benchmark: milliseconds per forward_backward (unit_runner.h) on one CPU core, and where they go.
//
//   bazel run //common/nn:gpt_bench                 # mini, B=8 T=64, 50 timed steps
//   bazel run //common/nn:gpt_bench -- tiny 4 16 200   # preset B T steps
//
// FLOPs per step ≈ 6·Ψ_mm·B·T: 2 per weight and token forward, 4 backward (Kaplan et al. 2020),
// where Ψ_mm = L·12C² + V·C counts the weights that multiply activations (blocks, tied head);
// attention's own T² products add ~5% for mini. Wall time on a shared machine includes time the
// thread spent descheduled, so the CPU time of the thread is printed next to it (and the minimum).
//
// Glossary: B batch, T sequence, Ψ parameters, L layers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/nn/unit_runner.h"
#include "common/nn/init.h"

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
/// CPU time of this thread in ms (excludes time spent descheduled).
double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string preset = argc > 1 ? argv[1] : "mini";
  const llmp::GPT m(llmp::GPTConfig::preset(preset));
  const llmp::GPTConfig& c = m.config();
  const int B = argc > 2 ? std::atoi(argv[2]) : 8;
  const int T = argc > 3 ? std::atoi(argv[3]) : c.ctx;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 50;
  const llmp::GPTLayout& lay = m.layout();

  std::vector<float> params(lay.num_params()), grads(lay.num_params(), 0.f);
  m.init_params(params.data(), 1);
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int i = 0; i < B * T; ++i) {
    tok[i] = static_cast<int32_t>(llmp::uniform_at(2, i) * c.vocab) % c.vocab;
    tgt[i] = static_cast<int32_t>(llmp::uniform_at(3, i) * c.vocab) % c.vocab;
  }
  const float scale = 1.0f / (B * T);
  for (int i = 0; i < 3; ++i)  // warm-up: caches, page faults, allocator
    llmp::forward_backward(m, params.data(), grads.data(), tok.data(), tgt.data(), B, T, scale);

  std::vector<double> ms, cpu;
  double loss = 0;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    const double c0 = thread_cpu_ms();
    loss = llmp::forward_backward(m, params.data(), grads.data(), tok.data(), tgt.data(), B, T, scale);
    cpu.push_back(thread_cpu_ms() - c0);
    ms.push_back(ms_since(t0));
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu.begin(), cpu.end());
  const double med = ms[ms.size() / 2], cpu_med = cpu[cpu.size() / 2];
  // Weights that a token multiplies: every block's matrices and the tied head (V·C).
  const double psi_mm = c.layers * 12.0 * c.d * c.d + double(c.vocab) * c.d;
  const double gflop = 6.0 * psi_mm * B * T / 1e9;
  std::printf(
      "%s (Ψ=%lld) B=%d T=%d, %d steps: %.2f ms/step wall (median; min %.2f), "
      "%.2f ms/step thread CPU time (median)\n",
      preset.c_str(), static_cast<long long>(lay.num_params()), B, T, steps, med, ms[0], cpu_med);
  std::printf("%.0f tokens/s, %.1f GFLOP/s on the matmuls (at the CPU-time median), loss %.4f\n",
              B * T / (cpu_med / 1e3), gflop / (cpu_med / 1e3), loss);

  // Breakdown with the unit functions (same work as forward_backward, timed piece by piece).
  const int L = c.layers;
  auto P = [&](int u) { return params.data() + lay.unit_offset(u); };
  auto G = [&](int u) { return grads.data() + lay.unit_offset(u); };
  double t_emb = 0, t_fwd = 0, t_head = 0, t_bwd = 0;  // thread CPU ms
  for (int i = 0; i < steps; ++i) {
    std::vector<llmp::Tensor> xs;
    std::vector<llmp::BlockCache> caches(L);
    double t0 = thread_cpu_ms(), t1;
    xs.push_back(m.embed_forward(P(0), tok.data(), B, T));
    t1 = thread_cpu_ms(), t_emb += t1 - t0, t0 = t1;
    for (int l = 0; l < L; ++l) xs.push_back(m.block_forward(l, P(1 + l), xs[l], B, T, &caches[l]));
    t1 = thread_cpu_ms(), t_fwd += t1 - t0, t0 = t1;
    llmp::Tensor dx;
    m.head_forward_backward(P(L + 1), P(0), xs[L], tgt.data(), B, T, scale, &dx, G(L + 1), G(0));
    t1 = thread_cpu_ms(), t_head += t1 - t0, t0 = t1;
    for (int l = L - 1; l >= 0; --l) dx = m.block_backward(l, P(1 + l), xs[l], &caches[l], dx, G(1 + l));
    t1 = thread_cpu_ms(), t_bwd += t1 - t0, t0 = t1;
    m.embed_backward(tok.data(), B, T, dx, G(0));
    t_emb += thread_cpu_ms() - t0;
  }
  std::printf(
      "CPU time per step: blocks forward %.2f ms, head fwd+bwd %.2f ms, blocks backward "
      "%.2f ms, embeddings %.2f ms\n",
      t_fwd / steps, t_head / steps, t_bwd / steps, t_emb / steps);
  return 0;
}
