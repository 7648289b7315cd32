// hybrid_3d with --device cuda's placement on 4 ranks, without a GPU: every rank's slice of its
// stages, its gradients (or ZeRO-2's shard and unit gradients), AdamW's m and v shard and every
// activation and communication buffer on a guarded FakeDevice (common/testing/fake_device.h: a
// host read of device memory is a SIGSEGV) with the CPU kernels as the device's
// (fake_kernel_ops.h); the collectives get device tensors, which the MPI backend stages through
// host buffers (common/comm/process_group_staging.h). Each grid against the same strategy on the
// CPU over the same ranks (tiny, B = 4, 2 steps, eval, get_state, then set_state into a fresh
// strategy and get_state again): losses, eval loss and state bit for bit.
//
// Then every byte that crossed host <-> device, phase by phase, against what must cross (the
// FakeDevice's counts; "staged" = the strategy's groups' StagingStats, the collectives' part):
//   construction   up 4Ψ_r (the rank's initial parameters, once; bf16/fp16: + their 2Ψ_r
//                  rounded copy), nothing down
//   a step         up: the ids, tokens twice (embedding forward and backward) on the first stage
//                  and targets once on the last, 4·(B/dp)·T each, + staged; down: staged only
//   eval           up: tokens on the first stage, targets on the last, + staged; down: staged
//   get_state      down 3·4·Ψ_own,r (params, m, v of the owned segments; the wte copy is a
//                  replica) + staged: the dp group's gathers of m and v, 2·4c down, 2·4Ψ_r up
//   set_state      up 4Ψ_r (params) + 2·4c (this rank's m and v shard), nothing down; bf16/fp16:
//                  2Ψ_r (rounded on the host) + 3·4c (the master shard too), and get_state's
//                  dp gathers carry the master shards as a third state
// and the dp group's staging per step, as ZeRO must move it (c = this rank's shard count):
//   ZeRO-1  reduce_scatter_v(grads, shard): 4Ψ_r down, 4c up; in-place all_gather_v: p_b·c down,
//           p_b·Ψ_r up (p_b = 4; 2 in bf16/fp16, whose gradients stay fp32)
//   ZeRO-2  each micro-batch's units reduce-scattered: 4(m(Ψ_r - D_r) + D_r) down (D_r the
//           deferred wte gradient, summed over the pair first) + the all_gather's p_b·c (ZeRO-2's
//           up bytes, the reduce-scattered parts, are left to the step's totals)
// Device to device, per step: the replicated gradients' pack and unpack under sequence
// parallelism, 2·4Ψ_repl,r (ZeRO-2: on the shard, 2·4|Ψ_repl,r ∩ shard|), and nothing else: the
// cases keep b = B/(dp·m) = 1, where the sequence-parallel collectives need no permutation of
// (b, t, T/t·C) blocks (tp_device_test covers those), and without sequence parallelism nothing
// in a step copies device to device (at dp = 1 ZeRO-1 steps AdamW on the gradient itself: no
// reduce_scatter into a shard copy).
//
// Glossary: dp/pp/tp the grid, m micro-batches per replica, B global batch, T sequence, Ψ_r
// parameters held by this rank (wte copy included), c = ⌈Ψ_r/dp⌉'s valid part on this rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "stages/hybrid_3d/hybrid_3d.h"
#include "stages/hybrid_3d/hybrid_3d_test_util.h"
#include "stages/hybrid_3d/zero2_grads.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kSteps = 2, kB = 4;

struct Case {
  GridShape shape;
  int zero = 1;
  bool sp = false;
  int m = 2;
  TrainPrecision precision = TrainPrecision::kFP32;
};

/// Host <-> device bytes of one phase: the FakeDevice's counts and the staging's part.
struct Crossed {
  int64_t up = 0, down = 0, d2d = 0;
  StagingStats staged, dp_staged;
};

struct Run {
  std::vector<double> losses;
  double eval = 0;
  std::vector<float> state, reloaded;
  Crossed init, steps, eval_x, get, set;
};

/// Counts of `dev` (null: zero) and of `s`'s groups, to diff phases.
struct Probe {
  const testing::FakeDevice* dev;
  const HybridStrategy* s;
  Crossed now() const {
    Crossed c;
    if (dev) c.up = dev->h2d_bytes(), c.down = dev->d2h_bytes(), c.d2d = dev->d2d_bytes();
    if (s) c.staged = s->staging_stats(), c.dp_staged = s->grid().dp_group().staging_stats();
    return c;
  }
};

/// The replicated elements (ParamSpec::split kReplicated: wpe, LayerNorms, row-parallel biases)
/// of rank r's local buffer that fall in [begin, begin + count): what the SP pack moves.
int64_t replicated_in(const GPTLayout& lay, const GPTPartition& part, int r, int64_t begin,
                      int64_t count) {
  int64_t n = 0;
  for (const ParamSegment& seg : part.segments(r)) {
    if (seg.wte_copy) continue;
    for (const ParamSpec& p : lay.params()) {
      if (p.split != Split::kReplicated) continue;
      // [p.offset, p.offset + numel) in the slice's layout -> the local buffer -> the shard
      const int64_t shift = seg.local_offset - seg.global_offset;
      const int64_t a = std::max(p.offset, seg.global_offset) + shift;
      const int64_t b = std::min(p.offset + p.numel, seg.global_offset + seg.numel) + shift;
      n += std::max<int64_t>(0, std::min(b, begin + count) - std::max(a, begin));
    }
  }
  return n;
}

Crossed minus(const Crossed& a, const Crossed& b) {
  Crossed d;
  d.up = a.up - b.up, d.down = a.down - b.down, d.d2d = a.d2d - b.d2d;
  d.staged.to_host_bytes = a.staged.to_host_bytes - b.staged.to_host_bytes;
  d.staged.to_device_bytes = a.staged.to_device_bytes - b.staged.to_device_bytes;
  d.dp_staged.to_host_bytes = a.dp_staged.to_host_bytes - b.dp_staged.to_host_bytes;
  d.dp_staged.to_device_bytes = a.dp_staged.to_device_bytes - b.dp_staged.to_device_bytes;
  return d;
}

std::unique_ptr<HybridStrategy> make(const Case& k, Device device, uint64_t seed) {
  HybridOptions o;
  o.micro_batches = k.m, o.sequence_parallel = k.sp, o.zero = k.zero, o.device = device;
  o.mp.precision = k.precision;
  AdamWConfig opt;
  opt.lr = 3e-3f;
  opt.weight_decay = 0.1f;
  return std::make_unique<HybridStrategy>(GPTConfig::preset("tiny"), hybrid_test_grid(k.shape),
                                          opt, seed, o);
}

Run train(const Case& k, Device device, const testing::FakeDevice* dev) {
  const GPTConfig cfg = GPTConfig::preset("tiny");
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", cfg.ctx);
  const int T = cfg.ctx;
  const int64_t psi = GPT(cfg).layout().num_params();
  Run r;
  Crossed c0 = Probe{dev, nullptr}.now();
  std::unique_ptr<HybridStrategy> s = make(k, device, 11);
  const Probe p{dev, s.get()};
  r.init = minus(p.now(), c0);
  r.init.staged = {}, r.init.dp_staged = {};  // no baseline before the groups existed
  const BatchSlice slice = s->batch_slice(kB);
  std::vector<int32_t> tok(slice.num_seqs * T), tgt(slice.num_seqs * T);
  c0 = p.now();
  for (int t = 1; t <= kSteps; ++t) {
    sample(corpus.train(), 42, t, slice.first_seq, slice.num_seqs, T, tok.data(), tgt.data());
    r.losses.push_back(s->train_step(tok.data(), tgt.data(), kB, T, t));
  }
  r.steps = minus(p.now(), c0);
  c0 = p.now();
  r.eval = s->eval_loss(tok.data(), tgt.data(), kB, T);
  r.eval_x = minus(p.now(), c0);
  r.state.resize(3 * psi);
  c0 = p.now();
  s->get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  r.get = minus(p.now(), c0);
  std::unique_ptr<HybridStrategy> fresh = make(k, device, 12);  // another init
  const Probe q{dev, fresh.get()};
  c0 = q.now();
  fresh->set_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  r.set = minus(q.now(), c0);
  r.reloaded.resize(3 * psi);
  fresh->get_state(r.reloaded.data(), r.reloaded.data() + psi, r.reloaded.data() + 2 * psi);
  return r;
}

void expect_device_run_equals_cpu(const Case& k) {
  const Run cpu = train(k, Device::kCPU, nullptr);
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const Run gpu = train(k, Device::kCUDA, &dev);

  EXPECT_EQ(gpu.losses, cpu.losses);
  EXPECT_EQ(gpu.eval, cpu.eval);
  EXPECT_EQ(gpu.state, cpu.state);
  EXPECT_EQ(gpu.reloaded, cpu.state) << "set_state then get_state on the device";
  EXPECT_EQ(cpu.reloaded, cpu.state);
  EXPECT_EQ(cpu.steps.staged.to_host_bytes + cpu.steps.staged.to_device_bytes, 0)
      << "host tensors are never staged";

  // This rank's place and sizes, from a CPU strategy (nothing on the device).
  const std::unique_ptr<HybridStrategy> probe = make(k, Device::kCPU, 1);
  ProcessGrid& grid = probe->grid();
  const GPTPartition& part = probe->partition();
  const int r = grid.pp_rank(), d = grid.dp_rank(), T = GPTConfig::preset("tiny").ctx;
  const int64_t psi_r = part.local_numel(r);
  int64_t owned = 0;
  for (const ParamSegment& seg : part.segments(r)) owned += seg.wte_copy ? 0 : seg.numel;
  const int64_t c = ShardLayout(psi_r, grid.dp()).count[d];
  const bool first = r == 0, last = r == grid.pp() - 1;
  const int64_t ids = int64_t{4} * (kB / grid.dp()) * T;  // this replica's B/dp sequences
  // Mixed precision: 2-byte parameters (p_b), and the fp32 master shard a third shard state
  // beside m and v (the gradients stay fp32).
  const bool mixed = is_mixed(k.precision);
  const int64_t pb = mixed ? 2 : 4, shard_states = mixed ? 3 : 2;

  // The initial parameters, once: fp32 (mixed: into the master copy, then rounded, 2Ψ_r more).
  EXPECT_EQ(gpu.init.up, 4 * psi_r + (mixed ? 2 * psi_r : 0));
  EXPECT_EQ(gpu.init.down, 0);
  EXPECT_EQ(gpu.steps.up,
            kSteps * ((first ? 2 * ids : 0) + (last ? ids : 0)) + gpu.steps.staged.to_device_bytes)
      << "ids and staging only, rank " << test_world().rank();
  EXPECT_EQ(gpu.steps.down, gpu.steps.staged.to_host_bytes) << "staging only";
  EXPECT_EQ(gpu.eval_x.up, (first ? ids : 0) + (last ? ids : 0) +
                               gpu.eval_x.staged.to_device_bytes);
  EXPECT_EQ(gpu.eval_x.down, gpu.eval_x.staged.to_host_bytes);
  EXPECT_EQ(gpu.get.down, 3 * 4 * owned + gpu.get.staged.to_host_bytes);
  EXPECT_EQ(gpu.get.up, gpu.get.staged.to_device_bytes);
  EXPECT_EQ(gpu.get.dp_staged.to_host_bytes, grid.dp() > 1 ? shard_states * 4 * c : 0)
      << "m, v (and the master) shards";
  EXPECT_EQ(gpu.get.dp_staged.to_device_bytes, grid.dp() > 1 ? shard_states * 4 * psi_r : 0);
  EXPECT_EQ(gpu.set.up, pb * psi_r + shard_states * 4 * c)
      << "params, this rank's m and v (and master) shard";
  EXPECT_EQ(gpu.set.down, 0);

  // ZeRO over dp, per step.
  if (grid.dp() > 1) {
    int64_t down = 4 * psi_r;  // ZeRO-1: the whole gradient into the reduce_scatter
    if (k.zero == 2) {
      const bool defer = grid.pp() > 1 && (first || last);  // the tied wte's two copies
      const PipelineZero2Plan z =
          pipeline_zero2_plan(probe->tp_model().layout(), part, r, grid.dp(), k.m, defer);
      down = 4 * (k.m * (psi_r - z.deferred) + z.deferred);
    }
    // fp32 gradients down in every precision; the all_gather's p_b·c.
    EXPECT_EQ(gpu.steps.dp_staged.to_host_bytes, kSteps * (down + pb * c));
    if (k.zero == 1) {
      EXPECT_EQ(gpu.steps.dp_staged.to_device_bytes, kSteps * (4 * c + pb * psi_r));
    }
  }

  // Device to device: the SP pack (on ZeRO-2's shard: its valid part), nothing else.
  const GPTLayout& lay = probe->tp_model().layout();
  const int64_t begin = k.zero == 2 ? ShardLayout(psi_r, grid.dp()).begin[d] : 0;
  const int64_t repl = replicated_in(lay, part, r, begin, k.zero == 2 ? c : psi_r);
  EXPECT_EQ(gpu.steps.d2d, kSteps * (k.sp ? 2 * 4 * repl : 0))
      << "rank " << test_world().rank() << ": the replicated gradients' pack and unpack only";
  if (k.sp && k.zero == 1 && grid.pp() == 2) {  // worked by hand for tiny (T 16, C 32, L 2)
    const int64_t C = 32;
    EXPECT_EQ(repl, first ? 16 * C + 6 * C : 6 * C + 2 * C)
        << "wpe and block 0's LayerNorms and row-parallel biases; block 1's and ln_f";
  }
}

TEST(Hybrid3dOnDevice, ZeRO1At221) { expect_device_run_equals_cpu({{2, 2, 1}, 1, false, 2}); }

TEST(Hybrid3dOnDevice, ZeRO2At221) { expect_device_run_equals_cpu({{2, 2, 1}, 2, false, 2}); }

TEST(Hybrid3dOnDevice, ZeRO2At212WithSequenceParallelism) {
  expect_device_run_equals_cpu({{2, 1, 2}, 2, true, 2});
}

TEST(Hybrid3dOnDevice, ZeRO1At122WithSequenceParallelism) {
  expect_device_run_equals_cpu({{1, 2, 2}, 1, true, 4});  // b = 1
}

// --precision bf16: 16-bit parameters and messages, fp32 gradients, the master shard on the
// device; fp16: the loss scale and the overflow check there too.
TEST(Hybrid3dOnDevice, ZeRO1At221InBf16) {
  expect_device_run_equals_cpu({{2, 2, 1}, 1, false, 2, TrainPrecision::kBF16});
}

TEST(Hybrid3dOnDevice, ZeRO2At212WithSequenceParallelismInBf16) {
  expect_device_run_equals_cpu({{2, 1, 2}, 2, true, 2, TrainPrecision::kBF16});
}

TEST(Hybrid3dOnDevice, ZeRO1At122WithSequenceParallelismInFp16) {
  expect_device_run_equals_cpu({{1, 2, 2}, 1, true, 4, TrainPrecision::kFP16});
}

}  // namespace
}  // namespace llmp
