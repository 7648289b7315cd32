// Lab ring_all_reduce: the adapter header. The tests call ring_all_reduce() and nothing else, so
// you may organise your code (helpers, files) as you like behind this one function.
//
// Ring all-reduce (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
// workstations", JPDC 2009; Baidu's ring all-reduce, 2017) is the algorithm inside NCCL and MPI
// that makes all_reduce cost 2(N-1)/N·S bytes per rank, the figure process_group.h counts for
// ProcessGroup::all_reduce. Here it is built from point-to-point messages only.
//
// Glossary: N = group.size() ranks, r = group.rank(), n = data.numel() elements,
// S = 4n bytes (f32), c_i = elements in chunk i, "r+1" and "r-1" are taken modulo N.
#pragma once

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// Sums `data` over every rank of `group`, in place (ReduceOp::kSum), with a ring of point-to-point
/// messages: afterwards data on every rank holds x_0 + x_1 + ... + x_{N-1}, element by element,
/// with the same bits on every rank.
///
/// Collective: every rank of `group` calls it, with tensors of the same numel.
///
/// Data: a host f32 tensor of any shape (taken as n = data.numel() flat elements; it may be a
/// view, e.g. narrow() of a larger buffer, and only its own elements are touched). n may be 0 and
/// need not be divisible by N.
///
/// Chunks: the n elements are cut into N consecutive chunks, the first n mod N one element longer:
///   c_i = floor(n/N) + (i < n mod N ? 1 : 0),   chunk i starts at i·floor(n/N) + min(i, n mod N).
/// (Chunks may be empty when n < N; they are sent anyway, as empty messages.)
///
/// Algorithm, 2(N-1) steps, each: send one chunk to rank r+1 and receive one chunk from rank r-1.
///   1. reduce-scatter, steps s = 0 .. N-2: send chunk (r-s) mod N, receive chunk (r-s-1) mod N
///      into a scratch buffer and add it into that chunk of data. Afterwards rank r holds the
///      complete sum of chunk (r+1) mod N.
///   2. all-gather, steps s = 0 .. N-2: send chunk (r+1-s) mod N, receive chunk (r-s) mod N
///      straight into data (a copy: the chunk arriving is already the full sum).
/// N = 1: returns at once, data unchanged, nothing sent.
///
/// Traffic (what group.stats() counts under "send"; recv counts 0 bytes): 2(N-1) sends on every
/// rank, of every chunk but (r+1) mod N in phase 1 and every chunk but (r+2) mod N in phase 2:
///   4·(2n − c_{(r+1) mod N} − c_{(r+2) mod N}) bytes  =  2(N-1)/N·S exactly when N divides n,
/// within two elements of it otherwise, and 2(N-1)·S summed over the ranks. No collective of the
/// group is used (stats().calls holds "send" and "recv" only).
///
/// Errors: data not f32 or not on the host ends every rank with file:line and the tensor's
/// description (LLMP_CHECK); ranks passing different numel end every rank in the first receive of
/// a chunk of the wrong length (ProcessGroup::recv's check, or MPI's "Message truncated" when the
/// message is longer). It must never deadlock, whatever the message size: see README.md, "Why not
/// just send, then receive?".
void ring_all_reduce(ProcessGroup& group, Tensor& data);

}  // namespace llmp
