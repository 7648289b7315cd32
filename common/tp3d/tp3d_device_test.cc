// 3D tensor parallelism with --device cuda's placement, at 8 ranks (q = 2), without a GPU:
// Tp3dStrategy with Device::kCUDA on a guarded FakeDevice (common/testing/fake_device.h: a host
// read of device memory is a SIGSEGV) with the CPU kernels as the device's (fake_kernel_ops.h:
// each kernel stops the process when handed a host pointer), against the same strategy on the
// CPU over the same ranks (tiny, B = 4, 2 steps, an evaluation, then get_state): losses, the
// evaluation loss and final state bit for bit, the same CommStats bytes on the five groups.
//
// Then every byte that crossed between host and device against what must cross. The MPI
// backend stages a collective's input down and its output up: an all_gather of s floats per
// rank 4s down, 4qs up; a reduce_scatter of S floats 4S down, 4S/q up; an all_reduce 4S each
// way. Per rank, m = B·T/q² rows, u = m·C/q, z = m·V/q, W = (12LC² + VC)/q³ (the weight pieces
// of one rank), and a 3D linear (linear_3d.h) with input a = m·K/q, output y = m·N/q and weight
// piece w = KN/q³ stages, forward and backward, 4(q+1)a each way on gx, 4(q+1)y each way on gy,
// 4(q+2)w down and 4(2q+1)w up on gw. Per step, summed over the L blocks' four linears (A→B:
// gx = j, gw = i, gy = l; B→A: gx = l, gw = i, gy = j) and the tied head (A→B, K = C, N = V):
//   j-axis: 4(q+1)(4L+1)u + the cross-entropy's row maxima and sums (4m + 8m), each way;
//   l-axis: 4(q+1)(12L·u + z) + 2L+1 grid LayerNorms (4m + 4m forward, 8m backward), each way;
//   i-axis: 4(q+2)W down, 4(2q+1)W up;
//   plane(l): the embedding's reduce_scatter (4q²u down, 4u up) and its backward's all_gather
//     (4u down, 4q²u up), the layout-A vectors' gradients' all_reduce 4Ψ_L each way,
//     Ψ_L = (ctx + 6L + 2)C/q (wpe, the LayerNorms, the c_proj biases);
//   plane(j): the layout-B vectors' gradients' all_reduce 4Ψ_J each way, Ψ_J = 7L·C/q (the
//     c_attn and c_fc biases); the loss's sum is a host double (nothing staged);
//   ids, up: all B·T tokens and this rank's m targets, 4(B·T + m);
// the evaluation (forward only): each linear's gather of x (4a down, 4qa up), of W (4w, 4qw)
// and scatter of y (4qy down, 4y up); the LayerNorms' forward halves; the cross-entropy; the
// embedding's reduce_scatter; its ids;
// and once: the initial blocks up (4Ψ_r), get_state's three states down (3·4Ψ_r).
// Nothing else: a buffer the walk leaves on the host shows up here (or as a SIGSEGV, or as a
// kernel's "not device memory").
//
// Glossary: q cube side, B global batch, T sequence (= ctx), C channels, V vocab, L layers,
// Ψ_r parameters per rank.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "common/tp3d/tp3d_strategy.h"

namespace llmp {
namespace {

constexpr int kSteps = 2;
constexpr int kBatch = 4;  // q² = 4 divides it

// The cube's groups in this order: i-axis, j-axis, l-axis, plane(l), plane(j).
constexpr int kGroups = 5;

struct Result {
  std::vector<double> losses;
  double eval = 0;
  std::vector<float> state;  // params, m, v: the whole model's (get_state)
  double bytes[kGroups] = {};  // CommStats bytes, summed over the run
  StagingStats st[kGroups];
  int64_t psi_r = 0;
};

Result train(const GPTConfig& cfg, ProcessGroup& all, Device device) {
  const int T = cfg.ctx;
  AdamWConfig opt;
  opt.lr = 3e-3f;
  opt.weight_decay = 0.1f;
  Tp3dStrategy s(cfg, all, opt, 7, device);
  std::vector<int32_t> tok(kBatch * T), tgt(kBatch * T);
  Result r;
  for (int k = 1; k <= kSteps; ++k) {
    for (int e = 0; e < kBatch * T; ++e) {  // ids spread over every vocabulary piece
      tok[e] = (37 * e + 11 * k) % cfg.vocab;
      tgt[e] = (53 * e + 5 * k + 1) % cfg.vocab;
    }
    r.losses.push_back(s.train_step(tok.data(), tgt.data(), kBatch, T, k));
  }
  r.eval = s.eval_loss(tok.data(), tgt.data(), kBatch, T);
  const int64_t psi = GPTLayout(cfg).num_params();
  r.state.resize(3 * psi);
  s.get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  const Cube& c = s.cube();
  const ProcessGroup* groups[kGroups] = {c.i_axis.get(), c.j_axis.get(), c.l_axis.get(),
                                         c.plane_l.get(), c.plane_j.get()};
  for (int k = 0; k < kGroups; ++k) {
    r.bytes[k] = groups[k]->stats().total_bytes();
    r.st[k] = groups[k]->staging_stats();
  }
  r.psi_r = s.local_params().numel();
  return r;
}

// Activation recomputation on the device: selective (P again with the device's attention_probs)
// and full (every 1 and 2 blocks: the forwards again, their collectives staged again) equal the
// CPU run with the same policy and the run without recomputation, bit for bit. Selective stages
// nothing more. Full runs the L blocks' forwards once more per step (each block once, whatever
// k: a segment's inputs are made once and kept), so it stages, per step and in the notation
// above, the blocks' share of the evaluation's forward again and nothing for the head, the
// embedding or the cross-entropy:
//   i-axis: the weight pieces' gathers, 4Wb down and 4qWb up, Wb = 12LC²/q³;
//   j-axis: c_attn's and c_fc's x gathered (4u down, 4qu up each) and both c_proj's y
//     scattered (4qu down, 4u up each): 8L(q+1)u each way;
//   l-axis: c_attn's y (3u) and c_fc's y (4u) scattered, both c_proj's x (u and 4u) gathered,
//     and the 2L LayerNorm forwards' sums (8m each way): 4(7q+5)Lu + 16Lm down,
//     4(7+5q)Lu + 16Lm up;
//   the planes: nothing.
TEST(Tp3dOnDevice, RecomputationEqualsTheCpuRun) {
  auto world = ProcessGroup::world();
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPTConfig base = GPTConfig::preset("tiny");
  auto none_group = world->duplicate();
  const Result none = train(base, *none_group, Device::kCUDA);
  for (const auto& [mode, every] : {std::pair<Recompute, int>{Recompute::kSelective, 1},
                                    {Recompute::kFull, 1}, {Recompute::kFull, 2}}) {
    SCOPED_TRACE(std::string("--recompute ") + to_string(mode) + " every " +
                 std::to_string(every));
    GPTConfig cfg = base;
    cfg.recompute = mode, cfg.recompute_every = every;
    auto cpu_group = world->duplicate(), dev_group = world->duplicate();
    const Result cpu = train(cfg, *cpu_group, Device::kCPU);
    const Result gpu = train(cfg, *dev_group, Device::kCUDA);
    EXPECT_EQ(gpu.losses, cpu.losses);
    EXPECT_EQ(gpu.state, cpu.state);
    EXPECT_EQ(gpu.losses, none.losses);
    EXPECT_EQ(gpu.eval, none.eval);
    EXPECT_EQ(gpu.state, none.state);
    const int q = 2;
    const int64_t T = base.ctx, L = base.layers, C = base.d, m = kBatch * T / (q * q),
                  u = m * C / q, Wb = 12 * L * C * C / (q * q * q);
    const bool full = mode == Recompute::kFull;
    const int64_t again[kGroups][2] = {  // per step: {down, up}
        {4 * Wb, 4 * q * Wb},
        {8 * L * (q + 1) * u, 8 * L * (q + 1) * u},
        {4 * (7 * q + 5) * L * u + 16 * L * m, 4 * (7 + 5 * q) * L * u + 16 * L * m},
        {0, 0},
        {0, 0}};
    for (int k = 0; k < kGroups; ++k) {
      EXPECT_EQ(gpu.bytes[k], cpu.bytes[k]) << "group " << k;
      EXPECT_EQ(gpu.st[k].to_host_bytes - none.st[k].to_host_bytes,
                full ? kSteps * again[k][0] : 0)
          << "group " << k;
      EXPECT_EQ(gpu.st[k].to_device_bytes - none.st[k].to_device_bytes,
                full ? kSteps * again[k][1] : 0)
          << "group " << k;
    }
  }
}

// Flash attention on the device: each rank's attention (its heads of its sequences, local in
// this walk too) runs the device's flash kernels and keeps lse instead of P; the backward reads
// the attention output from c_proj's gathered input, on the device. No message changes, so the
// run stages exactly what the materialized run stages, and equals the CPU's flash run bit for bit.
TEST(Tp3dOnDevice, FlashAttentionEqualsTheCpuRunAndStagesWhatMaterializedDoes) {
  auto world = ProcessGroup::world();
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPTConfig materialized = GPTConfig::preset("tiny");
  GPTConfig flash = materialized;
  flash.attention = AttentionMethod::kFlash;
  auto mat_group = world->duplicate(), cpu_group = world->duplicate(),
       dev_group = world->duplicate();
  const Result mat = train(materialized, *mat_group, Device::kCUDA);
  const Result cpu = train(flash, *cpu_group, Device::kCPU);
  const Result gpu = train(flash, *dev_group, Device::kCUDA);
  EXPECT_EQ(gpu.losses, cpu.losses);
  EXPECT_EQ(gpu.eval, cpu.eval);
  EXPECT_EQ(gpu.state, cpu.state);
  for (int k = 0; k < kGroups; ++k) {
    EXPECT_EQ(gpu.bytes[k], mat.bytes[k]) << "group " << k;
    EXPECT_EQ(gpu.st[k].to_host_bytes, mat.st[k].to_host_bytes) << "group " << k;
    EXPECT_EQ(gpu.st[k].to_device_bytes, mat.st[k].to_device_bytes) << "group " << k;
  }
  EXPECT_NEAR(gpu.losses.back(), mat.losses.back(), 1e-5) << "the same model";
}

TEST(Tp3dOnDevice, EqualsTheCpuRunWithEveryCollectiveStaged) {
  const GPTConfig cfg = GPTConfig::preset("tiny");
  auto world = ProcessGroup::world();
  auto cpu_group = world->duplicate();
  const Result cpu = train(cfg, *cpu_group, Device::kCPU);

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  auto dev_group = world->duplicate();
  const Result gpu = train(cfg, *dev_group, Device::kCUDA);

  EXPECT_EQ(gpu.losses, cpu.losses);
  EXPECT_EQ(gpu.eval, cpu.eval);
  EXPECT_EQ(gpu.state, cpu.state);
  for (int k = 0; k < kGroups; ++k) {
    EXPECT_EQ(gpu.bytes[k], cpu.bytes[k]) << "group " << k;
    EXPECT_EQ(cpu.st[k].to_host_bytes + cpu.st[k].to_device_bytes, 0)
        << "host tensors are never staged (group " << k << ")";
  }

  const int q = 2;
  ASSERT_EQ(world->size(), q * q * q);
  const int64_t T = cfg.ctx, L = cfg.layers, C = cfg.d, V = cfg.vocab, M = kBatch * T;
  const int64_t m = M / (q * q), u = m * C / q, z = m * V / q;
  const int64_t W = (12 * L * C * C + V * C) / (q * q * q);
  const int64_t psi_l = (T + 6 * L + 2) * C / q, psi_j = 7 * L * C / q;
  // Per step: [group] = {down, up}.
  const int64_t j_way = 4 * (q + 1) * (4 * L + 1) * u + 12 * m;
  const int64_t l_way = 4 * (q + 1) * (12 * L * u + z) + (2 * L + 1) * 16 * m;
  const int64_t pl_way = 4 * (q * q + 1) * u + 4 * psi_l;
  const int64_t step[kGroups][2] = {{4 * (q + 2) * W, 4 * (2 * q + 1) * W},
                                    {j_way, j_way},
                                    {l_way, l_way},
                                    {pl_way, pl_way},
                                    {4 * psi_j, 4 * psi_j}};
  // The evaluation's forward: A→B linears' x gathered over j and y scattered over l, B→A's x
  // over l and y over j; 2L+1 LayerNorm forwards (8m each way) on l, the cross-entropy on j.
  const int64_t ln = (2 * L + 1) * 8 * m;
  const int64_t eval[kGroups][2] = {
      {4 * W, 4 * q * W},
      {4 * (2 * L + 1) * u + 4 * q * 2 * L * u + 12 * m,
       4 * q * (2 * L + 1) * u + 4 * 2 * L * u + 12 * m},
      {4 * q * (7 * L * u + z) + 4 * 5 * L * u + ln, 4 * (7 * L * u + z) + 4 * q * 5 * L * u + ln},
      {4 * q * q * u, 4 * u},
      {0, 0}};
  int64_t down = 0, up = 0;
  for (int k = 0; k < kGroups; ++k) {
    EXPECT_EQ(gpu.st[k].to_host_bytes, kSteps * step[k][0] + eval[k][0]) << "group " << k;
    EXPECT_EQ(gpu.st[k].to_device_bytes, kSteps * step[k][1] + eval[k][1]) << "group " << k;
    down += kSteps * step[k][0] + eval[k][0], up += kSteps * step[k][1] + eval[k][1];
  }
  const int64_t ids = (kSteps + 1) * 4 * (M + m);  // the steps' and the evaluation's
  EXPECT_EQ(dev.h2d_bytes(), 4 * gpu.psi_r + ids + up);
  EXPECT_EQ(dev.d2h_bytes(), 3 * 4 * gpu.psi_r + down);
  std::printf("rank %d: q=%d losses %.6f %.6f, h2d %lld B, d2h %lld B\n", world->rank(), q,
              gpu.losses[0], gpu.losses[1], static_cast<long long>(dev.h2d_bytes()),
              static_cast<long long>(dev.d2h_bytes()));
}

}  // namespace
}  // namespace llmp
