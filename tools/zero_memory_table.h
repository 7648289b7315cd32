// The ZeRO paper's Table 1 for any model size: per-device model-state memory of the baseline
// and the three ZeRO stages over a range of data-parallel degrees N_d.
//
// Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
// Models", Table 1 (Ψ = 7.5B, K = 12, GB = 1e9 bytes):
//
//   N_d                    1      4     16     64    256   1024
//   baseline (2+2+K)Ψ    120    120    120    120    120    120
//   P_os     2Ψ+2Ψ+KΨ/N  120   52.5   35.6   31.4   30.4   30.1
//   P_os+g   2Ψ+(2+K)Ψ/N 120   41.3   21.6   16.6   15.4   15.1
//   P_os+g+p (2+2+K)Ψ/N  120     30    7.5   1.88  0.469  0.117
//
// The formulas are common/plan/memory_planner.h's (plan_memory, unpadded as in the paper); this
// file only lays them out and formats them the way the paper prints them (three significant
// digits, halves rounded up: 41.25 -> 41.3, 1.875 -> 1.88).
//
// Glossary: Ψ parameters, N_d data-parallel degree, K optimizer-state bytes per parameter.
#pragma once

#include <string>
#include <vector>

#include "common/plan/memory_planner.h"

namespace llmp {

/// One row of the table: a stage, its formula, and GB per device for each column.
struct ZeroMemoryRow {
  DPStage stage;
  std::string name;     ///< "baseline", "P_os (ZeRO-1)", ...
  std::string formula;  ///< "(2+2+K)Ψ", ...
  std::vector<double> gb;  ///< one per column, GB = 1e9 bytes
};

struct ZeroMemoryTable {
  double psi = 0;
  Precision prec{};
  std::vector<int> ranks;  ///< the columns, ascending
  int highlight = 0;       ///< the N_d asked for (one of `ranks`)
  std::vector<ZeroMemoryRow> rows;  ///< baseline, P_os, P_os+g, P_os+g+p
};

/// The paper's columns: N_d = 1, 4, 16, 64, 256, 1024.
const std::vector<int>& paper_ranks();

/// "" when the arguments are usable, else one line naming the bad value, e.g.
/// "--params must be a positive number of parameters, got -5" or "--ranks must be >= 1, got 0".
std::string zero_memory_arg_error(double psi, int ranks, double K);

/// The table for Ψ = psi over paper_ranks() plus `highlight` (inserted when it is not one of
/// them). Arguments must pass zero_memory_arg_error.
ZeroMemoryTable zero_memory_table(double psi, int highlight, Precision prec);

/// `x` with three significant digits (whole numbers ≥ 100 are kept whole), halves rounded away
/// from zero, trailing zeros dropped:
/// 120 -> "120", 41.25 -> "41.3", 30 -> "30", 7.5 -> "7.5", 1.875 -> "1.88", 0.46875 -> "0.469".
std::string format_3sig(double x);

/// The printed report: the highlighted column as a list, then the whole table.
std::string render(const ZeroMemoryTable& t);

}  // namespace llmp
