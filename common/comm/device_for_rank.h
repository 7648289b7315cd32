// Which GPU a rank uses: the rank's place among the ranks of its node (its local rank, from
// local_rank.h) mapped onto the node's devices.
//
//   local_size <= device_count   one rank per GPU: rank l uses device l (the usual launch, and the
//                                only one NCCL accepts: it refuses two ranks of a communicator on
//                                one GPU)
//   local_size >  device_count   round-robin sharing: rank l uses device l mod device_count, so
//                                ranks l, l + D, l + 2D, ... share device l; their collectives then
//                                go through the MPI backend's host staging
//                                (process_group_staging.h), not NCCL
// Both cases are l mod D (D = device_count); the two names say which backend can follow
// (ranks_share_devices()). torchrun sets LOCAL_RANK and the script calls
// torch.cuda.set_device(LOCAL_RANK) the same way.
//
// Glossary: l = local rank (0-based, on this node), L = local_size ranks on this node,
// D = device_count GPUs on this node.
#pragma once

namespace llmp {

/// The CUDA device index for local rank l of L ranks on a node with D devices: l mod D (one rank
/// per GPU when L <= D, round-robin sharing otherwise). Throws std::invalid_argument with a
/// one-line message naming the value when D <= 0 ("no CUDA device on this node ..."), L <= 0,
/// or l is outside [0, L).
int device_for_rank(int local_rank, int local_size, int device_count);

/// True when some device serves more than one of the node's L ranks (L > D): NCCL cannot run
/// there, the MPI backend's staging must. Throws as device_for_rank on D <= 0 or L <= 0.
bool ranks_share_devices(int local_size, int device_count);

}  // namespace llmp
