// load_balance: the attention work of each rank under ring attention's two causal splits,
// MEASURED with the FLOP counter (kernels/cpu/flops.h), side by side.
//
//   bazel run //stages/ring_attention:load_balance
//   bazel run //stages/ring_attention:load_balance -- --world_size=4 --ctx=2048 --batch=1
//       --heads=2 --head_size=16        (one command line)
//
// Each rank runs one forward and one backward of RingAttention (common/cp/ring_attention.h) on
// random q|k|v of its positions, once with the contiguous split (rank i holds chunks 2i, 2i + 1)
// and once with the balanced one (chunks i and 2p − 1 − i, Megatron-Core's context parallelism),
// reads the counter around each forward, and rank 0 prints the gathered counts as a markdown
// table with max/mean per split (1 = every rank does the same work). The closed forms are
// 4·B·c²·A·(4i + 3) and 4·B·c²·A·(2p + 1) (stages/ring_attention/README.md).
//
// Glossary: p = world_size ranks, T = ctx positions, c = T/(2p) chunk, B batch, H heads,
// hs head size, A = H·hs channels.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/cp/ring_attention.h"
#include "common/runtime/check.h"
#include "common/runtime/flags.h"
#include "common/runtime/launch.h"
#include "common/runtime/options.h"
#include "kernels/cpu/flops.h"

namespace llmp {
namespace {

/// This rank's measured forward FLOPs of one forward + backward of `core` on random data.
double measure(RingAttention& core, int B, int T, int H, int hs, unsigned seed) {
  const int Tl = T / core.shards(), A = H * hs;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tensor qkv = Tensor::empty({B, Tl, 3 * A}, DType::kF32, MemCategory::kActivations);
  Tensor dout = Tensor::empty({B, Tl, A}, DType::kF32, MemCategory::kActivations);
  for (int64_t e = 0; e < qkv.numel(); ++e) qkv.f32()[e] = u(gen);
  for (int64_t e = 0; e < dout.numel(); ++e) dout.f32()[e] = u(gen);
  Tensor out = Tensor::empty({B, Tl, A}, DType::kF32, MemCategory::kActivations);
  Tensor dqkv = Tensor::empty({B, Tl, 3 * A}, DType::kF32, MemCategory::kActivations);
  AttentionKeep keep;
  const int64_t before = cpu::flops_done();
  core.forward(qkv, out, B, T, H, &keep);
  const double forward = static_cast<double>(cpu::flops_done() - before);
  core.backward(dout, qkv, out, &keep, dqkv, B, T, H);
  return forward;
}

double max_over_mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return *std::max_element(v.begin(), v.end()) / (sum / v.size());
}

}  // namespace
}  // namespace llmp

int main(int argc, char** argv) {
  using namespace llmp;
  int world_size = 4, ctx = 2048, batch = 1, heads = 2, head_size = 16;
  const AppPtr app = make_app("load_balance: per-rank forward attention FLOPs of ring attention "
                               "with the contiguous and the balanced causal split, measured");
  add_option(*app, "--world_size", world_size, "p: ranks the sequence is split over",
             in_range(1, 64));
  add_option(*app, "--ctx", ctx, "T: positions per sequence (2p must divide it)",
             in_range(2, 1 << 20));
  add_option(*app, "--batch", batch, "B: sequences", in_range(1, 4096));
  add_option(*app, "--heads", heads, "H: attention heads", in_range(1, 256));
  add_option(*app, "--head_size", head_size, "hs: channels per head", in_range(1, 1024));
  parse_flags_or_exit(*app, argc, argv);
  if (ctx % (2 * world_size) != 0)
    user_error("ring attention: T=" + std::to_string(ctx) + " is not divisible by 2p=" +
               std::to_string(2 * world_size) + " (chunks of the causal split)");

  launch_or_init(argc, argv, world_size);
  {
    auto world = ProcessGroup::world();
    auto ring = world->duplicate();  // the core's traffic, apart from the gather below
    const int p = world->size(), r = world->rank();
    std::vector<double> flops[2];  // [0] contiguous, [1] balanced; index = rank
    const RingAttention::Split splits[2] = {RingAttention::Split::kContiguous,
                                            RingAttention::Split::kBalanced};
    for (int k = 0; k < 2; ++k) {
      RingAttention core(*ring, splits[k]);
      Tensor mine = Tensor::empty({1}, DType::kF64), all = Tensor::empty({p}, DType::kF64);
      mine.f64()[0] = measure(core, batch, ctx, heads, head_size, 1234u + r);
      world->all_gather(mine, all);
      flops[k].assign(all.f64(), all.f64() + p);
    }
    if (r == 0) {
      std::printf("ring attention, p = %d, T = %d, B = %d, H = %d, hs = %d: forward attention "
                  "FLOPs per rank, measured (kernels/cpu/flops.h)\n\n",
                  p, ctx, batch, heads, head_size);
      std::printf("| rank | contiguous forward FLOPs | balanced forward FLOPs |\n|---|---|---|\n");
      for (int i = 0; i < p; ++i)
        std::printf("| %d | %.0f | %.0f |\n", i, flops[0][i], flops[1][i]);
      std::printf("| max/mean | %.3f | %.3f |\n", max_over_mean(flops[0]), max_over_mean(flops[1]));
    }
  }
  shutdown();
  return 0;
}
