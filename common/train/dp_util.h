// Small pieces shared by the data-parallel stages: which sequences a rank reads, how a flat
// buffer of Ψ elements is cut into N shards, and the loss average that is bookkeeping, not
// algorithm (it goes over a separate communicator so CommStats shows only the technique's bytes).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/comm/process_group.h"
#include "common/plan/memory_planner.h"
#include "common/train/strategy.h"

namespace llmp {

/// The shards of a flat buffer of Ψ elements over N ranks: rank i owns [i·S, i·S + count(i)),
/// S = ⌈Ψ/N⌉, count(i) = clamp(Ψ - i·S, 0, S). Every rank allocates S (the padding).
struct ShardLayout {
  ShardLayout(int64_t psi, int ranks);
  int64_t psi, padded;           ///< Ψ and S = ⌈Ψ/N⌉
  std::vector<int64_t> begin;    ///< i·S, clamped to Ψ
  std::vector<int64_t> count;    ///< valid elements of shard i
  /// Per-rank element counts of the intersection of [a, b) with each shard: the recvcounts of a
  /// reduce_scatter_v of that range (they sum to b - a).
  std::vector<int64_t> split_range(int64_t a, int64_t b) const;
};

/// Σ over the group of `local` (double), through a private duplicate of the group's
/// communicator so that it is not counted in the group's CommStats.
class MetricsReducer {
 public:
  explicit MetricsReducer(ProcessGroup& group);
  ~MetricsReducer();
  double sum(double local);

 private:
  MPI_Comm comm_;
};

/// Report rows for measured model-state memory (MemoryTracker, this process) against a plan.
std::vector<ReportRow> memory_rows(const MemoryPlan& plan, const char* params_text,
                                   const char* grads_text, const char* optimizer_text);

}  // namespace llmp
