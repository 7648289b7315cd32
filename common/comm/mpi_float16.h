// 16-bit floating-point reductions for the MPI backend: f16 (IEEE half) and bf16 (brain float)
// tensors added and compared by user-defined MPI operations, since MPI has no 16-bit float type.
//
// The elements travel as MPI_UINT16_T (2 bytes each, bit for bit: mpi_datatype()); a predefined
// MPI_SUM would add them as integers, so the ops here are MPI_Op_create'd functions that read
// each pair as the 16-bit format:
//   sum: widen both to f32, add, round the f32 sum back to the format, to nearest even.
//        f32 has 24 significand bits, at least 2p + 2 for f16 (p = 11) and bf16 (p = 8), so the
//        f32 add and the one rounding give the correctly rounded sum of the pair (Figueroa, "When
//        is double rounding innocuous?", 1995): each pairwise addition rounds once, exactly as
//        NCCL's 16-bit all_reduce does. A reduction of N tensors rounds N - 1 times, in the
//        order MPICH's algorithm picks, so the result can differ from rounding the exact (or
//        f32) sum once: rank values 1, 1/8 + u/2 and u/64 (u = ulp(1)) give 1.125 in every
//        order, the f32 sum rounded once 1.125 + u.
//   max: the larger of the pair, bit for bit (no rounding); NaN if either is NaN.
// f16 overflow is not an error: 65504 + 65504 rounds to inf, which is what a loss scaler looks
// for (common/optim). bf16 has f32's exponent range and overflows only where f32 would.
// kAvg is a sum on the wire, then scale_float16 by 1/N on completion (widen, multiply, round),
// as the f32 path multiplies by 1/N.
//
// Lifetime: the four ops (sum and max for each format) are created on first use, after
// MPI_Init, and freed by MPI_Finalize itself: an attribute on MPI_COMM_SELF whose delete
// callback frees them (MPI-3.1 §8.7.1, "Allowing User Functions at Process Termination"), so
// every place that finalises (launch's shutdown, flags, check, signals) frees them too.
//
// Glossary: f16 = Eigen::half (1 sign, 5 exponent, 10 mantissa bits, max 65504), bf16 =
// Eigen::bfloat16 (1, 8, 7), u = ulp(1) (2^-10 for f16, 2^-7 for bf16), N ranks.
#pragma once

#include <mpi.h>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// The user-defined op for a 16-bit float reduction: the rounding sum for kSum and kAvg, the max
/// for kMax, of `t` (kF16 or kBF16; ends the process naming the dtype otherwise). Its datatype is
/// MPI_UINT16_T. Created on the first call (MPI must be initialised), freed at MPI_Finalize.
MPI_Op mpi_float16_op(DType t, ReduceOp op);

/// t *= s on a host f16 or bf16 tensor: each element widened to f32, multiplied by s (f32),
/// rounded back to nearest even (kAvg's division by N).
void scale_float16(Tensor& t, float s);

}  // namespace llmp
