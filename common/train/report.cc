// print_report (see report.h): every rank's report rows gathered on a duplicate of the group
// (bookkeeping, not counted in its CommStats) and printed by rank 0 as one table.
//
// Glossary: N ranks, n rows per rank, Ψ parameter count.
#include "common/train/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/tensor/memory.h"

namespace llmp {

namespace {
// Pads to `width` terminal columns: counts UTF-8 code points, not bytes (Ψ is two bytes).
std::string pad(const std::string& s, size_t width) {
  size_t cols = 0;
  for (unsigned char c : s) cols += (c & 0xC0) != 0x80;
  return s + std::string(cols < width ? width - cols : 1, ' ');
}
}  // namespace

bool report_row_ok(const ReportRow& row) {
  return std::fabs(row.measured - row.formula) <= 1e-9 * std::max(1.0, std::fabs(row.formula));
}

namespace {
// Rank 0's part of print_report: `all` holds every rank's (measured, formula) pairs, rank-major.
void print_table(const std::string& stage, int N, int64_t psi, const std::vector<ReportRow>& rows,
                 const std::vector<double>& all) {
  const int n = static_cast<int>(rows.size());
  std::printf("\n%s: per-rank memory and communication, measured (formula), N = %d, Ψ = %lld\n",
              stage.c_str(), N, static_cast<long long>(psi));
  std::printf("%s%s", pad("", 30).c_str(), pad("formula", 34).c_str());
  for (int r = 0; r < N; ++r) std::printf("%s", pad("rank " + std::to_string(r), 25).c_str());
  std::printf(" check\n");
  for (int i = 0; i < n; ++i) {
    std::printf("%s%s", pad(rows[i].what, 30).c_str(), pad(rows[i].formula_text, 34).c_str());
    bool ok = true;
    for (int r = 0; r < N; ++r) {
      const ReportRow row{rows[i].what, all[2 * n * r + 2 * i], all[2 * n * r + 2 * i + 1], ""};
      ok = ok && report_row_ok(row);
      auto fmt = [&](double v) {  // bytes, a count of FLOPs in millions, or a count of calls
        char buf[32];
        if (rows[i].count) {
          std::snprintf(buf, sizeof buf, "%.0f calls", v);
          return std::string(buf);
        }
        if (!rows[i].flops) return format_bytes(v);
        std::snprintf(buf, sizeof buf, "%.2f MFLOP", v / 1e6);
        return std::string(buf);
      };
      const std::string cell = fmt(row.measured) + " (" + fmt(row.formula) + ")";
      std::printf("%s", pad(cell, 25).c_str());
    }
    std::printf("%s\n", ok ? "ok" : "DIFFERS");
  }
  std::printf("(exact bytes: ");
  for (int i = 0; i < n; ++i)
    std::printf("%s%s %.0f", i ? ", " : "", rows[i].what.c_str(), all[2 * i]);
  std::printf(" on rank 0)\n");
  std::fflush(stdout);
}
}  // namespace

void print_device_memory(Device device) {
  const auto& mt = MemoryTracker::instance();
  std::printf("memory of rank 0 by device (MemoryTracker): %s now, peak %s on %s; %s now, peak %s "
              "on the host\n",
              format_bytes(mt.current_total(device)).c_str(),
              format_bytes(mt.peak_total(device)).c_str(), to_string(device),
              format_bytes(mt.current_total(Device::kCPU)).c_str(),
              format_bytes(mt.peak_total(Device::kCPU)).c_str());
  std::fflush(stdout);
}

void print_report(ProcessGroup& group, const std::string& stage, int64_t psi,
                  const std::vector<ReportRow>& rows) {
  const int N = group.size(), n = static_cast<int>(rows.size());
  // Bookkeeping traffic: on a duplicate of the group, so never in the group's CommStats.
  std::shared_ptr<ProcessGroup> book = group.duplicate();
  Tensor mine = Tensor::empty({2 * n}, DType::kF64), all = Tensor::empty({2 * n * N}, DType::kF64);
  for (int i = 0; i < n; ++i)
    mine.f64()[2 * i] = rows[i].measured, mine.f64()[2 * i + 1] = rows[i].formula;
  book->all_gather(mine, all);  // every rank's pairs, rank-major (rank 0 prints them)
  if (group.rank() == 0)
    print_table(stage, N, psi, rows, std::vector<double>(all.f64(), all.f64() + 2 * n * N));
  // No rank returns before the table is out, so that what ranks print next (Strategy::finish)
  // does not land inside it.
  book->barrier();
}

}  // namespace llmp
