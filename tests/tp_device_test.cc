// Tensor and sequence parallelism with --device cuda's placement, at t = 2 ranks, without a GPU:
// TensorParallelStrategy with Device::kCUDA on a guarded FakeDevice (common/testing/
// fake_device.h: a host read of device memory is a SIGSEGV) with the CPU kernels as the device's
// (fake_kernel_ops.h), against the same strategy on the CPU over the same ranks (tiny, B = 4,
// 3 steps, then get_state): losses and final state bit for bit, the same CommStats bytes. The
// state then goes through set_state into a second strategy and back out (a resume), unchanged.
//
// Then every byte that crossed between host and device, against what must cross. S = 4BTC
// bytes of a whole (B,T,C) activation, N = B·T rows, t ranks, L layers:
//   up, once:     the slice's initial parameters, 4Ψ_r (tp_formulas.h's Ψ_r), per strategy (2)
//   up, a step:   the ids: tokens twice (embedding forward and backward), targets once, 3·4N
//   down, at end: get_state's parameters, m and v slices, 3·4Ψ_r (gathered on the host), twice
//   up, resume:   set_state's parameters, m and v slices, 3·4Ψ_r (cut on the host)
//   staging (the MPI backend copies a device tensor down before a collective and what it wrote
//   back up after, process_group_staging.h), per step and direction:
//     tensor parallelism: 4L+2 all_reduces of S (g after each row-parallel layer and the
//       embedding, f's backward before each column-parallel layer and the head), and the head's
//       all_reduces of the row maxima (4N) and of Σexp and the target logit (8N):
//       (4L+2)·S + 12N down and up;
//     sequence parallelism: each of those all_reduces becomes an all_gather (S/t down, S up) and a
//       reduce_scatter (S down, S/t up): (4L+2)·(S + S/t) + 12N each way on the tp group; the
//       re-gather of the 2L LayerNorm outputs for the weight gradients (2L·S/t down, 2L·S up) on
//       its own group; and the replicated gradients' all_reduce, 4Ψ_repl down and up.
//     tensor parallelism with full recomputation and ZeRO-R Pa (--partition_activations, one
//       block per segment): the recomputed forwards' 2L g's again, (4L+2+2L)·S + 12N each way on
//       the tp group; the all_gather of each block's partitioned input before its recomputation,
//       L·S/t down and L·S up on Pa's group. With Pa+cpu (--cpu_checkpointing) each of the L
//       parts is also copied to the host after its forward and back before its recomputation:
//       L·S/t down and L·S/t up, plain copies (no staging).
// Device to device, per step: nothing under tensor parallelism (Pa: the L parts kept, S/t each); under sequence parallelism each
// of the 6L+2 all_gathers (4L+2 and the 2L re-gathers) permutes its rank-major result into
// (B,T,C) and each of the 4L+2 reduce_scatters its (B,T,C) input into rank-major order (S bytes
// each, B > 1), and the replicated gradients are packed and unpacked (2·4Ψ_repl).
// Nothing else: a buffer a mapping or the strategy leaves on the host shows up here (or as a
// SIGSEGV, or as a kernel's "not device memory").
//
// Under --precision bf16 (TP and SP): every activation message is 2 bytes an element (S = 2BTC),
// the head's 12N stays fp32, the replicated gradients are 16-bit (2Ψ_repl); each strategy's
// parameters go up as the fp32 master copy and the 16-bit slice rounded on the host (4Ψ_r +
// 2Ψ_r, at init and again at set_state), get_state brings the master copy down.
//
// Glossary: t tensor-parallel ranks, B global batch, T sequence, C channels, L layers, N = B·T,
// S = 4BTC (2BTC in bf16), Ψ_r parameters per rank, Ψ_repl replicated parameters.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/plan/tp_formulas.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "common/tp/tp_strategy.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kSteps = 3;
constexpr int kBatch = 4;  // B > 1: the sequence collectives permute (B, t, T/t·C) blocks

struct Result {
  std::vector<double> losses;
  std::vector<float> state;    // params, m, v: the whole model's (get_state)
  std::vector<float> resumed;  // the same through set_state into a fresh strategy, then get_state
  // CommStats, summed over the steps
  double tp_bytes = 0, regather_bytes = 0, grad_sync_bytes = 0, checkpoint_bytes = 0;
};

Result train(const GPTConfig& cfg, ProcessGroup& tp, bool sp, Device device,
             TrainPrecision precision) {
  MixedPrecisionConfig mp;
  mp.precision = precision;
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", cfg.ctx);
  const int T = cfg.ctx;
  AdamWConfig opt;
  opt.lr = 3e-3f;
  opt.weight_decay = 0.1f;
  TensorParallelStrategy s(cfg, tp, opt, 11, sp, device, mp);
  std::vector<int32_t> tok(kBatch * T), tgt(kBatch * T);
  Result r;
  for (int k = 1; k <= kSteps; ++k) {
    sample(corpus.train(), 42, k, 0, kBatch, T, tok.data(), tgt.data());
    r.losses.push_back(s.train_step(tok.data(), tgt.data(), kBatch, T, k));
    r.tp_bytes += s.last_step_tp_bytes();
    r.regather_bytes += s.last_step_regather_bytes();
    r.grad_sync_bytes += s.last_step_grad_sync_bytes();
    r.checkpoint_bytes += s.last_step_checkpoint_bytes();
  }
  const int64_t psi = GPTLayout(cfg).num_params();
  r.state.resize(3 * psi);
  s.get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  TensorParallelStrategy resumed(cfg, tp, opt, 12, sp, device, mp);
  resumed.set_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  r.resumed.resize(3 * psi);
  resumed.get_state(r.resumed.data(), r.resumed.data() + psi, r.resumed.data() + 2 * psi);
  return r;
}

// Staging bytes of one step, each direction, on each group (the header's table).
struct Staging {
  int64_t tp_down = 0, tp_up = 0;
  int64_t other_down = 0, other_up = 0;  // SP's re-gather and gradients, or Pa's all_gathers
  int64_t d2d = 0;  // device-to-device copies (the header's table)
  int64_t offloaded = 0;  // Pa+cpu: the parts copied to the host and back (not staging)
};

/// `e`: bytes per activation and gradient element (4, or 2 under bf16).
Staging staging_per_step(const GPTConfig& c, int t, bool sp, int64_t e) {
  const int64_t N = int64_t{kBatch} * c.ctx, S = e * N * c.d, L = c.layers;
  const TpModelDims d{c.vocab, c.ctx, c.layers, c.d, c.heads};
  const int64_t repl = static_cast<int64_t>(tp_replicated_params(d));
  Staging st;
  if (!sp && c.partition_checkpoints) {  // full recomputation, k = 1
    st.tp_down = st.tp_up = (4 * L + 2 + 2 * L) * S + 12 * N;
    st.other_down = L * S / t;
    st.other_up = L * S;
    st.d2d = L * S / t;
    if (c.cpu_checkpoints) st.offloaded = L * S / t;  // each part down after its forward, up before
    return st;
  }
  if (!sp) {
    st.tp_down = st.tp_up = (4 * L + 2) * S + 12 * N;
    return st;
  }
  st.tp_down = st.tp_up = (4 * L + 2) * (S + S / t) + 12 * N;
  st.other_down = 2 * L * S / t + e * repl;
  st.other_up = 2 * L * S + e * repl;
  st.d2d = ((6 * L + 2) + (4 * L + 2)) * S + 2 * e * repl;
  return st;
}

void expect_device_run_equals_cpu(const GPTConfig& cfg, bool sp,
                                  TrainPrecision precision = TrainPrecision::kFP32) {
  auto cpu_group = test_world().duplicate();
  const Result cpu = train(cfg, *cpu_group, sp, Device::kCPU, precision);

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  auto dev_group = test_world().duplicate();
  const Result gpu = train(cfg, *dev_group, sp, Device::kCUDA, precision);

  EXPECT_EQ(gpu.losses, cpu.losses);
  EXPECT_EQ(gpu.state, cpu.state);
  EXPECT_EQ(gpu.resumed, gpu.state);
  EXPECT_EQ(cpu.resumed, cpu.state);
  EXPECT_EQ(gpu.tp_bytes, cpu.tp_bytes);
  EXPECT_EQ(gpu.regather_bytes, cpu.regather_bytes);
  EXPECT_EQ(gpu.grad_sync_bytes, cpu.grad_sync_bytes);
  EXPECT_EQ(gpu.checkpoint_bytes, cpu.checkpoint_bytes);
  EXPECT_EQ(cfg.partition_checkpoints, cpu.checkpoint_bytes > 0) << "Pa's all_gathers send";
  EXPECT_GT(cpu.tp_bytes, 0);
  EXPECT_EQ(sp, cpu.regather_bytes > 0 && cpu.grad_sync_bytes > 0) << "SP's own groups send";
  EXPECT_EQ(cpu_group->staging_stats().to_host_bytes, 0) << "host tensors are never staged";

  const int t = dev_group->size();
  const bool mixed = precision != TrainPrecision::kFP32;
  const Staging per_step = staging_per_step(cfg, t, sp, mixed ? 2 : 4);
  const StagingStats st = dev_group->staging_stats();  // the tp group: f, g, the head
  EXPECT_EQ(st.to_host_bytes, kSteps * per_step.tp_down);
  EXPECT_EQ(st.to_device_bytes, kSteps * per_step.tp_up);
  const TpModelDims d{cfg.vocab, cfg.ctx, cfg.layers, cfg.d, cfg.heads};
  const int64_t psi_r = static_cast<int64_t>(tp_params_per_rank(d, t));
  const int64_t ids = int64_t{kSteps} * 3 * 4 * kBatch * cfg.ctx;
  // Each strategy's init (the master copy and the 16-bit slice when mixed), then set_state.
  const int64_t init = (mixed ? 6 : 4) * psi_r, set_state = init + 8 * psi_r;
  EXPECT_EQ(dev.h2d_bytes(), 2 * init + set_state + ids +
                                kSteps * (per_step.tp_up + per_step.other_up + per_step.offloaded));
  EXPECT_EQ(dev.d2h_bytes(), 2 * 3 * 4 * psi_r + kSteps * (per_step.tp_down + per_step.other_down +
                                                           per_step.offloaded));
  EXPECT_EQ(dev.d2d_bytes(), kSteps * per_step.d2d);
}

TEST(TensorParallelOnDevice, EqualsTheCpuRunWithFAndGStaged) {
  expect_device_run_equals_cpu(GPTConfig::preset("tiny"), /*sp=*/false);
}

TEST(TensorParallelOnDevice, PartitionedCheckpointsUnderFullRecomputation) {
  GPTConfig cfg = GPTConfig::preset("tiny");
  cfg.recompute = Recompute::kFull;
  cfg.partition_checkpoints = true;  // ZeRO-R Pa: parts and gathered inputs on the device
  expect_device_run_equals_cpu(cfg, /*sp=*/false);
}

TEST(TensorParallelOnDevice, PartitionedCheckpointsOnTheHost) {
  GPTConfig cfg = GPTConfig::preset("tiny");
  cfg.recompute = Recompute::kFull;
  cfg.partition_checkpoints = true;
  cfg.cpu_checkpoints = true;  // ZeRO-R Pa+cpu: the parts wait on the host (the CPU run: no-op)
  expect_device_run_equals_cpu(cfg, /*sp=*/false);
}

TEST(SequenceParallelOnDevice, EqualsTheCpuRunWithTheSequenceCollectivesStaged) {
  expect_device_run_equals_cpu(GPTConfig::preset("tiny"), /*sp=*/true);
}

TEST(TensorParallelOnDevice, Bf16HalvesEveryActivationMessage) {
  expect_device_run_equals_cpu(GPTConfig::preset("tiny"), /*sp=*/false, TrainPrecision::kBF16);
}

TEST(SequenceParallelOnDevice, Bf16HalvesEveryActivationMessage) {
  expect_device_run_equals_cpu(GPTConfig::preset("tiny"), /*sp=*/true, TrainPrecision::kBF16);
}

}  // namespace
}  // namespace llmp
