// The tensor-core path of ring attention's blockwise kernels (attention_block.h), which is also
// what flash attention runs on (common/nn/flash_attention.h): the same signatures and math, the
// products on bf16 tensor cores (WMMA 16 × 16 × 16 fragments, fp32 accumulation), tiled as
// FlashAttention-2 (Dao 2023, Algorithms 1 and 2).
//
//   forward   a block of 4 warps per 64 query rows of one (b, h); for each 64-key tile the rows
//             see (flash_tiles.h tile_sees): S = Q Kᵀ on tensor cores into shared memory, the
//             online softmax per row (m, l, rescale α = e^(m − m')), P~ rounded to bf16, O =
//             α·O + P~ V on tensor cores. O, m, l are read at the start and written at the end,
//             so a ring step continues the running state as the CUDA-core kernels do.
//   backward  two passes, as the CUDA-core kernels (no atomics): a block per 64 query rows
//             (S and dP = dO Vᵀ again, dS = P (dP − D)/√hs rounded to bf16, dQ += dS K), then a
//             block per 64 key rows (Sᵀ and dPᵀ, Pᵀ and dSᵀ in bf16, dV += Pᵀ dO, dK += dSᵀ Q).
//
// When: under a bf16 declaration of the operands (context.h sixteen_bit_operands() ==
// CUDA_R_16BF, which the kernel table opens for these entries when the walk declared bf16:
// every q, k, v and dO value is then a bf16 value, and the CPU table checks that promise), for
// head sizes 16, 32, 64 and 128, B·H < 65,536, shared memory within the device's per-block
// limit, and LLMP_CUDA_BLOCKWISE_CUDA_CORES unset or 0 (set to 1 it forces the CUDA-core
// kernels, for a benchmark's A/B or to isolate a fault). Otherwise the CUDA-core kernels run.
//
// Rounding (what differs from the CPU twin): q, k, v, dO are read as bf16 (exact under the
// declaration); P~ before P~V, and P and dS before their products, are rounded to bf16, as
// FlashAttention-2 does and as the materialized bf16 walk rounds P and dS (common/nn/sublayer.h
// rounded_products); the running statistics, O and the gradients stay fp32. So the results are
// within a few bf16 steps of P of the CPU's (attention_block_tc_twin_test states the bounds).
// NOT RUN ON A GPU YET: written in a session without one. The visibility rule is host-checked
// (flash_tiles_test), and the kernels' own source runs on the CPU under the CUDA emulator against
// the CPU twins (attention_block_tc_emulated_test); attention_block_tc_twin_test waits for a GPU.
//
// Files: the three kernels in attention_block_tc_kernels.h (device code nvcc and the emulator both
// compile), their launches and the switch in attention_block_tc.cu, the fragments, layouts and
// tile loads they share in wmma_tiles.h.
//
// Glossary: as attention_block.h; hs head size, Tl rows of a step, c = Tl/2.
#pragma once

#include "kernels/cpu/attention_block.h"

namespace llmp {
namespace cuda {

/// Whether attention_block_forward / _backward of these shapes run on tensor cores now (above).
bool attention_block_tc(int B, int H, int hs);

/// attention_block_forward's tensor-core form: the same arguments and contract, no workspace.
void attention_block_forward_tc(float* o, int ld_o, float* m, float* l, const float* q, int ld_q,
                                const float* k, const float* v, int ld_kv, int B, int H, int Tl,
                                int hs, cpu::BlockPairs pairs);
/// attention_block_backward's tensor-core form: dq, dk, dv ACCUMULATED, as there.
void attention_block_backward_tc(float* dq, float* dk, float* dv, int ld_dkv, const float* q,
                                 int ld_q, const float* k, const float* v, int ld_kv,
                                 const float* dout, int ld_o, const float* lse, const float* D,
                                 int B, int H, int Tl, int hs, cpu::BlockPairs pairs);

}  // namespace cuda
}  // namespace llmp
