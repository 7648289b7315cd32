// Softmax cross-entropy when the vocabulary of a row is split over a group of ranks: the
// multi-dimensional tensor-parallel heads (2D, 2.5D, 3D) hold the logits of `rows` rows and one
// block of the vocabulary, so no rank holds the (B,T,V) logits.
//
// kernels/cpu/cross_entropy.h's three steps, with Megatron's vocab-parallel reductions between
// them over `group` (the ranks holding the other vocabulary blocks of the same rows):
//   all_reduce max of the row maxima (N floats), all_reduce sum of [Σ exp | target logit]
//   (2N floats): 2 calls, 2(n-1)/n·12N bytes sent per rank.
// On a device (`device`, Device::kCUDA): z, y are that device's memory, the three passes are
// kernel_ops(device)'s cross_entropy_* entries, and the all_reduced row maxima (4N) and sums
// (8N) are device tensors, staged down and up by the MPI backend.
// Shoeybi et al. 2019 (Megatron-LM), §3, parallel cross-entropy.
// Glossary: N rows, Vr this rank's vocabulary entries [v0, v0 + Vr), n = group.size().
#pragma once

#include <cstdint>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// z (N,Vr): this rank's logits for vocabulary [v0, v0+Vr); y (N) the targets in [0, V). Returns
/// Σ_n loss_n over the N rows (double, unscaled), the same on every rank of `group`. With
/// `backward`, z is OVERWRITTEN by dloss·(softmax - onehot) for this rank's vocabulary entries.
/// Collective over `group` (2 all_reduces).
double grid_cross_entropy(ProcessGroup& group, float* z, const int32_t* y, int v0, int64_t N,
                          int Vr, float dloss, bool backward, Device device = Device::kCPU);

}  // namespace llmp
