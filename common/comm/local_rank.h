// This rank's place among the ranks of its node (shared-memory domain): what device_for_rank
// (device_for_rank.h) maps onto a GPU. MPI-3's MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) splits
// the world into one communicator per node; the rank and size in it are the local rank and the
// local size (torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE).
//
// Glossary: l local rank, L ranks on this node.
#pragma once

namespace llmp {

struct LocalRank {
  int rank = 0;  ///< l, 0-based on this node, ordered by world rank
  int size = 1;  ///< L, ranks of the job on this node
};

/// The local rank and size of this process in MPI_COMM_WORLD. Collective over the world (every
/// rank must call it). MPI must be initialised (common/runtime/launch.h); MPI errors end the job
/// (MPI_CHECK).
LocalRank node_local_rank();

}  // namespace llmp
