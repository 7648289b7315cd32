// A padded vocabulary (GPTConfig::vocab_divisible_by, Megatron-LM's --make-vocab-size-divisible-by)
// is a layout, not another model: wte gets zero rows up to Vp, every real parameter keeps its
// unpadded initialisation, the pad columns of the logits are masked, so the loss and every real
// gradient are the unpadded model's and the pad rows' gradients are exactly zero; tensor
// parallelism then splits a vocabulary t does not divide.
//
// Glossary: V vocabulary, Vp padded vocabulary, C channels, t tensor-parallel ranks, Ψ parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/nn/random_ids.h"
#include "common/nn/unit_runner.h"
#include "common/testing/max_or_nan.h"

namespace llmp {
namespace {

constexpr int kV = 267, kMultiple = 16, kVp = 272;  // 5 pad rows

GPTConfig tiny(int divisible_by) {
  GPTConfig c = GPTConfig::preset("tiny");
  c.vocab = kV;
  c.heads = 4;  // t = 4 divides it
  c.vocab_divisible_by = divisible_by;
  return c;
}

// The padded buffer without wte's pad rows (the first tensor, its rows at its end).
std::vector<float> strip_pad_rows(const std::vector<float>& padded, int C) {
  std::vector<float> out(padded.begin(), padded.begin() + int64_t{kV} * C);
  out.insert(out.end(), padded.begin() + int64_t{kVp} * C, padded.end());
  return out;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = testing::max_or_nan(d, std::fabs(double(a[i]) - b[i]));
    s = testing::max_or_nan(s, std::fabs(double(b[i])));
  }
  return d / s;
}

TEST(VocabPadding, LayoutAddsZeroRowsAndKeepsEveryRealInitialisation) {
  EXPECT_EQ(tiny(kMultiple).padded_vocab(), kVp);
  EXPECT_EQ(tiny(1).padded_vocab(), kV);
  EXPECT_EQ(GPTConfig::preset("gpt2").padded_vocab(), 50257);
  GPTConfig gpt2 = GPTConfig::preset("gpt2");
  gpt2.vocab_divisible_by = 128;
  EXPECT_EQ(gpt2.padded_vocab(), 50304);  // nanoGPT's and llm.c's padded GPT-2

  const GPT padded(tiny(kMultiple)), plain(tiny(1));
  const int C = padded.config().d;
  const ParamSpec& wte = padded.layout().find("wte.weight");
  EXPECT_EQ(wte.shape, (std::vector<int64_t>{kVp, C}));
  EXPECT_EQ(wte.pad_rows, kVp - kV);
  EXPECT_EQ(padded.vocab_rows(), kVp);
  EXPECT_EQ(padded.vocab_pad_rows(), kVp - kV);
  EXPECT_EQ(padded.layout().num_params(), plain.layout().num_params() + int64_t{kVp - kV} * C);
  for (const ParamSpec& p : padded.layout().params()) {
    if (p.name != "wte.weight") {
      EXPECT_EQ(p.pad_rows, 0) << p.name;
    }
  }

  std::vector<float> pp(padded.layout().num_params(), 7.0f), up(plain.layout().num_params());
  padded.init_params(pp.data(), 99);
  plain.init_params(up.data(), 99);
  for (int64_t i = int64_t{kV} * C; i < int64_t{kVp} * C; ++i) ASSERT_EQ(pp[i], 0.0f) << i;
  EXPECT_EQ(strip_pad_rows(pp, C), up);  // wpe and every block too: their draws did not move
}

TEST(VocabPadding, LossAndRealGradientsAreTheUnpaddedModelsAndPadGradientsAreZero) {
  const GPT padded(tiny(kMultiple)), plain(tiny(1));
  const int C = padded.config().d, B = 2, T = 16;
  std::vector<float> pp(padded.layout().num_params()), up(plain.layout().num_params());
  padded.init_params(pp.data(), 5);
  plain.init_params(up.data(), 5);
  std::vector<int32_t> tok = random_ids(B * T, 1, kV), tgt = random_ids(B * T, 2, kV);
  tgt[3] = kV - 1;  // the last real token, next to the pad columns
  std::vector<float> pg(pp.size(), 0.0f), ug(up.size(), 0.0f);
  const float scale = 1.0f / (B * T);
  const double lp = forward_backward(padded, pp.data(), pg.data(), tok.data(), tgt.data(), B, T,
                                     scale);
  const double lu = forward_backward(plain, up.data(), ug.data(), tok.data(), tgt.data(), B, T,
                                     scale);
  // The same products, only wider (Eigen may block the sums otherwise): fp32 rounding.
  const double grad_rel = max_rel_diff(strip_pad_rows(pg, C), ug);
  std::printf("loss %.9g padded, %.9g unpadded; gradients max rel diff %.3g\n", lp, lu, grad_rel);
  EXPECT_NEAR(lp, lu, 1e-6 * lu);
  EXPECT_LT(grad_rel, 1e-5);
  for (int64_t i = int64_t{kV} * C; i < int64_t{kVp} * C; ++i)
    ASSERT_EQ(pg[i], 0.0f) << "pad row " << i / C << " has a gradient";
}

TEST(VocabPadding, TensorParallelismSplitsAVocabularyItDoesNotDivide) {
  try {  // 267 = 3·89: t = 2 cannot split it, and the error says what to do
    GPTLayout unpadded(tiny(1), 2, 0);
    FAIL() << "t = 2 split V = 267";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--make_vocab_size_divisible_by 2"), std::string::npos)
        << e.what();
  }
  // Vp = 272 = 2·136: rank 0 holds rows [0, 136), all real; rank 1 rows [136, 272), the last 5
  // of them padding. With t = 4 (68 rows each) only the last rank has pad rows.
  EXPECT_EQ(GPTLayout(tiny(kMultiple), 2, 0).find("wte.weight").pad_rows, 0);
  EXPECT_EQ(GPTLayout(tiny(kMultiple), 2, 1).find("wte.weight").pad_rows, 5);
  EXPECT_EQ(GPTLayout(tiny(kMultiple), 2, 1).find("wte.weight").shape[0], 136);
  EXPECT_EQ(GPTLayout(tiny(kMultiple), 4, 2).find("wte.weight").pad_rows, 0);
  EXPECT_EQ(GPTLayout(tiny(kMultiple), 4, 3).find("wte.weight").pad_rows, 5);
  // A pad wider than a rank's rows: V = 260 to a multiple of 80 is 320, t = 4 holds 80 each,
  // rank 3's rows [240, 320) are 20 real and 60 pad.
  GPTConfig wide = tiny(80);
  wide.vocab = 260;
  EXPECT_EQ(GPTLayout(wide, 4, 3).find("wte.weight").pad_rows, 60);
  GPTConfig zero = tiny(0);
  EXPECT_THROW(GPTLayout{zero}, std::invalid_argument);
}

}  // namespace
}  // namespace llmp
