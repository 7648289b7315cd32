// What a program asked of the emulated GPU, call by call: the launches by kernel, the calls that
// make the host wait for the device, cuBLAS's products by operand type with their FLOPs, the
// copies, allocations and NCCL operations. Set $LLMP_CUDA_EMULATOR_COUNTS to a file name and the
// totals are written there when the process exits (one file per rank of a multi-rank job:
// FILE.<rank>, the rank from MPICH's $PMI_RANK), one tab-separated row per (category, name):
//
//     category  name                          calls  bytes  flops
//     launch    layernorm_forward_kernel      2      0      0
//     sync      cudaStreamSynchronize         1      0      0
//     gemm      bf16 operands, fp32 compute   8      0      2.4e+07
//
// A count, not a time: the emulator runs on the CPU. It is how the GPU path's properties that do
// not depend on the hardware are measured without one: how many times a step makes the host wait
// for the device (each wait drains the GPU's queue, which then idles while the host launches
// again), how many kernels it launches, and which products run on 16-bit operands (the tensor
// cores' bf16 rate, the MFU target's premise). tools/gpu_step_counts.sh takes one step's share.
#pragma once

#include <string>

namespace llmp::cuda::emu {

/// Categories of a counted call.
enum class CallKind { kLaunch, kSync, kGemm, kCopy, kAlloc, kNccl };

/// Counts one call of `category` named `name` (a kernel, an API function, an operand type), with
/// the bytes it moved or allocated (a NCCL call: its send buffer's, ncclRecv its receive
/// buffer's) and the FLOPs it ran (2 per multiply-add). Thread-safe.
void count_call(CallKind category, const std::string& name, double bytes = 0, double flops = 0);
/// The calls of `category` named `name` counted so far in this process (a test's probe of which
/// path ran: common/comm/nccl_process_group_test.cc).
double counted_calls(CallKind category, const std::string& name);

/// Whether [p, p + bytes) is page-locked host memory from cudaMallocHost: a copy to or from it is
/// asynchronous on a GPU; one to pageable memory makes the host wait (CUDA's "API
/// synchronization behavior").
bool is_pinned_range(const void* p, size_t bytes);
/// Notes or forgets a cudaMallocHost allocation (streams.cc).
void note_pinned(const void* p, size_t bytes, bool live);

}  // namespace llmp::cuda::emu
