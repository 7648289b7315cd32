// node_local_rank: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) over the world. See the header.
#include "common/comm/local_rank.h"

#include <mpi.h>

#include "common/comm/mpi_util.h"

namespace llmp {

LocalRank node_local_rank() {
  int world_rank = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
  MPI_Comm node;  // the ranks that share this node's memory, ordered by world rank (the key)
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL,
                                &node));
  LocalRank l;
  MPI_CHECK(MPI_Comm_rank(node, &l.rank));
  MPI_CHECK(MPI_Comm_size(node, &l.size));
  MPI_CHECK(MPI_Comm_free(&node));
  return l;
}

}  // namespace llmp
