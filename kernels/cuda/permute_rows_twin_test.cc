// GPU twin of kernels/cpu/permute_rows (a mixture of experts' token permutations): the four
// patterns of the MoE sub-layer (common/nn/moe.cc: the dispatch D[slot] = ln2[t], the combine
// Yg[a] = Yd[slot], their backwards dYd[slot] = dYg[a] and dDg[j][t] = dD[slot]) on slots with
// drops, against the CPU twin, byte for byte (bound 0: a copy). Rows of 4-byte words (fp32),
// 2-byte ones (bf16 with an odd C: the kernel's uint16_t path) and single bytes (an odd row
// length), so each word width the kernel picks is run.
//
// Shapes: n = 37 tokens, k = 2, a dispatch buffer of E = 4 experts × cap = 11 slots (44 rows for
// 74 assignments: some dropped, −1).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/permute_rows.h"
#include "kernels/cuda/permute_rows.h"
#include "kernels/cuda/twin_test_util.h"

namespace llmp {
namespace {

using PermuteRowsTwin = test::GpuTwin;

constexpr int kN = 37, kK = 2, kSlots = 44;

// Each assignment's slot: the first kSlots assignments in a scrambled order get one each, the rest
// are dropped (−1); distinct slots, as the routing's capacity makes them.
std::vector<int32_t> slots() {
  std::vector<int32_t> s(kN * kK, -1);
  for (int i = 0; i < kSlots; ++i) s[(i * 29 + 5) % (kN * kK)] = (i * 17 + 3) % kSlots;
  return s;
}

struct Pattern {
  const char* name;
  int64_t row_j, row_t;
  bool to_slots;
  int64_t src_rows, dst_rows;
};

TEST_F(PermuteRowsTwin, EveryPatternOfTheMoeSubLayerMatchesTheCpuByteForByte) {
  const std::vector<int32_t> s = slots();
  int dropped = 0;
  for (int32_t v : s) dropped += v < 0;
  ASSERT_EQ(dropped, kN * kK - kSlots);
  const Pattern patterns[] = {
      {"dispatch D[slot] = ln2[t]", 0, 1, true, kN, kSlots},
      {"combine Yg[a] = Yd[slot]", 1, kK, false, kSlots, kN * kK},
      {"combine backward dYd[slot] = dYg[a]", 1, kK, true, kN * kK, kSlots},
      {"dispatch backward dDg[j][t] = dD[slot]", kN, 1, false, kSlots, kN * kK},
  };
  test::Dev<int32_t> s_d(s);
  for (const int64_t row_bytes : {int64_t{4} * 48, int64_t{2} * 45, int64_t{45}}) {
    for (const Pattern& p : patterns) {
      std::vector<uint8_t> src(p.src_rows * row_bytes), want(p.dst_rows * row_bytes, 0);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 13 + i / 97);
      cpu::permute_rows(want.data(), src.data(), s.data(), kN, kK, p.row_j, p.row_t, p.to_slots,
                        row_bytes);
      test::Dev<uint8_t> src_d(src), dst_d(std::vector<uint8_t>(want.size(), 0));
      cuda::permute_rows(dst_d.p, src_d.p, s_d.p, kN, kK, p.row_j, p.row_t, p.to_slots,
                         row_bytes);
      const std::vector<uint8_t> got = dst_d.get();
      int64_t wrong = 0;
      for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
      EXPECT_EQ(wrong, 0) << p.name << ", rows of " << row_bytes << " bytes: of " << got.size();
      int64_t written = 0;  // the CPU twin itself moved the kept rows (not a vacuous zero match)
      for (uint8_t b : want) written += b != 0;
      EXPECT_GT(written, 0) << p.name;
    }
  }
}

}  // namespace
}  // namespace llmp
