// 16-bit floating-point reductions for the MPI backend (mpi_float16.h): the user-defined sum and
// max of f16 and bf16 elements, created once and freed by MPI_Finalize, and kAvg's scaling.
//
// MPI calls a user function with two buffers of `len` elements, `in` and `inout`, and expects
// inout[i] = in[i] op inout[i]. The ops are created commutative, so MPICH may combine the ranks'
// contributions in any order (its reduce_scatter and recursive-doubling algorithms do).
//
// Glossary: H = Eigen::half (f16) or Eigen::bfloat16 (bf16); widen = static_cast<float>(H),
// exact; round = H(float), to nearest even (Eigen's float_to_half_rtne / float_to_bfloat16_rtne).
#include "common/comm/mpi_float16.h"

#include <Eigen/Core>
#include <cmath>
#include <string>

#include "common/comm/mpi_util.h"
#include "common/runtime/check.h"

namespace llmp {
namespace {

static_assert(sizeof(Eigen::half) == 2 && sizeof(Eigen::bfloat16) == 2,
              "16-bit tensors hold 2-byte elements");

// inout[i] = round(widen(in[i]) + widen(inout[i])): one rounding per pairwise addition.
template <typename H>
void sum16(void* in, void* inout, int* len, MPI_Datatype* /*uint16*/) {
  const H* a = static_cast<const H*>(in);
  H* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = H(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

// inout[i] = the larger of in[i] and inout[i], bit for bit; NaN when either is NaN.
template <typename H>
void max16(void* in, void* inout, int* len, MPI_Datatype* /*uint16*/) {
  const H* a = static_cast<const H*>(in);
  H* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    if (!std::isnan(y) && (std::isnan(x) || x > y)) b[i] = a[i];
  }
}

struct Ops {
  MPI_Op sum_f16 = MPI_OP_NULL, max_f16 = MPI_OP_NULL;
  MPI_Op sum_bf16 = MPI_OP_NULL, max_bf16 = MPI_OP_NULL;
};

Ops g_ops;

// MPI_Finalize deletes MPI_COMM_SELF's attributes first, while MPI still works (MPI-3.1 §8.7.1):
// the place to free the ops whatever path finalises.
int free_ops(MPI_Comm, int, void*, void*) {
  for (MPI_Op* op : {&g_ops.sum_f16, &g_ops.max_f16, &g_ops.sum_bf16, &g_ops.max_bf16})
    if (*op != MPI_OP_NULL) MPI_Op_free(op);  // sets *op to MPI_OP_NULL
  return MPI_SUCCESS;
}

// Creates the four ops on the first call (thread-safe static initialisation).
const Ops& ops() {
  static const bool created = [] {
    LLMP_CHECK(mpi_up(), "16-bit reductions need MPI initialised and not yet finalised");
    MPI_CHECK(MPI_Op_create(&sum16<Eigen::half>, /*commute=*/1, &g_ops.sum_f16));
    MPI_CHECK(MPI_Op_create(&max16<Eigen::half>, /*commute=*/1, &g_ops.max_f16));
    MPI_CHECK(MPI_Op_create(&sum16<Eigen::bfloat16>, /*commute=*/1, &g_ops.sum_bf16));
    MPI_CHECK(MPI_Op_create(&max16<Eigen::bfloat16>, /*commute=*/1, &g_ops.max_bf16));
    int keyval = MPI_KEYVAL_INVALID;
    MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &free_ops, &keyval, nullptr));
    MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr));
    MPI_CHECK(MPI_Comm_free_keyval(&keyval));  // the attribute keeps it until it is deleted
    return true;
  }();
  (void)created;
  return g_ops;
}

template <typename H>
void scale16(void* p, int64_t n, float s) {
  H* h = static_cast<H*>(p);
  for (int64_t i = 0; i < n; ++i) h[i] = H(static_cast<float>(h[i]) * s);
}

}  // namespace

MPI_Op mpi_float16_op(DType t, ReduceOp op) {
  const bool max = op == ReduceOp::kMax;
  switch (t) {
    case DType::kF16: return max ? ops().max_f16 : ops().sum_f16;
    case DType::kBF16: return max ? ops().max_bf16 : ops().sum_bf16;
    default: break;
  }
  fail_at(__FILE__, __LINE__,
          std::string("mpi_float16_op: ") + to_string(t) + " is not a 16-bit float dtype");
}

void scale_float16(Tensor& t, float s) {
  switch (t.dtype()) {
    case DType::kF16: return scale16<Eigen::half>(t.raw(), t.numel(), s);
    case DType::kBF16: return scale16<Eigen::bfloat16>(t.raw(), t.numel(), s);
    default: break;
  }
  fail_at(__FILE__, __LINE__, "scale_float16: " + t.describe() + " is not f16 or bf16");
}

}  // namespace llmp
