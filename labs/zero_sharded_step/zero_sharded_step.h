// Lab zero_sharded_step: the adapter header. The tests call zero_shard() and zero_step() and
// nothing else, so you may organise your code as you like behind them.
//
// ZeRO stages 1 and 2 (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", §5.1-5.2): N data-parallel ranks hold the same Ψ parameters, but
// each keeps Adam's state (and, in stage 2, the reduced gradient) for one shard of them only.
// One optimizer step is then, in place of DDP's all_reduce of the whole gradient:
//
//   reduce_scatter  each rank receives the mean over the ranks of ITS shard of the gradient
//                   ((N-1)/N·4Ψp bytes sent per rank);
//   AdamW           each rank updates ITS shard of the parameters (K = 8 bytes of state per
//                   parameter of the shard: m and v, Ψp/N of them, not Ψ);
//   all_gather      every rank receives every updated shard: all Ψ parameters, the same on every
//                   rank again ((N-1)/N·4Ψp bytes).
//
// The same (N-1)/N·8Ψp bytes as one all_reduce (a ring all_reduce IS a reduce_scatter then an
// all_gather), for 1/N of the optimizer state. stages/zero2 is this step inside a trainer.
//
// Padding: Ψ need not divide by N. The flat buffers are padded to Ψp = N·⌈Ψ/N⌉ elements, so that
// every shard has the same size k = Ψp/N (the equal-chunk collectives need it); the Ψp - Ψ padding
// elements sit at the end, in the last shard(s), and are never parameters.
//
// Glossary: Ψ parameters (psi), N = dp.size() ranks, r = dp.rank(), Ψp padded size, k = Ψp/N the
// shard size, t the step (1-based).
#pragma once

#include <cstdint>

#include "common/comm/process_group.h"
#include "common/optim/adamw.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// Where rank r's shard of a flat buffer of `psi` elements lies, split over `n` ranks.
struct ZeroShard {
  int64_t padded = 0;  ///< Ψp = n·⌈psi/n⌉: the padded buffer's elements
  int64_t size = 0;    ///< k = Ψp/n: every shard's elements (padding included)
  int64_t begin = 0;   ///< r·k: the shard's first element in the (padded) buffer
  int64_t count = 0;   ///< the shard's elements that are parameters: min(k, max(0, psi - begin))
};

/// The shard of rank `r` of `n`. psi ≥ 1, n ≥ 1, 0 ≤ r < n, else every rank ends with LLMP_CHECK
/// naming the values. Examples: (psi 10, n 4): padded 12, size 3; rank 3: begin 9, count 1.
/// (psi 5, n 4): padded 8, size 2; rank 3: begin 6, count 0 (a shard of padding only).
ZeroShard zero_shard(int64_t psi, int n, int r);

/// One ZeRO-2 optimizer step over the data-parallel group `dp`.
///
/// params: (Ψ) host f32, the same on every rank on entry; on return the updated parameters, the
///         same on every rank: exactly what AdamW over all Ψ parameters would give with the MEAN
///         of every rank's `grads` (the data-parallel gradient).
/// grads:  (Ψ) host f32, THIS rank's gradient (from its part of the batch; it differs between
///         ranks); not modified.
/// opt:    the optimizer of THIS rank's shard: AdamW over zero_shard(Ψ, N, r).size elements (m, v
///         of the shard only), made by the caller and kept between steps. Call its
///         step(shard params, shard gradient, t, count) on the shard's `count` valid elements.
/// t:      the step, 1-based (AdamW's bias correction).
///
/// Collective: every rank of `dp` calls it with the same Ψ and t.
/// Traffic: exactly one reduce_scatter of the padded gradient (Ψp floats in, k out) and one
/// all_gather of the padded parameters (k in, Ψp out), each (N-1)/N·4Ψp bytes per rank
/// (dp.stats()); no all_reduce and nothing else. On one rank: no bytes.
/// Errors: params and grads of different sizes, or an optimizer of the wrong size, end every
/// rank with LLMP_CHECK naming them.
void zero_step(ProcessGroup& dp, Tensor& params, const Tensor& grads, AdamW& opt, int64_t t);

}  // namespace llmp
