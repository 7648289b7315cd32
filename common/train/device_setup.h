// --device cuda inside the ranks: which GPU each rank uses and what carries device tensors
// between ranks (--backend, common/comm/backend.h). train_main calls it before it builds the
// ProcessGrid, so that every group of the grid is a split of the world this returns.
#pragma once

#include <memory>

#include "common/comm/process_group.h"
#include "common/runtime/flags.h"

namespace llmp {

/// Selects this rank's GPU (device_for_rank: local rank l → GPU l mod D), sets --tf32, resolves
/// --backend (the same answer on every rank: auto falls back to mpi unless every node has a GPU
/// per rank) and returns the world for the run: a NCCL group over `world`'s ranks for nccl,
/// `world` itself for mpi (device tensors staged through host buffers). Collective over world.
/// A --backend nccl that cannot be met ends every rank with one line (all_ranks_ok, exit 2).
/// Rank 0 logs the GPUs (train_main logs the backend, from the group it gets).
std::shared_ptr<ProcessGroup> setup_device(const TrainConfig& cfg,
                                           std::shared_ptr<ProcessGroup> world);

}  // namespace llmp
