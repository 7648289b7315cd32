// Which backend carries a run's device tensors (--backend), and the NCCL backend's constructor,
// registered when common/comm:nccl is linked (it needs the CUDA toolkit; the CPU-only build has
// no NCCL). MPI-free, so that train_main and a unit test can ask without a GPU or NCCL.
//
//   --backend   what carries Device::kCUDA tensors
//   mpi         the MPI backend, each device tensor staged through host buffers
//               (process_group_staging.h): works whatever the ranks per GPU
//   nccl        NcclProcessGroup: NCCL on the GPUs, host tensors over its MPI twin; needs one GPU
//               per rank on every node (NCCL refuses two ranks of a communicator on one GPU)
//   auto        nccl when NCCL is linked in, the job has more than one rank and this node has
//               a GPU per rank (L ≤ D), else mpi (one rank communicates nothing: no NCCL set-up)
//
// Glossary: L ranks on this node (node_local_rank().size), D GPUs on it.
#pragma once

#include <memory>
#include <string>

#include "common/comm/process_group.h"

namespace llmp {

/// "mpi" or "nccl" for `asked` (auto, mpi or nccl), or "" with *why set to one line naming the
/// values: nccl asked but not linked in, or with more ranks than GPUs on this node.
std::string resolve_backend(const std::string& asked, bool nccl_linked, int world_size,
                            int local_size, int device_count, std::string* why);

/// Makes the NCCL group over the ranks of an MPI group (collective over it).
using NcclGroupMaker = std::shared_ptr<ProcessGroup> (*)(ProcessGroup& host_group);
/// Called by common/comm:nccl when linked (alwayslink).
void register_nccl_backend(NcclGroupMaker make);
/// Whether common/comm:nccl is linked into this binary.
bool nccl_linked();
/// The NCCL group over `host_group`'s ranks; ends every rank (fail_at) when NCCL is not linked.
std::shared_ptr<ProcessGroup> make_nccl_group(ProcessGroup& host_group);

}  // namespace llmp
