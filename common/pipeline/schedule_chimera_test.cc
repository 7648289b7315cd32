// Chimera's schedule as data (Li & Hoefler 2021, "Chimera: Efficiently Training Large-Scale
// Neural Networks with Bidirectional Pipelines", §3), single process: the timeline of
// stages/chimera/chimera.h drawn by hand and compared action by action, the split of the
// micro-batches between the two pipelines, the Placement (stage s of the down pipeline on rank
// s, of the up pipeline on rank p-1-s), the message tags, the bubble against the paper's closed
// form, the errors, and the GPTPartition of the replica pairs.
//
// Closed forms asserted (unit costs F = B = 1, the paper's one slot per op):
//   makespan T = 2m + p - 2 slots (each rank computes 2m slots: m/2 forwards and m/2
//   backwards in each of its two stages, and idles p - 2 slots), so
//   bubble fraction = Σ_r (T - 2m) / (p·T) = (p-2)/(2m+p-2).
//
// Glossary: p pipeline stages (ranks, even), m micro-batches (a multiple of p), F forward,
// B backward (upper case: down pipeline, chunk 0; lower case: up pipeline, chunk 1), L layers,
// Ψ parameters, slot one unit of compute.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/nn/gpt.h"
#include "common/pipeline/gpt_partition.h"
#include "common/pipeline/schedule.h"
#include "common/pipeline/simulator.h"
#include "common/testing/files.h"

namespace llmp {
namespace {

using testing::error_of;

// Rank r's row of the unit-cost timeline: one cell per slot, "." where it idles.
std::string slot_row(const Schedule& s, const SimResult& sim, int r) {
  std::vector<std::string> cells(static_cast<size_t>(std::lround(sim.makespan)), ".");
  for (size_t i = 0; i < s.ranks[r].size(); ++i) {
    const Action& a = s.ranks[r][i];
    if (!is_compute(a.op)) continue;
    cells.at(static_cast<size_t>(std::lround(sim.start[r][i]))) = action_label(a, s.v);
  }
  std::string out;
  for (const std::string& c : cells) out += (out.empty() ? "" : " ") + c;
  return out;
}

TEST(ChimeraSchedule, HandDrawnTimelineP4M4) {
  // Li & Hoefler Fig. 3 (p = 4, m = 4), worked by hand with the list-schedule rules of
  // schedule_chimera.cc (backward first, then the deeper forward, then the lower micro-batch):
  // micro-batches 0, 1 go down (rank 0 -> 3), 2, 3 up (rank 3 -> 0). Rank 0 starts F0 at once
  // (down stage 0), rank 3 f2 (up stage 0); each rank idles exactly p - 2 = 2 slots.
  const Schedule s = chimera(4, 4);
  const SimResult sim = simulate(s);  // F = B = 1
  EXPECT_EQ(slot_row(s, sim, 0), "F0 F1 . f2 b2 f3 b3 B0 . B1");
  EXPECT_EQ(slot_row(s, sim, 1), ". F0 f2 F1 f3 b2 B0 b3 B1 .");
  EXPECT_EQ(slot_row(s, sim, 2), ". f2 F0 f3 F1 B0 b2 B1 b3 .");
  EXPECT_EQ(slot_row(s, sim, 3), "f2 f3 . F0 B0 F1 B1 b2 . b3");
  EXPECT_DOUBLE_EQ(sim.makespan, 10.0);  // 2m + p - 2
  // The communication around each compute. Rank 0 holds the FIRST stage of the down pipeline
  // (F: no recv_forward; B: no send_backward) and the LAST of the up pipeline (f: no
  // send_forward; b: no recv_backward, it starts from the loss). Rank 1 holds two middle
  // stages: every compute has its recv before and its send after. (".c": the chunk.)
  EXPECT_EQ(to_string(s).substr(0, to_string(s).find("rank 2:")),
            "chimera p=4 m=4 v=2\n"
            "rank 0: F0 sf0.0 F1 sf1.0 rf2.1 f2 b2 sb2.1 rf3.1 f3 b3 sb3.1 rb0.0 B0 rb1.0 B1\n"
            "rank 1: rf0.0 F0 sf0.0 rf2.1 f2 sf2.1 rf1.0 F1 sf1.0 rf3.1 f3 sf3.1 rb2.1 b2 sb2.1 "
            "rb0.0 B0 sb0.0 rb3.1 b3 sb3.1 rb1.0 B1 sb1.0\n");
}

TEST(ChimeraSchedule, HandDrawnTimelineP2M4) {
  // p = 2: rank 0 holds down stage 0 and up stage 1, rank 1 down stage 1 and up stage 0, i.e.
  // each rank the whole model twice. Units of p = 2: micro-batches 0, 2 go down, 1, 3 up. No
  // rank ever waits (p - 2 = 0 idle slots): makespan 2m = 8.
  const Schedule s = chimera(2, 4);
  const SimResult sim = simulate(s);
  EXPECT_EQ(slot_row(s, sim, 0), "F0 f1 b1 B0 F2 f3 b3 B2");
  EXPECT_EQ(slot_row(s, sim, 1), "f1 F0 B0 b1 f3 F2 B2 b3");
  EXPECT_DOUBLE_EQ(sim.makespan, 8.0);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 0.0);
}

TEST(ChimeraSchedule, BubbleIsPMinusTwoOverTwoMPlusPMinusTwo) {
  for (int p : {2, 4, 6, 8}) {
    for (int m : {p, 2 * p, 3 * p, 4 * p}) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      const SimResult r = simulate(chimera(p, m));  // unit costs F = B = 1
      const double T = 2.0 * m + p - 2.0;
      EXPECT_DOUBLE_EQ(r.makespan, T);
      for (int q = 0; q < p; ++q) EXPECT_DOUBLE_EQ(r.busy[q], 2.0 * m) << "rank " << q;
      EXPECT_NEAR(r.bubble_fraction, (p - 2.0) / T, 1e-12);
    }
  }
}

TEST(ChimeraSchedule, MicroBatchesInFlight) {
  // One unit (m = p): rank r is down stage r, which holds min(p-r, p/2) of the p/2 down
  // micro-batches at its peak as in 1F1B, and up stage p-1-r, holding min(r+1, p/2) of the up
  // ones, and both peaks fall together (p = 4: 2+1, 2+2, 2+2, 1+2 = 3, 4, 4, 3; chimera_test's
  // table): between p/2+1 and p, the paper's range (Table 2). From two units on (m >= 2p), the
  // next unit's forwards fill the junction and every rank holds p (1F1B's rank r: p-r).
  for (int p : {2, 4, 6, 8}) {
    for (int k : {1, 2, 3, 4}) {
      const SimResult r = simulate(chimera(p, k * p));
      for (int q = 0; q < p; ++q) {
        const int want = k == 1 ? std::min(p - q, p / 2) + std::min(q + 1, p / 2) : p;
        EXPECT_EQ(r.peak_in_flight[q], want) << "p=" << p << " m=" << k * p << " rank " << q;
      }
    }
  }
}

TEST(ChimeraSchedule, HalfOfEachUnitGoesDownHalfUp) {
  const Schedule s = chimera(4, 8);
  EXPECT_EQ(s.pipelines, 2);
  EXPECT_EQ(s.v, 2);
  EXPECT_EQ(s.microbatch_pipeline, (std::vector<int>{0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(chimera(4, 4).microbatch_pipeline, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(chimera(6, 6).microbatch_pipeline, (std::vector<int>{0, 0, 0, 1, 1, 1}));
  // Every micro-batch runs through exactly one chunk of every rank: the chunk of its pipeline.
  for (int r = 0; r < s.p; ++r)
    for (const Action& a : s.ranks[r])
      EXPECT_EQ(a.chunk, s.microbatch_pipeline[a.microbatch]) << "rank " << r << " " << to_string(a);
  EXPECT_TRUE(s.runs_through(0, 0));
  EXPECT_FALSE(s.runs_through(0, 1));
  EXPECT_TRUE(s.runs_through(2, 1));
  EXPECT_FALSE(s.runs_through(2, 0));
}

TEST(ChimeraSchedule, PlacementRoundTrips) {
  for (int p : {2, 4, 6, 8}) {
    const Placement pl{p, 2, 2};
    EXPECT_EQ(pl.num_stages(), p);
    EXPECT_EQ(pl.chunks_per_microbatch(), 1);
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(pl.stage(r, 0), r) << "down: stage s on rank s";
      EXPECT_EQ(pl.stage(r, 1), p - 1 - r) << "up: stage s on rank p-1-s";
      for (int c = 0; c < 2; ++c) {
        const StageRef w = pl.where(pl.stage(r, c), pl.pipeline_of(c));
        EXPECT_EQ(w.rank, r) << "p=" << p << " chunk " << c;
        EXPECT_EQ(w.chunk, c) << "p=" << p << " rank " << r;
      }
    }
    for (int st = 0; st < p; ++st) {
      EXPECT_EQ(pl.where(st, 0).rank, st);
      EXPECT_EQ(pl.where(st, 1).rank, p - 1 - st);
      EXPECT_EQ(pl.where(st, 1).chunk, 1);
    }
  }
  // Peers: rank 1's up stage (2) sends forward to up stage 3 on rank 0, backward to rank 2.
  const Schedule s = chimera(4, 4);
  EXPECT_EQ(s.peer(1, {Op::kSendForward, 2, 1}).rank, 0);
  EXPECT_EQ(s.peer(1, {Op::kSendBackward, 2, 1}).rank, 2);
  EXPECT_EQ(s.peer(1, {Op::kSendForward, 0, 0}).rank, 2);
  EXPECT_TRUE(s.is_last_stage(0, 1));
  EXPECT_TRUE(s.is_first_stage(3, 1));
}

TEST(ChimeraSchedule, MessageTagsAreUniqueAndAgree) {
  for (int p : {2, 4, 8}) {
    const Schedule s = chimera(p, 2 * p);
    // (sender, receiver, tag) of every send, and the same key for every recv: they must match
    // one to one, and no two sends may share a tag (the tag alone tells the messages apart).
    std::multiset<std::tuple<int, int, int>> sends, recvs;
    std::set<int> tags;
    int n_sends = 0;
    for (int r = 0; r < p; ++r) {
      for (const Action& a : s.ranks[r]) {
        if (is_compute(a.op)) continue;
        const int peer = s.peer(r, a).rank, tag = s.message_tag(r, a);
        EXPECT_GE(tag, 0);
        EXPECT_LT(tag, 2 * p * s.v * s.m);
        if (a.op == Op::kSendForward || a.op == Op::kSendBackward) {
          sends.insert({r, peer, tag}), tags.insert(tag), ++n_sends;
        } else {
          recvs.insert({peer, r, tag});
        }
      }
    }
    EXPECT_EQ(sends, recvs) << "p=" << p;
    EXPECT_EQ(static_cast<int>(tags.size()), n_sends) << "p=" << p;
    // Each micro-batch crosses p-1 stage boundaries forward and p-1 backward.
    EXPECT_EQ(n_sends, 2 * (p - 1) * s.m) << "p=" << p;
  }
}

TEST(ChimeraSchedule, ErrorsNameTheValues) {
  EXPECT_EQ(error_of([] { chimera(3, 6); }),
            "chimera needs an even p and m % p == 0 (units of p micro-batches, half per "
            "direction); got m=6, p=3");
  EXPECT_EQ(error_of([] { chimera(4, 6); }),
            "chimera needs an even p and m % p == 0 (units of p micro-batches, half per "
            "direction); got m=6, p=4");
  EXPECT_EQ(error_of([] { make_schedule("chimera", 4, 2); }),
            "chimera needs an even p and m % p == 0 (units of p micro-batches, half per "
            "direction); got m=2, p=4");
  EXPECT_EQ(error_of([] { check_layers_divisible(6, 4, 2, 2); }),
            "layers 6 not divisible by p = 4 stages per pipeline (chimera)");
  EXPECT_EQ(error_of([] { check_layers_divisible(8, 4, 2, 2); }), "");
  EXPECT_EQ(error_of([] { chimera(4, 8); }), "");
}

TEST(ChimeraPartition, ReplicaPairsHoldTheSameSegments) {
  GPTConfig cfg = GPTConfig::preset("tiny");
  cfg.layers = 8;
  const GPT model(cfg);
  const GPTLayout& lay = model.layout();
  const int64_t emb = lay.unit_numel(0), blk = lay.unit_numel(1), lnf = lay.unit_numel(9);
  for (int p : {2, 4}) {
    const GPTPartition part(lay, 8, p, 2, 2);
    EXPECT_EQ(part.blocks_per_stage(), 8 / p);
    for (int r = 0; r < p; ++r) {
      const std::vector<ParamSegment>& a = part.segments(r);
      const std::vector<ParamSegment>& b = part.segments(p - 1 - r);
      ASSERT_EQ(a.size(), b.size()) << "p=" << p << " rank " << r;
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].global_offset, b[i].global_offset) << "p=" << p << " rank " << r;
        EXPECT_EQ(a[i].numel, b[i].numel) << "p=" << p << " rank " << r;
        EXPECT_EQ(a[i].local_offset, b[i].local_offset) << "p=" << p << " rank " << r;
        EXPECT_FALSE(a[i].wte_copy) << "p=" << p << " rank " << r;
      }
      EXPECT_EQ(part.local_numel(r), part.local_numel(p - 1 - r));
    }
  }
  // p = 4 by hand: k = 2 blocks per stage. Rank 0 = stages 0 (units 0,1,2) and 3 (units
  // 7,8,9), in model order; rank 1 = stages 1 (units 3,4) and 2 (units 5,6). No wte copy:
  // rank 0 (and 3) hold wte in unit 0 next to the head.
  const GPTPartition part(lay, 8, 4, 2, 2);
  const std::vector<ParamSegment>& r0 = part.segments(0);
  ASSERT_EQ(r0.size(), 2u);
  EXPECT_EQ(r0[0].global_offset, 0);
  EXPECT_EQ(r0[0].numel, emb + 2 * blk);
  EXPECT_EQ(r0[0].chunk, 0);
  EXPECT_EQ(r0[1].global_offset, emb + 6 * blk);
  EXPECT_EQ(r0[1].numel, 2 * blk + lnf);
  EXPECT_EQ(r0[1].local_offset, emb + 2 * blk);
  EXPECT_EQ(r0[1].chunk, 1);
  EXPECT_EQ(part.local_numel(0), emb + 4 * blk + lnf);
  EXPECT_EQ(part.wte_local_offset(0), 0);
  const std::vector<ParamSegment>& r3 = part.segments(3);
  EXPECT_EQ(r3[0].chunk, 1);  // rank 3's up chunk is stage 0: first in model order
  EXPECT_EQ(r3[1].chunk, 0);
  const std::vector<ParamSegment>& r1 = part.segments(1);
  ASSERT_EQ(r1.size(), 2u);
  EXPECT_EQ(r1[0].global_offset, emb + 2 * blk);
  EXPECT_EQ(r1[1].global_offset, emb + 4 * blk);
  EXPECT_EQ(part.local_numel(1), 4 * blk);
  EXPECT_EQ(part.wte_local_offset(1), -1);
  // Errors: the layers are cut into p stages per pipeline; v must be 2.
  EXPECT_EQ(GPTPartition::check(6, 4, 2, 2), "layers 6 not divisible by p = 4 stages per pipeline (chimera)");
  EXPECT_EQ(GPTPartition::check(8, 4, 1, 2),
            "chimera holds two chunks per rank (one per pipeline); got v = 1");
}

}  // namespace
}  // namespace llmp
