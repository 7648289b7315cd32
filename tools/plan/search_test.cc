// The search: a ranking whose answer is known by hand, the GPT-3 175B case (tensor parallelism
// must stay inside a node, and the reason tp = 16 lost must name the inter-node link), the
// fall-back to fewer GPUs, and the reasons of plans that do not fit.
#include <gtest/gtest.h>

#include <string>

#include "tools/plan/search.h"

namespace llmp::plan {
namespace {

ModelSpec toy() {  // as in cost_model_test.cc: Ψ = 544, 23040 model FLOPs for B = 2
  ModelSpec m;
  m.L = 2, m.C = 4, m.H = 2, m.V = 8, m.T = 4, m.ctx = 4;
  return m;
}

TEST(Search, FreeCommunicationPicksNoPipelineAndNoRecomputation) {
  // Two GPUs, communication free, memory ample. By hand: any plan without a pipeline splits the
  // 23040 FLOPs evenly, 11520 per GPU = 0.02304 s at 5e5 FLOP/s; a pipeline adds a bubble and
  // puts the head on one stage; recomputation adds FLOPs. So the best step is 0.02304 s with
  // pp = 1 and no recomputation, and the worst fitting plans have recompute full.
  Cluster c;
  c.gpus_per_node = 2, c.nodes = 1, c.memory = 1e12, c.peak_flops = 1e6, c.efficiency = 0.5;
  c.bw_intra = c.bw_inter = 1e30, c.latency = 0;
  SearchOptions o;
  o.mixed = false;
  const SearchResult r = search(toy(), 2, c, o);
  ASSERT_FALSE(r.ranked.empty());
  const PlanCost& best = r.all[r.ranked[0]];
  EXPECT_EQ(best.config.shape.pp, 1);
  EXPECT_EQ(best.config.shape.recompute, Recompute::kNone);
  EXPECT_NEAR(best.step, 0.02304, 1e-12);
  const PlanCost& worst = r.all[r.ranked.back()];
  EXPECT_GT(worst.step, best.step);
  for (size_t i = 1; i < r.ranked.size(); ++i)
    EXPECT_LE(r.all[r.ranked[i - 1]].step, r.all[r.ranked[i]].step);
}

TEST(Search, SlowLinkMakesDataParallelLose) {
  // Two GPUs on two nodes, inter-node 100 B/s, latency 0, B = 2, fp32. dp = 2 all-reduces
  // 2·(1/2)·4·544 = 2176 bytes (ZeRO-0), 21.76 s at best (ZeRO-1 sends the same, ZeRO-2/3 more).
  // tp = 2 sends activations: per micro-batch (4L + 2)·2·(1/2)·4·b·T·C + 2·(1/2)·4·3·b·T with
  // b·T = 8 (one micro-batch of 2): 10·128 + 96 = 1376 bytes, 13.76 s. pp = 2 (m = 1) sends one
  // (b,T,C) activation of 4·2·4·4 = 128 bytes per rank and the embedding all_reduce's 4·V·C =
  // 128: 2.56 s. So dp = 2 must not be first; the reason it lost names dp and the link.
  Cluster c;
  c.gpus_per_node = 1, c.nodes = 2, c.memory = 1e12, c.peak_flops = 1e6, c.efficiency = 0.5;
  c.bw_intra = 1000, c.bw_inter = 100, c.latency = 0;
  SearchOptions o;
  o.mixed = false;
  const SearchResult r = search(toy(), 2, c, o);
  ASSERT_FALSE(r.ranked.empty());
  const PlanCost& best = r.all[r.ranked[0]];
  EXPECT_EQ(best.config.shape.dp, 1);
  bool found = false;
  for (const Alternative& a : alternatives(r, c))
    if (a.label == "dp = 2") {
      found = true;
      EXPECT_NE(a.reason.find("dp "), std::string::npos) << a.reason;
      EXPECT_NE(a.reason.find("inter-node"), std::string::npos) << a.reason;
    }
  EXPECT_TRUE(found);
}

TEST(Search, Gpt3On1024A100KeepsTensorParallelismInANode) {
  ModelSpec m;
  m.name = "GPT-3 175B", m.L = 96, m.C = 12288, m.H = 96, m.V = 51200, m.T = 2048, m.ctx = 2048;
  Cluster c;  // 128 nodes of 8 A100-80GB, NVLink 300 GB/s, IB 25 GB/s per GPU
  c.gpus_per_node = 8, c.nodes = 128, c.memory = 80e9, c.peak_flops = 312e12;
  c.bw_intra = 300e9, c.bw_inter = 25e9, c.latency = 5e-6, c.efficiency = 0.75;
  const SearchResult r = search(m, 1536, c);
  ASSERT_FALSE(r.ranked.empty());
  const PlanCost& best = r.all[r.ranked[0]];
  EXPECT_LE(best.config.shape.tp, 8);
  EXPECT_FALSE(best.placement.tp);
  EXPECT_GT(best.config.shape.pp, 1);  // 175B does not fit without a pipeline or ZeRO-3...
  EXPECT_LT(best.memory, 80e9);
  bool tp16 = false;
  for (const Alternative& a : alternatives(r, c))
    if (a.label == "tp = 16") {
      tp16 = true;
      EXPECT_TRUE(a.fits);
      EXPECT_NE(a.reason.find("tp = 16 spans nodes"), std::string::npos) << a.reason;
      EXPECT_NE(a.reason.find("inter-node link"), std::string::npos) << a.reason;
    }
  EXPECT_TRUE(tp16);
}

TEST(Search, FewerGpusWhenNoConfigurationOfAllIsValid) {
  // H = 1 forbids tp = 2, L = 1 forbids pp = 2, B = 1 forbids dp = 2: only one GPU is usable.
  ModelSpec m = toy();
  m.H = 1, m.L = 1;
  Cluster c;
  c.gpus_per_node = 2, c.nodes = 1;
  const SearchResult r = search(m, 1, c);
  EXPECT_EQ(r.gpus, 1);
  EXPECT_NE(r.note.find("use 1"), std::string::npos) << r.note;
}

TEST(Search, NothingFitsIsExplainedByMemory) {
  Cluster c;
  c.gpus_per_node = 1, c.nodes = 1, c.memory = 1000;  // toy needs 11264 bytes in fp32 (by hand)
  SearchOptions o;
  o.mixed = false;
  const SearchResult r = search(toy(), 2, c, o);
  EXPECT_TRUE(r.ranked.empty());
  EXPECT_FALSE(r.all.empty());
  EXPECT_TRUE(alternatives(r, c).empty());
}

}  // namespace
}  // namespace llmp::plan
