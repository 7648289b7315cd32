// ProcessGrid: the dp × pp × tp grid of ranks and the groups cut from it (picotron, Megatron).
//
// Rank layout (tp fastest, then pp, then dp):  world_rank = (dp_rank * pp + pp_rank) * tp + tp_rank.
// Tensor-parallel peers are adjacent ranks (in a real cluster: the same node, NVLink).
//
// Worked example, world 8 = dp 2 × pp 2 × tp 2:
//   rank:     0 1 2 3 4 5 6 7
//   dp_rank:  0 0 0 0 1 1 1 1
//   pp_rank:  0 0 1 1 0 0 1 1
//   tp_rank:  0 1 0 1 0 1 0 1
//   tp groups {0,1} {2,3} {4,5} {6,7};  pp groups {0,2} {1,3} {4,6} {5,7};
//   dp groups {0,4} {1,5} {2,6} {3,7}.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "common/comm/process_group.h"

namespace llmp {

/// The shape of a grid: dp × pp × tp ranks (each ≥ 1; their product is the world size).
struct GridShape {
  int dp = 1, pp = 1, tp = 1;
};

/// "" when `shape` fits `world_size` ranks, else the one line that says why, naming all four
/// numbers: "dp 2 × pp 3 × tp 1 = 6 does not match the world size 4". Pure: the launcher checks
/// a stage's grid with it before any rank starts, ProcessGrid again inside the ranks.
std::string grid_mismatch(GridShape shape, int world_size);

class ProcessGrid {
 public:
  /// Collective over `world`. When dp·pp·tp != world->size() every rank ends with the one line
  /// "error: dp 2 × pp 3 × tp 1 = 6 does not match the world size 4" (exit 2; all_ranks_ok when
  /// `world` holds every rank of the job, else user_error, which aborts the job).
  ProcessGrid(std::shared_ptr<ProcessGroup> world, int dp, int pp, int tp);
  ProcessGrid(std::shared_ptr<ProcessGroup> world, GridShape shape)
      : ProcessGrid(std::move(world), shape.dp, shape.pp, shape.tp) {}

  int dp() const { return dp_; }
  int pp() const { return pp_; }
  int tp() const { return tp_; }
  int dp_rank() const { return dp_rank_; }
  int pp_rank() const { return pp_rank_; }
  int tp_rank() const { return tp_rank_; }
  ProcessGroup& world() { return *world_; }
  ProcessGroup& dp_group() { return *dp_group_; }
  ProcessGroup& pp_group() { return *pp_group_; }
  ProcessGroup& tp_group() { return *tp_group_; }
  GridShape shape() const { return {dp_, pp_, tp_}; }

  /// World rank of grid coordinates (dp_rank, pp_rank, tp_rank).
  static int world_rank_of(int dp_rank, int pp_rank, int tp_rank, int pp, int tp) {
    return (dp_rank * pp + pp_rank) * tp + tp_rank;
  }

 private:
  int dp_, pp_, tp_, dp_rank_, pp_rank_, tp_rank_;
  std::shared_ptr<ProcessGroup> world_, dp_group_, pp_group_, tp_group_;
};

}  // namespace llmp
