// Where each process group of the dp × pp × tp grid sits on a cluster of nodes of G GPUs:
// inside one node (NVLink-class bandwidth) or across nodes (the inter-node network).
//
// The grid is common/comm/grid.h's: tensor-parallel ranks fastest, then pipeline, then data,
//   rank = d·(pp·tp) + s·tp + j     (d data-parallel index, s pipeline stage, j tp index)
// and GPU g of the job lives on node ⌊g/G⌋. So a tp group is tp consecutive GPUs (stride 1), a pp
// group has stride tp, a dp group stride tp·pp, and the embedding group {stage 0, stage p-1} of a
// (d, j) is two GPUs (p-1)·tp apart. Worked example, G = 8, dp = pp = tp = 4 (64 GPUs, 8 nodes):
// tp group {0,1,2,3} is inside node 0; pp group {0,4,8,12} spans nodes 0 and 1; dp group
// {0,16,32,48} spans nodes 0, 2, 4 and 6. A kind of group is "inter-node" when any of its groups
// spans two nodes (the slowest group sets the collective's pace on the step).
#pragma once

#include <string>

namespace llmp::plan {

/// Which kinds of group span nodes (true: inter-node).
struct GroupPlacement {
  bool tp = false, pp = false, dp = false, emb = false;
};

/// Placement of the groups of a dp × pp × tp grid on nodes of `gpus_per_node` GPUs (rank order of
/// the file comment). Throws std::invalid_argument when a size or gpus_per_node is < 1.
GroupPlacement place_groups(int dp, int pp, int tp, int gpus_per_node);

/// "intra-node" or "inter-node".
inline const char* where(bool inter) { return inter ? "inter-node" : "intra-node"; }

}  // namespace llmp::plan
