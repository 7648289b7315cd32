// ProcessGrid: cuts the dp, pp and tp groups out of one world group (picotron's
// ProcessGroupManager, Megatron's initialize_model_parallel) with three ProcessGroup::split calls.
//
// Coordinates of group rank w (tp fastest, then pp, then dp; grid.h has the worked example):
//   tp_rank = w % tp,  pp_rank = (w / tp) % pp,  dp_rank = w / (tp·pp).
// A group holds the ranks that agree on the two other coordinates, ordered by its own:
//   tp group: same (dp_rank, pp_rank), key tp_rank;   pp group: same (dp_rank, tp_rank), key pp_rank;
//   dp group: same (pp_rank, tp_rank), key dp_rank.
//
// Glossary: dp data-parallel size, pp pipeline stages, tp tensor-parallel size, w world rank.
#include "common/comm/grid.h"

#include "common/runtime/check.h"

namespace llmp {

std::string grid_mismatch(GridShape s, int world_size) {
  const int64_t product = int64_t(s.dp) * s.pp * s.tp;
  if (s.dp >= 1 && s.pp >= 1 && s.tp >= 1 && product == world_size) return "";
  return "dp " + std::to_string(s.dp) + " × pp " + std::to_string(s.pp) + " × tp " +
         std::to_string(s.tp) + " = " + std::to_string(product) +
         " does not match the world size " + std::to_string(world_size);
}

ProcessGrid::ProcessGrid(std::shared_ptr<ProcessGroup> world, int dp, int pp, int tp)
    : dp_(dp), pp_(pp), tp_(tp), world_(std::move(world)) {
  LLMP_CHECK(world_ != nullptr, "ProcessGrid needs a world group");
  const int n = world_->size();
  const std::string msg = grid_mismatch({dp, pp, tp}, n);
  const bool ok = msg.empty();
  // Every rank reaches the same verdict. Over all ranks of the job, all_ranks_ok prints it once
  // and exits cleanly; over a sub-group it cannot (it is collective over the job), so abort.
  if (n == ProcessGroup::world()->size())
    all_ranks_ok(ok, msg);
  else if (!ok)
    user_error(msg);

  const int w = world_->rank();
  tp_rank_ = w % tp;
  pp_rank_ = (w / tp) % pp;
  dp_rank_ = w / (tp * pp);
  LLMP_CHECK(world_rank_of(dp_rank_, pp_rank_, tp_rank_, pp, tp) == w, "grid layout");
  tp_group_ = world_->split(dp_rank_ * pp + pp_rank_, tp_rank_);
  pp_group_ = world_->split(dp_rank_ * tp + tp_rank_, pp_rank_);
  dp_group_ = world_->split(pp_rank_ * tp + tp_rank_, dp_rank_);
  // What the watchdog's message calls them (common/comm/watchdog.h).
  tp_group_->set_name("tensor-parallel group");
  pp_group_->set_name("pipeline group");
  dp_group_->set_name("data-parallel group");
}

}  // namespace llmp
