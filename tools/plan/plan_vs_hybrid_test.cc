// The planner against what stages/hybrid_3d measures: for every configuration of the tiny model
// (L and H raised to 4 so that pp = 4, interleaving and tp = 4 fit) whose dp·pp·tp is this job's
// world size,
// one training step, then on every rank the planner's predicted memory by category and bytes per
// group (tools/plan/cost_model.h, fp32 and mixed precision: the stage under --precision
// bf16, 16-bit parameters and activations with fp32 gradients) must equal what the step measured (MemoryTracker bytes, the executor's stored bytes per micro-batch and
// chunk, each group's CommStats). Run at world sizes 1, 2, 4 and 8: (1,1,1); (2,1,1), (1,2,1),
// (1,1,2); (1,2,2), (2,1,2), (2,2,1), (1,1,4), (4,1,1), (1,4,1); (2,2,2); each with m ∈ {1, 4},
// sequence parallelism off and on (tp > 1), v ∈ {1, 2} where p·v divides L and p divides m,
// ZeRO-1 and (dp > 1) ZeRO-2 (the tied wte's holders deferred under a pipeline; the replicated
// gradients of SP all-reduced on the shards, checked as the dp group's sum). The
// in-flight count the planner multiplies the activations by is checked against the executor's.
// At world size 8 the mini preset runs the same variants on the stage's default grid (2, 2, 2).
//
// Glossary: dp/pp/tp the grid, m micro-batches, v chunks per pipeline rank, B global batch.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/grid.h"
#include "common/nn/gpt.h"
#include "common/train/dp_util.h"
#include "stages/hybrid_3d/hybrid_3d.h"
#include "tools/plan/cost_model.h"

namespace llmp {
namespace {

constexpr int kB = 16;  // divisible by dp·m for dp ∈ {1, 2, 4}, m ∈ {1, 4}

struct Case {
  GridShape grid;
  int m, v;
  bool sp;
  bool mini = false;  ///< the mini preset instead of the widened tiny
  bool mixed = false;  ///< --precision bf16 (the planner's mixed precision), else fp32
  int zero = 1;        ///< the ZeRO stage over dp (2: only where dp > 1)
  std::string name() const {
    return std::string(mini ? "mini " : "tiny ") + "dp " + std::to_string(grid.dp) + " pp " +
           std::to_string(grid.pp) + " tp " + std::to_string(grid.tp) + " m " +
           std::to_string(m) + " v " + std::to_string(v) + (sp ? " sp" : "") +
           (mixed ? " bf16" : " fp32") + " zero " + std::to_string(zero);
  }
};

GPTConfig model(bool mini) {
  if (mini) return GPTConfig::preset("mini");  // L 4, C 128, H 4, V 256, T 64
  GPTConfig c = GPTConfig::preset("tiny");
  c.layers = 4;  // pp = 4, and pp = 2 with v = 2
  c.heads = 4;   // tp = 4 (tiny's H = 2 would refuse it)
  return c;
}

std::vector<Case> cases(int world) {
  const std::vector<GridShape> grids = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {1, 2, 2},
                                        {2, 1, 2}, {2, 2, 1}, {1, 1, 4}, {4, 1, 1}, {1, 4, 1},
                                        {2, 2, 2}};
  std::vector<Case> out;
  for (bool mini : {false, true})
    for (const GridShape& g : grids) {
      if (g.dp * g.pp * g.tp != world) continue;
      if (mini && g.dp * g.pp * g.tp != 8) continue;  // mini: the stage's default grid only
      const int L = model(mini).layers;
      for (int m : {1, 4})
        for (int v : {1, 2}) {
          if (L % (g.pp * v) || (v > 1 && (g.pp == 1 || m % g.pp))) continue;
          for (int sp = 0; sp <= (g.tp > 1 ? 1 : 0); ++sp)
            for (bool mixed : {false, true})
              for (int zero = 1; zero <= (g.dp > 1 ? 2 : 1); ++zero)
                out.push_back({g, m, v, sp == 1, mini, mixed, zero});
        }
    }
  return out;
}

TEST(PlanVsHybrid, PredictedMemoryAndBytesEqualMeasuredOnEveryRank) {
  const std::shared_ptr<ProcessGroup> world = ProcessGroup::world();
  const std::vector<Case> all = cases(world->size());
  ASSERT_FALSE(all.empty());
  for (const Case& c : all) {
    SCOPED_TRACE(c.name());
    const bool mixed = c.mixed;
    const GPTConfig cfg = model(c.mini);
    plan::ModelSpec spec;
    spec.L = cfg.layers, spec.C = cfg.d, spec.H = cfg.heads, spec.V = cfg.vocab;
    spec.T = cfg.ctx, spec.ctx = cfg.ctx;
    const int T = cfg.ctx;
    // Any ids do: the bytes and the memory do not depend on them.
    std::vector<int32_t> tokens(kB * T), targets(kB * T);
    for (int i = 0; i < kB * T; ++i)
      tokens[i] = (i * 37 + 11) % cfg.vocab, targets[i] = (i * 53 + 5) % cfg.vocab;
    ProcessGrid grid(world, c.grid);
    HybridOptions o;
    o.micro_batches = c.m, o.chunks = c.v, o.sequence_parallel = c.sp, o.zero = c.zero;
    o.mp.precision = mixed ? TrainPrecision::kBF16 : TrainPrecision::kFP32;
    auto s = std::make_unique<HybridStrategy>(cfg, grid, AdamWConfig{}, 42, o);
    const BatchSlice slice = s->batch_slice(kB);
    s->train_step(tokens.data() + slice.first_seq * T, targets.data() + slice.first_seq * T, kB,
                  T, 1);
    const HybridMeasured got = s->last_measured();

    plan::PlanConfig pc;
    pc.mixed = mixed;
    pc.shape.dp = c.grid.dp, pc.shape.pp = c.grid.pp, pc.shape.tp = c.grid.tp;
    pc.shape.m = c.m, pc.shape.v = c.v, pc.shape.sp = c.sp, pc.shape.zero = c.zero;
    const plan::RankCost want =
        plan::rank_cost(spec, kB, plan::Cluster{}, pc, grid.pp_rank());
    const int r = world->rank();
    EXPECT_EQ(got.params, want.plan.params) << "rank " << r;
    EXPECT_EQ(got.grads, want.plan.grads) << "rank " << r;
    EXPECT_EQ(got.optimizer, want.plan.optimizer) << "rank " << r;
    EXPECT_EQ(got.activations_per_microbatch, want.plan.activations_per_microbatch) << "rank " << r;
    EXPECT_DOUBLE_EQ(got.tp, want.plan.tp) << "rank " << r;
    EXPECT_DOUBLE_EQ(got.regather, want.plan.regather) << "rank " << r;
    if (c.zero == 2) {
      // ZeRO-2 all-reduces the replicated gradients on the shards: which of them fall in a dp
      // rank's shard depends on the layout; the planner gives the mean, the dp group's sum is
      // exact (collective over the dp group: every rank runs every case).
      const double sum = MetricsReducer(grid.dp_group()).sum(got.repl_grads);
      EXPECT_DOUBLE_EQ(sum, c.grid.dp * want.plan.repl_grads) << "rank " << r;
    } else {
      EXPECT_DOUBLE_EQ(got.repl_grads, want.plan.repl_grads) << "rank " << r;
    }
    EXPECT_DOUBLE_EQ(got.pp, want.plan.pp) << "rank " << r;
    EXPECT_DOUBLE_EQ(got.emb, want.plan.emb) << "rank " << r;
    EXPECT_DOUBLE_EQ(got.dp, want.plan.dp) << "rank " << r;
    // The in-flight (micro-batch, chunk) activations the planner multiplies by: the executor's
    // count of what it actually held (1F1B min(m, p - r); interleaved Megatron's warm-up + 1).
    EXPECT_EQ(s->last_stats().peak_in_flight, want.in_flight) << "rank " << r;
    if (r == 0)
      std::printf("checked %-33s rank 0: params %.0f grads %.0f optimizer %.0f act/mb %.0f × %d, "
                  "sent tp %.0f regather %.0f repl %.0f pp %.0f emb %.0f dp %.0f\n",
                  c.name().c_str(), got.params, got.grads, got.optimizer,
                  got.activations_per_microbatch, want.in_flight, got.tp, got.regather,
                  got.repl_grads, got.pp, got.emb, got.dp);
    s.reset();
    world->barrier();
  }
}

}  // namespace
}  // namespace llmp
