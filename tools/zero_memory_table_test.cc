// Checks the figures zero_memory prints against the ZeRO paper's Table 1 (Ψ = 7.5B, K = 12).
#include "tools/zero_memory_table.h"

#include <gtest/gtest.h>

namespace llmp {
namespace {

// The column of N_d in the table, as printed.
std::vector<std::string> column(const ZeroMemoryTable& t, int n) {
  const size_t i = std::find(t.ranks.begin(), t.ranks.end(), n) - t.ranks.begin();
  std::vector<std::string> out;
  for (const ZeroMemoryRow& r : t.rows) out.push_back(format_3sig(r.gb.at(i)));
  return out;
}

TEST(ZeroMemoryTable, ReproducesTable1) {
  const ZeroMemoryTable t = zero_memory_table(7.5e9, 64, Precision::mixed_adam());
  EXPECT_EQ(t.ranks, (std::vector<int>{1, 4, 16, 64, 256, 1024}));
  using V = std::vector<std::string>;
  EXPECT_EQ(column(t, 1), (V{"120", "120", "120", "120"}));
  EXPECT_EQ(column(t, 4), (V{"120", "52.5", "41.3", "30"}));
  EXPECT_EQ(column(t, 16), (V{"120", "35.6", "21.6", "7.5"}));
  EXPECT_EQ(column(t, 64), (V{"120", "31.4", "16.6", "1.88"}));
  EXPECT_EQ(column(t, 256), (V{"120", "30.4", "15.4", "0.469"}));
  EXPECT_EQ(column(t, 1024), (V{"120", "30.1", "15.1", "0.117"}));
}

TEST(ZeroMemoryTable, RenderShowsTheHighlightedColumn) {
  const std::string s = render(zero_memory_table(7.5e9, 64, Precision::mixed_adam()));
  for (const char* want : {"N_d = 64:", "120 GB", "31.4 GB", "16.6 GB", "1.88 GB", "*64", "52.5",
                           "41.3", "0.117", "K = 12"})
    EXPECT_NE(s.find(want), std::string::npos) << want << " missing from\n" << s;
  const std::string s4 = render(zero_memory_table(7.5e9, 4, Precision::mixed_adam()));
  for (const char* want : {"N_d = 4:", "52.5 GB", "41.3 GB", "30 GB", "*4"})
    EXPECT_NE(s4.find(want), std::string::npos) << want << " missing from\n" << s4;
}

TEST(ZeroMemoryTable, ExtraColumnAndFp32) {
  // N_d = 8 is not a paper column: it is inserted in order. fp32 (p = g = 4, K = 8), Ψ = 1e9:
  // baseline 16 GB, ZeRO-1 8 + 1 = 9, ZeRO-2 4 + 12/8 = 5.5, ZeRO-3 16/8 = 2.
  const ZeroMemoryTable t = zero_memory_table(1e9, 8, Precision::fp32());
  EXPECT_EQ(t.ranks, (std::vector<int>{1, 4, 8, 16, 64, 256, 1024}));
  EXPECT_EQ(column(t, 8), (std::vector<std::string>{"16", "9", "5.5", "2"}));
  EXPECT_EQ(t.rows[0].formula, "(4+4+K)Ψ");
}

TEST(ZeroMemoryTable, FormatsLikeThePaper) {
  EXPECT_EQ(format_3sig(120), "120");
  EXPECT_EQ(format_3sig(41.25), "41.3");  // halves round up, not to even
  EXPECT_EQ(format_3sig(1.875), "1.88");
  EXPECT_EQ(format_3sig(30), "30");
  EXPECT_EQ(format_3sig(0.46875), "0.469");
  EXPECT_EQ(format_3sig(99.96), "100");
  EXPECT_EQ(format_3sig(12345), "12345");
}

TEST(ZeroMemoryTable, RejectsBadArguments) {
  EXPECT_EQ(zero_memory_arg_error(7.5e9, 64, 12), "");
  EXPECT_EQ(zero_memory_arg_error(-5, 64, 12),
            "--params must be a positive number of parameters, got -5");
  EXPECT_EQ(zero_memory_arg_error(7.5e9, 0, 12), "--ranks must be >= 1, got 0");
  EXPECT_EQ(zero_memory_arg_error(7.5e9, 4, -1), "--k must be >= 0 bytes per parameter, got -1");
}

}  // namespace
}  // namespace llmp
