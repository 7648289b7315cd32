// Tests of global-norm clipping (grad_clip.h) at 1..4 ranks (mpi_test): the coefficient's formula,
// and the norm of a gradient split over the ranks, on rank-valued parts whose whole norm has a
// closed form. A GradClip that forgets its all_reduce sees only its own part (the classic bug:
// each rank clips by a different, smaller norm) and fails every multi-rank case here.
//
// Glossary: N ranks, r this rank, n_r the elements rank r owns, c the largest norm.
#include "common/optim/grad_clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "common/comm/process_group.h"
#include "kernels/cpu/convert.h"

namespace llmp {
namespace {

Tensor full(int64_t n, float value) {  // n fp32 elements of one value, on the host
  Tensor t = Tensor::empty({n});
  t.fill(value);
  return t;
}

TEST(ClipCoefficient, IsTorchsMinOfOneAndMaxNormOverNormPlusEpsilon) {
  EXPECT_EQ(clip_coefficient(2.0, 1.0), static_cast<float>(1.0 / (2.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0f);       // inside the ball: untouched
  EXPECT_EQ(clip_coefficient(1.0, 1.0), static_cast<float>(1.0 / (1.0 + 1e-6)));  // at the edge
  EXPECT_EQ(clip_coefficient(0.0, 1.0), 1.0f);       // a zero gradient
  EXPECT_EQ(clip_coefficient(1e9, 0.0), 1.0f);       // c = 0: off
  EXPECT_EQ(clip_coefficient(INFINITY, 1.0), 0.0f);  // inf gradients: zeroed, as torch's
  EXPECT_TRUE(std::isnan(clip_coefficient(NAN, 1.0)));
}

TEST(GradClip, OffComputesNothingAndSaysNothing) {
  auto world = ProcessGroup::world();
  GradClip clip(0, world.get());  // off: no duplicate either (a local constructor)
  EXPECT_FALSE(clip.on());
  const Tensor g = full(4, NAN);
  EXPECT_EQ(clip.coefficient({g}), 1.0f);
  EXPECT_TRUE(std::isnan(clip.last_norm()));
  EXPECT_EQ(clip.step_note(), "");
}

TEST(GradClip, RefusesANegativeOrNonFiniteMaxNormByName) {
  for (double bad : {-1.0, static_cast<double>(NAN), static_cast<double>(INFINITY)}) {
    try {
      GradClip clip(bad, nullptr);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--clip_grad"), std::string::npos) << e.what();
    }
  }
}

// Rank r owns two parts: n_r = r + 3 elements of value (r + 1), and 2 elements of value -(r + 1)
// in bf16 (exact). ‖g‖² = Σ_r (r + 1)²·(r + 5).
TEST(GradClip, TheNormIsTheWholeGradientsOverEveryRanksOwnedParts) {
  auto world = ProcessGroup::world();
  const int N = world->size(), r = world->rank();
  double whole = 0;
  for (int q = 0; q < N; ++q) whole += double(q + 1) * (q + 1) * (q + 5);
  const Tensor a = full(r + 3, float(r + 1));
  Tensor b = Tensor::empty({2}, DType::kBF16, MemCategory::kGradients);
  const float minus[2] = {-float(r + 1), -float(r + 1)};
  cpu::round_to(minus, b.raw(), DType::kBF16, 2);

  const double c = 0.25 * std::sqrt(whole);  // clipped: the coefficient is about 1/4
  GradClip clip(c, world.get());
  const float k = clip.coefficient({a, b, Tensor::empty({0})});
  EXPECT_DOUBLE_EQ(clip.last_norm(), std::sqrt(whole)) << "rank " << r << " of " << N;
  EXPECT_EQ(k, static_cast<float>(c / (std::sqrt(whole) + 1e-6)));
  EXPECT_NE(clip.step_note().find("(clipped)"), std::string::npos) << clip.step_note();

  // The same gradient scaled by S = 1024 (fp16's loss scale): the norm of the unscaled one.
  const Tensor as = full(r + 3, float(r + 1) * 1024.0f);
  Tensor bs = Tensor::empty({2}, DType::kBF16, MemCategory::kGradients);
  const float minus_s[2] = {minus[0] * 1024.0f, minus[1] * 1024.0f};
  cpu::round_to(minus_s, bs.raw(), DType::kBF16, 2);
  EXPECT_EQ(clip.coefficient({as, bs}, 1.0f / 1024.0f), k);
  EXPECT_DOUBLE_EQ(clip.last_norm(), std::sqrt(whole));

  // A norm inside the ball: untouched, and the note says the norm without "(clipped)".
  GradClip loose(4 * std::sqrt(whole), world.get());
  EXPECT_EQ(loose.coefficient({a, b}), 1.0f);
  EXPECT_EQ(loose.step_note().find("(clipped)"), std::string::npos) << loose.step_note();
  EXPECT_NE(loose.step_note().find("grad norm"), std::string::npos) << loose.step_note();
  loose.skip();  // fp16's skipped step: no norm to show
  EXPECT_EQ(loose.step_note(), "");
}

TEST(GradClip, WithoutAGroupEachRankCountsItsOwnPartAlone) {
  // A replica (DDP): each rank holds the whole gradient and passes no group.
  auto world = ProcessGroup::world();
  const int r = world->rank();
  GradClip clip(1.0, nullptr);
  const Tensor g = full(r + 1, 2.0f);  // ‖g‖ = 2·√(r + 1)
  clip.coefficient({g});
  EXPECT_DOUBLE_EQ(clip.last_norm(), 2.0 * std::sqrt(r + 1.0));
}

// The owned ranges of a flat buffer: adjacent ones merge into one view (one read-back on a GPU),
// and a ZeRO shard holding elements [from, from + n) gets only their overlap with it, at the
// shard's own offsets.
TEST(OwnedRanges, MergesAdjacentRangesAndCutsThemToAShard) {
  OwnedRanges owned;
  owned.add(0, 4);
  owned.add(4, 2);   // continues [0, 4): merged
  owned.add(10, 0);  // empty: nothing
  owned.add(10, 5);
  ASSERT_EQ(owned.ranges(), (std::vector<std::pair<int64_t, int64_t>>{{0, 6}, {10, 5}}));
  Tensor whole = Tensor::empty({16}, DType::kF32);
  for (int i = 0; i < 16; ++i) whole.f32()[i] = static_cast<float>(i);
  const std::vector<Tensor> all = owned.views(whole);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].numel(), 6);
  EXPECT_EQ(all[1].f32()[0], 10.0f);
  // A shard holding elements [5, 12): the overlaps [5, 6) and [10, 12), at shard offsets 0 and 5.
  Tensor shard = whole.narrow(5, 7);
  const std::vector<Tensor> cut = owned.views(shard, 5);
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_EQ(cut[0].numel(), 1);
  EXPECT_EQ(cut[0].f32()[0], 5.0f);
  EXPECT_EQ(cut[1].numel(), 2);
  EXPECT_EQ(cut[1].f32()[0], 10.0f);
  EXPECT_EQ(cut[1].f32()[1], 11.0f);
  EXPECT_TRUE(owned.views(whole.narrow(6, 4), 6).empty());  // [6, 10): nothing owned there
}

}  // namespace
}  // namespace llmp
