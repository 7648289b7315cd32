// The end-of-run report against what was recorded: memory_rows' measured column is the
// MemoryTracker's count (not the plan it is printed next to), and print_report's table shows
// every rank's measured value next to the formula, with "DIFFERS" where they disagree. The
// stage tests check each stage's report() rows the same way (tests/stage_test_util.h,
// expect_report_is_measured). Run on 1 and 3 ranks (mpi_test in BUILD).
//
// Glossary: N ranks, r this rank.
#include "common/train/report.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/tensor/memory.h"
#include "common/tensor/tensor.h"
#include "common/train/dp_util.h"

namespace llmp {
namespace {

ProcessGroup& world() {
  static const std::shared_ptr<ProcessGroup> w = ProcessGroup::world();
  return *w;
}

// measured 4096·(r + 2) on rank r ("8.00 KiB", "12.00 KiB", ...), formula 4096 ("4.00 KiB").
double measured_on(int r) { return 4096.0 * (r + 2); }

TEST(Report, MemoryRowsMeasureTheTrackerNotThePlan) {
  auto& mt = MemoryTracker::instance();
  const int64_t p0 = mt.current(MemCategory::kParameters), g0 = mt.current(MemCategory::kGradients),
                o0 = mt.current(MemCategory::kOptimizerState);
  const Tensor p = Tensor::zeros({100}, DType::kF32, MemCategory::kParameters);
  const Tensor g = Tensor::zeros({50}, DType::kF32, MemCategory::kGradients);
  const Tensor o = Tensor::zeros({30}, DType::kF32, MemCategory::kOptimizerState);
  MemoryPlan plan;
  plan.params = 1, plan.grads = 2, plan.optimizer = 3;  // nothing like the truth
  const std::vector<ReportRow> rows = memory_rows(plan, "4Ψ", "4Ψ", "8Ψ");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].what, "parameters");
  EXPECT_EQ(rows[0].measured, p0 + 400.0);
  EXPECT_EQ(rows[1].measured, g0 + 200.0);
  EXPECT_EQ(rows[2].measured, o0 + 120.0);
  EXPECT_EQ(rows[0].formula, 1.0);
  EXPECT_EQ(rows[1].formula, 2.0);
  EXPECT_EQ(rows[2].formula, 3.0);
  EXPECT_FALSE(report_row_ok(rows[0]));
}

TEST(Report, RowOkWithinRoundingOnly) {
  EXPECT_TRUE(report_row_ok({"x", 1e12, 1e12 + 100, ""}));  // 1e-10 relative
  EXPECT_FALSE(report_row_ok({"x", 1e12, 1e12 + 1e4, ""}));
  EXPECT_TRUE(report_row_ok({"x", 0, 1e-10, ""}));
  EXPECT_FALSE(report_row_ok({"x", 4096, 4097, ""}));
}

TEST(Report, TablePrintsEveryRanksMeasuredValueNextToTheFormula) {
  ProcessGroup& w = world();
  const int N = w.size(), r = w.rank();
  const std::vector<ReportRow> rows = {
      {"parameters", measured_on(r), 4096, "4Ψ"},
      {"sent per step", 2048, 2048, "2(N-1)/N·4Ψ"},
  };
  const double bytes0 = w.stats().total_bytes();
  if (r == 0) ::testing::internal::CaptureStdout();
  print_report(w, "report_test", 1024, rows);
  const std::string out = r == 0 ? ::testing::internal::GetCapturedStdout() : "";
  EXPECT_EQ(w.stats().total_bytes(), bytes0) << "the report's gathering is bookkeeping";
  if (r != 0) return;
  std::printf("%s", out.c_str());
  EXPECT_NE(out.find("report_test: per-rank memory and communication"), std::string::npos);
  for (int q = 0; q < N; ++q) {
    const std::string cell = format_bytes(measured_on(q)) + " (" + format_bytes(4096) + ")";
    EXPECT_NE(out.find(cell), std::string::npos) << "rank " << q << "'s cell " << cell;
    EXPECT_NE(out.find("rank " + std::to_string(q)), std::string::npos);
  }
  const std::string sent = format_bytes(2048) + " (" + format_bytes(2048) + ")";
  EXPECT_NE(out.find(sent), std::string::npos);
  // One line per row: the parameters row differs, the sent row agrees.
  const size_t params_line = out.find("\nparameters"), sent_line = out.find("\nsent per step");
  ASSERT_NE(params_line, std::string::npos);
  ASSERT_NE(sent_line, std::string::npos);
  auto line_at = [&out](size_t at) { return out.substr(at, out.find('\n', at + 1) - at); };
  const std::string params_row = line_at(params_line), sent_row = line_at(sent_line);
  EXPECT_NE(params_row.find("DIFFERS"), std::string::npos) << params_row;
  EXPECT_NE(sent_row.find(" ok"), std::string::npos) << sent_row;
  EXPECT_EQ(sent_row.find("DIFFERS"), std::string::npos) << sent_row;
  EXPECT_NE(out.find("parameters " + std::to_string(static_cast<long long>(measured_on(0)))),
            std::string::npos)
      << "the exact bytes line shows rank 0's measured value";
}

}  // namespace
}  // namespace llmp
