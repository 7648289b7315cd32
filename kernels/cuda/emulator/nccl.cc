// The emulated NCCL (include/nccl.h), part 2: the operations. Each call checks its arguments now
// (as NCCL does when it enqueues), then queues a StreamOp on its stream (stream_queue.h) made of
// pieces: a piece posts non-blocking MPI operations when the stream reaches it (copying what it
// reads first, pre-multiplied for ncclAvg) and finishes when they are done. Between
// ncclGroupStart and ncclGroupEnd the pieces are kept and queued as one operation per stream.
//
// Glossary: N ranks, r this rank, es bytes per element, n elements.
#include <algorithm>
#include <sched.h>

#include <climits>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"
#include "kernels/cpu/convert.h"
#include "kernels/cuda/emulator/nccl_internal.h"
#include "kernels/cuda/emulator/stream_queue.h"

namespace llmp::cuda::emu::nccl {

// ---- Datatypes and reductions ----------------------------------------------------------------

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
  }
  return 0;
}

namespace {
bool is16(ncclDataType_t t) { return t == ncclFloat16 || t == ncclBfloat16; }
bool is_float(ncclDataType_t t) { return is16(t) || t == ncclFloat32 || t == ncclFloat64; }
DType dtype16(ncclDataType_t t) { return t == ncclFloat16 ? DType::kF16 : DType::kBF16; }
}  // namespace

MPI_Datatype mpi_type(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return MPI_INT8_T;
    case ncclUint8:
      return MPI_UINT8_T;
    case ncclInt32:
      return MPI_INT32_T;
    case ncclUint32:
      return MPI_UINT32_T;
    case ncclInt64:
      return MPI_INT64_T;
    case ncclUint64:
      return MPI_UINT64_T;
    case ncclFloat16:
    case ncclBfloat16:
      return MPI_UINT16_T;  // reduced by the ops below
    case ncclFloat32:
      return MPI_FLOAT;
    case ncclFloat64:
      return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}

namespace {
// 16-bit a (op)= b element by element: each pair widened to fp32, combined, rounded back once.
template <DType D, bool kMax>
void combine16(void* in, void* inout, int* len, MPI_Datatype*) {
  std::vector<float> a(*len), b(*len);
  cpu::widen(in, D, a.data(), *len);
  cpu::widen(inout, D, b.data(), *len);
  for (int i = 0; i < *len; ++i) b[i] = kMax ? std::max(a[i], b[i]) : a[i] + b[i];
  cpu::round_to(b.data(), inout, D, *len);
}

MPI_Op user_op(MPI_User_function* f) {
  MPI_Op op;
  EMU_MPI(MPI_Op_create(f, /*commute=*/1, &op));
  return op;
}

}  // namespace

MPI_Op mpi_op(ncclRedOp_t op, ncclDataType_t t) {
  if (is16(t)) {
    static const MPI_Op bf_sum = user_op(combine16<DType::kBF16, false>);
    static const MPI_Op bf_max = user_op(combine16<DType::kBF16, true>);
    static const MPI_Op h_sum = user_op(combine16<DType::kF16, false>);
    static const MPI_Op h_max = user_op(combine16<DType::kF16, true>);
    const bool bf = t == ncclBfloat16;
    if (op == ncclSum || op == ncclAvg) return bf ? bf_sum : h_sum;
    if (op == ncclMax) return bf ? bf_max : h_max;
    return MPI_OP_NULL;
  }
  switch (op) {
    case ncclSum:
    case ncclAvg:
      return MPI_SUM;
    case ncclProd:
      return MPI_PROD;
    case ncclMax:
      return MPI_MAX;
    case ncclMin:
      return MPI_MIN;
  }
  return MPI_OP_NULL;
}

std::vector<char> input_copy(const void* src, size_t n, ncclDataType_t t, ncclRedOp_t op, int N) {
  std::vector<char> out(n * type_size(t));
  if (n) std::memcpy(out.data(), src, out.size());
  if (op != ncclAvg || !is_float(t)) return out;
  if (t == ncclFloat32) {
    const float s = static_cast<float>(1.0 / N);
    for (float* p = reinterpret_cast<float*>(out.data()); n--; ++p) *p *= s;
  } else if (t == ncclFloat64) {
    for (double* p = reinterpret_cast<double*>(out.data()); n--; ++p) *p *= 1.0 / N;
  } else {
    const DType d = dtype16(t);
    const float s = cpu::round_trip(static_cast<float>(1.0 / N), d);
    std::vector<float> w(n);
    cpu::widen(out.data(), d, w.data(), static_cast<int64_t>(n));
    for (float& x : w) x *= s;
    cpu::round_to(w.data(), out.data(), d, static_cast<int64_t>(n));
  }
  return out;
}

void post_divide(void* buf, size_t n, ncclDataType_t t, int N) {
  auto div = [&](auto* p) {
    for (size_t i = 0; i < n; ++i) p[i] /= N;
  };
  switch (t) {
    case ncclInt8:
      div(static_cast<int8_t*>(buf));
      break;
    case ncclUint8:
      div(static_cast<uint8_t*>(buf));
      break;
    case ncclInt32:
      div(static_cast<int32_t*>(buf));
      break;
    case ncclUint32:
      div(static_cast<uint32_t*>(buf));
      break;
    case ncclInt64:
      div(static_cast<int64_t*>(buf));
      break;
    case ncclUint64:
      div(static_cast<uint64_t*>(buf));
      break;
    default:
      break;
  }
}

// ---- Queued operations -----------------------------------------------------------------------

namespace {
thread_local int group_depth = 0;
thread_local std::vector<std::pair<cudaStream_t, MpiOp::Piece>> grouped;
}  // namespace

ncclResult_t submit(cudaStream_t stream, MpiOp::Piece piece) {
  if (group_depth > 0) {
    grouped.emplace_back(stream, std::move(piece));
    return ncclSuccess;
  }
  auto op = std::make_unique<MpiOp>();
  op->add(std::move(piece));
  enqueue(stream, std::move(op));
  return ncclSuccess;
}

}  // namespace llmp::cuda::emu::nccl

using llmp::cuda::emu::nccl::MpiOp;

ncclResult_t ncclGroupStart() {
  ++llmp::cuda::emu::nccl::group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  using namespace llmp::cuda::emu::nccl;  // NOLINT
  if (group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group_depth > 0) return ncclSuccess;
  std::vector<std::pair<cudaStream_t, std::unique_ptr<MpiOp>>> per_stream;  // in issue order
  for (auto& [stream, piece] : grouped) {
    auto it = per_stream.begin();
    while (it != per_stream.end() && it->first != stream) ++it;
    if (it == per_stream.end()) {
      per_stream.emplace_back(stream, std::make_unique<MpiOp>());
      it = per_stream.end() - 1;
    }
    it->second->add(std::move(piece));
  }
  grouped.clear();
  for (auto& [stream, op] : per_stream) llmp::cuda::emu::enqueue(stream, std::move(op));
  return ncclSuccess;
}

// ---- MPI's profiling interface ---------------------------------------------------------------
// A GPU runs its streams on its own; the emulator moves them only when called (stream_queue.h).
// A rank polling an MPI request (the MPI backend's waits, the pipeline's clock messages) would
// then never start the NCCL operations it has queued, and a peer waiting for one of them would
// wait forever where a GPU would not. So this library also defines MPI_Test and MPI_Wait: each
// moves the queues on, then does what PMPI_Test / PMPI_Wait do (the MPI standard's profiling
// interface, made for wrapping MPI calls; the binary's definitions take the place of libmpi's).
extern "C" int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  llmp::cuda::emu::progress();
  return PMPI_Test(request, flag, status);
}

extern "C" int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  for (;;) {
    llmp::cuda::emu::progress();
    int flag = 0;
    const int rc = PMPI_Test(request, &flag, status);
    if (rc != MPI_SUCCESS || flag) return rc;
    sched_yield();
  }
}
