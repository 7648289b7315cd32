// 2D and 2.5D tensor parallelism with --device cuda's placement, at 4 ranks, without a GPU:
// Tp2p5dStrategy with Device::kCUDA on a guarded FakeDevice (common/testing/fake_device.h: a host
// read of device memory is a SIGSEGV) with the CPU kernels as the device's (fake_kernel_ops.h:
// each kernel stops the process when handed a host pointer), against the same strategy on the
// CPU over the same ranks (tiny, B = 4, 2 steps, an evaluation, then get_state): losses, the
// evaluation loss and final state bit for bit, the same CommStats bytes. Two grids: q = 2,
// d = 1 (tp_2d: SUMMA, the grid LayerNorm and cross-entropy over groups of two) and q = 1,
// d = 4 (tp_2p5d's depth: the gradients' all_reduce over the depth group of four).
//
// Then every byte that crossed between host and device against what must cross. Per step, per
// rank, with Bl = B/(dq) sequences of a row block, N = Bl·T rows, Cl = C/q, and on the row and
// column groups only when q > 1 (a group of one rank stages nothing):
//   SUMMA (summa.h), per q-step: a broadcast copies down at its root and up at the q-1 others, a
//     reduce down at all q ranks and up at its root. A linear layer's AB + ABT + ATB with input
//     block a = N·Kl (row group) and weight block w = Kl·Ml (column group) then stages
//     (q+2)·4a down and (2q-1)·4a up on the row group, the same with w on the column group.
//     Summed over the L blocks' four layers and the tied head (K = V):
//       A = L·7N·Cl + N·V/q   (row group),    W = L·12·Cl² + V·C/q²   (column group);
//   row group also: 2L+1 grid LayerNorms (4N + 4N forward, 8N backward each way) and the
//     cross-entropy's row maxima and sums (4N + 8N each way);
//   column group also: the embedding's reduce_scatter (4qN·Cl down, 4N·Cl up) and its backward's
//     all_gather (4N·Cl down, 4qN·Cl up), the vector gradients' all_reduce (4Ψ_vec each way);
//   depth group (d > 1): the gradients' all_reduce, 4Ψ_local each way;
//   ids, up: the depth layer's B/d·T tokens and the row block's N targets, 4(B/d·T + N);
// the evaluation (forward only): per linear layer's AB a down and (q-1)a up on the row group, w
//   and (q-1)w on the column group; the head's ABT q·N·V/q down and N·V/q up on the row group,
//   w and (q-1)w on the column group; the LayerNorms' forward halves and the cross-entropy; the
//   embedding's reduce_scatter; its ids; its loss's sums are host doubles (nothing staged);
// and once: the initial blocks up (4Ψ_local), get_state's three states down (3·4Ψ_local).
// Nothing else: a buffer the walk leaves on the host shows up here (or as a SIGSEGV, or as a
// kernel's "not device memory").
//
// Glossary: q grid side, d depth, B global batch, T sequence, C channels, V vocab, L layers,
// Ψ_local parameters per rank, Ψ_vec of them the vector parameters (wpe, LayerNorms, biases).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "common/tp2d/tp2d_strategy.h"

namespace llmp {
namespace {

constexpr int kSteps = 2;
constexpr int kBatch = 4;  // d·q = 2 or 4 divides it

struct Result {
  std::vector<double> losses;
  double eval = 0;
  std::vector<float> state;  // params, m, v: the whole model's (get_state)
  double row = 0, col = 0, depth = 0;  // CommStats bytes, summed over steps
  StagingStats row_st, col_st, depth_st;
  int64_t psi_local = 0, psi_vec = 0;
};

Result train(const GPTConfig& cfg, ProcessGroup& all, int depth, Device device) {
  const int T = cfg.ctx;
  AdamWConfig opt;
  opt.lr = 3e-3f;
  opt.weight_decay = 0.1f;
  Tp2p5dStrategy s(cfg, all, depth, opt, 7, device);
  const BatchSlice slice = s.batch_slice(kBatch);
  std::vector<int32_t> tok(kBatch * T), tgt(kBatch * T);
  Result r;
  for (int k = 1; k <= kSteps; ++k) {
    for (int e = 0; e < kBatch * T; ++e) {  // ids spread over every vocabulary block
      tok[e] = (37 * e + 11 * k) % cfg.vocab;
      tgt[e] = (53 * e + 5 * k + 1) % cfg.vocab;
    }
    const int64_t at = int64_t(slice.first_seq) * T;
    r.losses.push_back(s.train_step(tok.data() + at, tgt.data() + at, kBatch, T, k));
    r.row += s.last_row_bytes(), r.col += s.last_column_bytes(), r.depth += s.last_depth_bytes();
  }
  r.eval = s.eval_loss(tok.data() + int64_t(slice.first_seq) * T,
                       tgt.data() + int64_t(slice.first_seq) * T, kBatch, T);
  const int64_t psi = GPTLayout(cfg).num_params();
  r.state.resize(3 * psi);
  s.get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  r.row_st = s.grid().row().staging_stats();
  r.col_st = s.grid().col().staging_stats();
  r.depth_st = s.grid().depth().staging_stats();
  r.psi_local = s.layout().num_params();
  r.psi_vec = s.layout().num_vector_params();
  return r;
}

void expect_device_run_equals_cpu(int depth) {
  const GPTConfig cfg = GPTConfig::preset("tiny");
  auto world = ProcessGroup::world();
  auto cpu_group = world->duplicate();
  const Result cpu = train(cfg, *cpu_group, depth, Device::kCPU);

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  auto dev_group = world->duplicate();
  const Result gpu = train(cfg, *dev_group, depth, Device::kCUDA);

  EXPECT_EQ(gpu.losses, cpu.losses);
  EXPECT_EQ(gpu.eval, cpu.eval);
  EXPECT_EQ(gpu.state, cpu.state);
  EXPECT_EQ(gpu.row, cpu.row);
  EXPECT_EQ(gpu.col, cpu.col);
  EXPECT_EQ(gpu.depth, cpu.depth);
  for (const StagingStats* st : {&cpu.row_st, &cpu.col_st, &cpu.depth_st})
    EXPECT_EQ(st->to_host_bytes + st->to_device_bytes, 0) << "host tensors are never staged";

  const int P = world->size(), q = depth == 1 ? 2 : 1, d = depth;
  ASSERT_EQ(P, d * q * q);
  const int64_t T = cfg.ctx, L = cfg.layers, C = cfg.d, V = cfg.vocab, Cl = C / q;
  const int64_t N = kBatch / (d * q) * T;
  const int64_t A = L * 7 * N * Cl + N * V / q, W = L * 12 * Cl * Cl + V * C / (q * q);
  const int64_t ln_ce = (2 * L + 1) * 16 * N + 12 * N;  // each way, row group
  const int64_t emb = 4 * (q + 1) * N * Cl;              // each way, column group
  int64_t row_down = 0, row_up = 0, col_down = 0, col_up = 0, dep = 0;
  if (q > 1) {
    row_down = 4 * (q + 2) * A + ln_ce, row_up = 4 * (2 * q - 1) * A + ln_ce;
    col_down = 4 * (q + 2) * W + emb + 4 * gpu.psi_vec;
    col_up = 4 * (2 * q - 1) * W + emb + 4 * gpu.psi_vec;
  }
  if (d > 1) dep = 4 * gpu.psi_local;
  // The evaluation's forward (q > 1): AB's and the head ABT's halves, LayerNorm forward, CE.
  int64_t ev_row_down = 0, ev_row_up = 0, ev_col_down = 0, ev_col_up = 0;
  if (q > 1) {
    const int64_t a = L * 7 * N * Cl, z = N * V / q, ln = (2 * L + 1) * 8 * N + 12 * N;
    ev_row_down = 4 * (a + q * z) + ln, ev_row_up = 4 * ((q - 1) * a + z) + ln;
    ev_col_down = 4 * W + 4 * q * N * Cl, ev_col_up = 4 * (q - 1) * W + 4 * N * Cl;
  }
  EXPECT_EQ(gpu.row_st.to_host_bytes, kSteps * row_down + ev_row_down);
  EXPECT_EQ(gpu.row_st.to_device_bytes, kSteps * row_up + ev_row_up);
  EXPECT_EQ(gpu.col_st.to_host_bytes, kSteps * col_down + ev_col_down);
  EXPECT_EQ(gpu.col_st.to_device_bytes, kSteps * col_up + ev_col_up);
  EXPECT_EQ(gpu.depth_st.to_host_bytes, kSteps * dep);
  EXPECT_EQ(gpu.depth_st.to_device_bytes, kSteps * dep);
  const int64_t ids = (kSteps + 1) * 4 * (kBatch / d * T + N);  // the steps' and the evaluation's
  EXPECT_EQ(dev.h2d_bytes(), 4 * gpu.psi_local + ids + kSteps * (row_up + col_up + dep) +
                                 ev_row_up + ev_col_up);
  EXPECT_EQ(dev.d2h_bytes(), 3 * 4 * gpu.psi_local + kSteps * (row_down + col_down + dep) +
                                 ev_row_down + ev_col_down);
  std::printf("rank %d: q=%d d=%d losses %.6f %.6f, h2d %lld B, d2h %lld B\n", world->rank(), q,
              d, gpu.losses[0], gpu.losses[1], static_cast<long long>(dev.h2d_bytes()),
              static_cast<long long>(dev.d2h_bytes()));
}

TEST(Tp2dOnDevice, EqualsTheCpuRunWithSummaStaged) { expect_device_run_equals_cpu(1); }

// Activation recomputation on the device (q = 2, d = 1): selective makes P again with the
// device's attention_probs and stages nothing more; full (every 1 and 2 blocks) runs the L
// forwards again, so per step each block's four AB products stage their X and W broadcasts once
// more (7N·Cl floats down at the row root and up at the q-1 others; 12·Cl² on the column group),
// and its two grid LayerNorms their forward sums (16N bytes each way). Each equals the CPU run
// with the same policy bit for bit, and that the run without recomputation.
TEST(Tp2dOnDevice, RecomputationEqualsTheCpuRunAndStagesTheForwardsAgain) {
  auto world = ProcessGroup::world();
  const int q = 2;
  ASSERT_EQ(world->size(), q * q);
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  GPTConfig base = GPTConfig::preset("tiny");
  auto none_group = world->duplicate();
  const Result none = train(base, *none_group, 1, Device::kCUDA);
  const int64_t T = base.ctx, L = base.layers, Cl = base.d / q, N = kBatch / q * T;
  for (const auto& [mode, every] : {std::pair<Recompute, int>{Recompute::kSelective, 1},
                                    {Recompute::kFull, 1}, {Recompute::kFull, 2}}) {
    SCOPED_TRACE(std::string("--recompute ") + to_string(mode) + " every " +
                 std::to_string(every));
    GPTConfig cfg = base;
    cfg.recompute = mode, cfg.recompute_every = every;
    auto cpu_group = world->duplicate(), dev_group = world->duplicate();
    const Result cpu = train(cfg, *cpu_group, 1, Device::kCPU);
    const Result gpu = train(cfg, *dev_group, 1, Device::kCUDA);
    EXPECT_EQ(gpu.losses, cpu.losses);
    EXPECT_EQ(gpu.state, cpu.state);
    EXPECT_EQ(gpu.losses, none.losses);
    EXPECT_EQ(gpu.eval, none.eval);
    EXPECT_EQ(gpu.state, none.state);
    const bool full = mode == Recompute::kFull;
    const int64_t a = L * 7 * N * Cl, w = L * 12 * Cl * Cl, ln = L * 16 * N;
    EXPECT_EQ(gpu.row_st.to_host_bytes - none.row_st.to_host_bytes, full ? kSteps * (4 * a + ln) : 0);
    EXPECT_EQ(gpu.row_st.to_device_bytes - none.row_st.to_device_bytes,
              full ? kSteps * (4 * (q - 1) * a + ln) : 0);
    EXPECT_EQ(gpu.col_st.to_host_bytes - none.col_st.to_host_bytes, full ? kSteps * 4 * w : 0);
    EXPECT_EQ(gpu.col_st.to_device_bytes - none.col_st.to_device_bytes,
              full ? kSteps * 4 * (q - 1) * w : 0);
  }
}

// Flash attention on the device (q = 2, d = 1): each rank's attention runs the device's flash
// kernels on its own heads and keeps lse instead of P, on the device. No message changes, so the
// run stages exactly the bytes the materialized run stages; it equals the CPU's flash run bit for
// bit, and under full recomputation too (the forwards' collectives again, as above).
TEST(Tp2dOnDevice, FlashAttentionEqualsTheCpuRunAndStagesWhatMaterializedDoes) {
  auto world = ProcessGroup::world();
  ASSERT_EQ(world->size(), 4);
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPTConfig base = GPTConfig::preset("tiny");
  for (Recompute mode : {Recompute::kNone, Recompute::kFull}) {
    SCOPED_TRACE(std::string("--attention flash --recompute ") + to_string(mode));
    GPTConfig materialized = base, flash = base;
    materialized.recompute = flash.recompute = mode;
    flash.attention = AttentionMethod::kFlash;
    auto mat_group = world->duplicate(), cpu_group = world->duplicate(),
         dev_group = world->duplicate();
    const Result mat = train(materialized, *mat_group, 1, Device::kCUDA);
    const Result cpu = train(flash, *cpu_group, 1, Device::kCPU);
    const Result gpu = train(flash, *dev_group, 1, Device::kCUDA);
    EXPECT_EQ(gpu.losses, cpu.losses);
    EXPECT_EQ(gpu.eval, cpu.eval);
    EXPECT_EQ(gpu.state, cpu.state);
    EXPECT_EQ(gpu.row, mat.row);
    EXPECT_EQ(gpu.col, mat.col);
    for (const auto& [f, m] : {std::pair{&gpu.row_st, &mat.row_st}, {&gpu.col_st, &mat.col_st}}) {
      EXPECT_EQ(f->to_host_bytes, m->to_host_bytes);
      EXPECT_EQ(f->to_device_bytes, m->to_device_bytes);
    }
    EXPECT_NEAR(gpu.losses.back(), mat.losses.back(), 1e-5) << "the same model";
  }
}

TEST(Tp2p5dOnDevice, EqualsTheCpuRunWithTheDepthAllReduceStaged) {
  expect_device_run_equals_cpu(4);
}

}  // namespace
}  // namespace llmp
