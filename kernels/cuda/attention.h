// Causal multi-head self-attention on the GPU: the twin of kernels/cpu/attention.h (Vaswani et
// al. 2017 §3.2.2, GPT-2's causal mask), same layout: qkv (B,T,3C) with q, k, v at channels
// [0,C), [C,2C), [2C,3C), head h owning [h·hs, (h+1)·hs) of each; att (B,H,T,T) keeps P with
// exact zeros above the diagonal.
//
//   per (b,h):  S = Q Kᵀ (T,T),  P = causal softmax(S/√hs),  Y = P V (T,hs)
//   backward:   dP = dY Vᵀ,  dV = Pᵀ dY,  dS = P ⊙ (dP - rowsum(P ⊙ dP)) / √hs,  dQ = dS K,
//               dK = dSᵀ Q
//
// Launch shape: for each batch entry b, one cublasSgemmStridedBatched over its H heads per
// product (gemm_args.cc: head h+1's Q, K, V start hs floats after head h's, leading dimension
// 3C, so no permute of qkv into (B,H,T,hs) is needed); between the products a causal softmax
// (forward) or softmax-backward kernel with one warp per row of T scores (launch.h).
//
// Why not one fused kernel (FlashAttention, Dao et al. 2022): this is a teaching twin of the CPU
// code, product by product, so each step can be checked against it (the GEMM arguments on the
// host, gemm_args_test); cuBLAS does the FLOPs near peak. The price is the (B,H,T,T) P in memory,
// which the CPU twin keeps too (selective recomputation relies on it).
//
// scratch: IGNORED. The CPU twin computes dP one head at a time in T·T floats; here the H heads
// of a batch entry are batched, so dP/dS (H·T·T floats) live in the workspace of context.h.
//
// att_dtype: the dtype P is stored in (KernelOps::attention_*: the model's activation dtype).
//   f32: as above, P in att; sixteen_bit_inputs: qkv, dout and att hold bf16/fp16 values (mixed
//     precision's widened activations; KernelOps::set_matmul_operands), exact in TF32, so the
//     three products among them (Q Kᵀ, dY Vᵀ, Pᵀ dY) run on TF32 tensor cores (context.h
//     ExactTf32Operands); with a 16-bit probs_dtype the other three (P V, dS K, dSᵀ Q) read only
//     16-bit values and run on TF32 too, else in fp32.
//   f16/bf16: no fp32 P of the whole batch exists. Per batch entry the scores go to an fp32
//     workspace (H,T,T) and the softmax writes P into att in 16 bits; Q, K, V, dY are read from
//     their 16-bit sources (sixteen_bit_sources.h; else rounded copies); every product reads
//     16-bit operands on 16-bit tensor cores with fp32 accumulation, except P V, dS K, dSᵀ Q when
//     probs_dtype is not att_dtype (fp16: P and dS unrounded, as kernels/cpu), which read the fp32
//     P / dS of the workspace. sixteen_bit_inputs is not consulted: a 16-bit att promises 16-bit
//     qkv and dout values. Bytes moved per element of P (arithmetic, not measured): forward 12
//     (scores 4, softmax 4 + 2, P V 2) against 22 through common/nn's fp32 copy of P and its
//     rounding; backward, P's reads 4 against 14 (its widening included), dP and dS 14 against 20.
// probs_dtype: as kernels/cpu/attention.h, the softmax kernels write P and dS rounded to it
// (shared_math.h round16).
// Glossary: B batch, T sequence, C channels, H heads, hs = C/H. Device pointers, on stream().
#pragma once

#include <cstdint>
#include <initializer_list>

#include "common/tensor/tensor.h"
#include "kernels/cuda/shared_math.h"

namespace llmp {
namespace cuda {

/// out (B,T,C) = causal multi-head attention of qkv (B,T,3C); att (B,H,T,T) of att_dtype receives
/// P. Throws std::invalid_argument naming an att_dtype or probs_dtype not f32, f16 or bf16.
void attention_forward(float* out, void* att, DType att_dtype, const float* qkv, int B, int T,
                       int C, int H, bool sixteen_bit_inputs = false,
                       DType probs_dtype = DType::kF32);

/// att (B,H,T,T) = P of attention_forward alone (the same kernels, hence the same bits).
void attention_probs(void* att, DType att_dtype, const float* qkv, int B, int T, int C, int H,
                     bool sixteen_bit_inputs = false, DType probs_dtype = DType::kF32);

/// dqkv (B,T,3C) OVERWRITTEN with ∂L/∂qkv, given dout (B,T,C), the forward's qkv and att.
/// scratch is not used (see above): pass nullptr or the CPU twin's T·T buffer.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const void* att,
                        DType att_dtype, float* scratch, int B, int T, int C, int H,
                        bool sixteen_bit_inputs = false, DType probs_dtype = DType::kF32);

/// The three above with qkv, out, dout and dqkv as stored (kernels/ops/kernel_ops.h Act): each
/// f32, or 16-bit of att_dtype, which the products then read or write as it is (a 16-bit out or
/// dqkv: the GEMM's C, its fp32 accumulation rounded once). The 16-bit ones are taken when P is
/// stored in a 16-bit att_dtype that is also probs_dtype (the model's bf16 walk: every product on
/// 16-bit tensor cores); all f32: the functions above. Throws std::invalid_argument naming the
/// argument otherwise (the caller makes fp32 copies of such activations first).
void attention_forward(void* out, DType out_dtype, void* att, DType att_dtype, const void* qkv,
                       DType qkv_dtype, int B, int T, int C, int H, bool sixteen_bit_inputs,
                       DType probs_dtype);
void attention_probs(void* att, DType att_dtype, const void* qkv, DType qkv_dtype, int B, int T,
                     int C, int H, bool sixteen_bit_inputs, DType probs_dtype);
void attention_backward(void* dqkv, DType dqkv_dtype, const void* dout, DType dout_dtype,
                        const void* qkv, DType qkv_dtype, const void* att, DType att_dtype,
                        float* scratch, int B, int T, int C, int H, bool sixteen_bit_inputs,
                        DType probs_dtype);
/// Whether the overloads above take activations of `dtypes` as they are, with P in att_dtype and
/// P, dS rounded to probs_dtype: every dtype f32, or att_dtype = probs_dtype 16-bit and every
/// dtype f32 or att_dtype.
bool attention_takes_stored(DType att_dtype, DType probs_dtype,
                            std::initializer_list<DType> dtypes);

// ---- The causal softmax of the score rows, shared with ring self-attention (ring_self_block.cu):
// `rows` rows of length T in place; row r's last live key is g = g0 + (r mod Tl) (attention:
// g0 = 0, Tl = T; a ring rank's rows: g0 = r·Tl); keys past g are written exactly 0. A warp per
// row.

/// P_j = exp(scale·(S_j − max_{k≤g} S_k)) / Σ_{k≤g} exp(scale·(S_k − max)) for j ≤ g, each
/// written as round16(P_j, r) (kNone: as computed).
void causal_softmax(float* s, int64_t rows, int Tl, int T, int g0, float scale,
                    Round16 r = Round16::kNone);

/// In place over dP: dS_j = scale·P_j·(dP_j − Σ_{k≤g} P_k·dP_k) for j ≤ g, written as
/// round16(dS_j, r).
void causal_softmax_backward(float* dp, const float* P, int64_t rows, int Tl, int T, int g0,
                             float scale, Round16 r = Round16::kNone);


}  // namespace cuda
}  // namespace llmp
