// y = x W + b and its backward through cuBLAS (see matmul.h; the arguments: gemm_args.cc), on
// 16-bit tensor cores under a SixteenBitOperands declaration (context.h), with the activations
// read and written in 16 bits where they are stored so.
#include "kernels/cuda/matmul.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda/context.h"
#include "kernels/cuda/device_util.h"
#include "kernels/cuda/dtype_io.h"
#include "kernels/cuda/gemm_args.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/residual.h"

namespace llmp {
namespace cuda {
namespace {

// y[n, o] = b[o] for every row n, stored in format F (16 bits: rounded; exact when b holds
// values of F): the bias the GEMM then accumulates onto (β = 1).
template <Fmt F>
__global__ void broadcast_rows_kernel(void* __restrict__ y, const float* __restrict__ b,
                                      int64_t N, int OC) {
  for (int64_t i = gs_begin(); i < N * OC; i += gs_step()) store_rounded<F>(y, i, b[i % OC]);
}

void broadcast_rows(void* y, Fmt f, const float* b, int N, int OC) {
  const int64_t n = static_cast<int64_t>(N) * OC;
  with_fmt(f, [&](auto t) {
    broadcast_rows_kernel<decltype(t)::value>
        <<<elementwise_blocks(n), kThreads, 0, stream()>>>(y, b, N, OC);
  });
  LLMP_LAUNCH_CHECK();
}

// The declared type (context.h sixteen_bit_operands) as a DType: kF32 when none is declared.
DType declared() {
  const cudaDataType_t t = sixteen_bit_operands();
  return t == CUDA_R_16BF ? DType::kBF16 : t == CUDA_R_16F ? DType::kF16 : DType::kF32;
}

// A stored activation handed to a product: f32 memory, or 16-bit memory of the declared type
// (is16 true), read or written by the product as it is. Anything else: std::invalid_argument.
bool is16(const char* entry, const char* name, DType d) {
  if (d == DType::kF32) return false;
  if (d == declared()) return true;
  const std::string what = std::string(entry) + ": " + name + " is " + to_string(d);
  if (d != DType::kBF16 && d != DType::kF16)
    throw std::invalid_argument(what + ", none of f32, f16, bf16");
  throw std::invalid_argument(what + ", yet the products were declared " + to_string(declared()) +
                              " operands (context.h SixteenBitOperands)");
}

// GemmArgs keeps fp32 pointers for the products' layout; a 16-bit buffer's own pointer stands in
// for its operand (batch 1: the operand starts at the buffer), and its 16 bits are handed to
// run_product beside the GemmArgs.
const float* layout(const void* p) { return static_cast<const float*>(p); }

// g, on 16-bit tensor cores when a SixteenBitOperands scope declared the operands 16-bit values
// (context.h): an operand given in 16 bits (a16, b16: an activation as stored) is read as it is;
// one inside a noted widening is read from its 16-bit source (sixteen_bit_sources()); any other
// has its extent rounded (exactly, it is such a value) into the workspace, A's copy first and
// B's 256 bytes aligned after it; then one run_gemm_16bit, into the 16-bit c16 when given (else
// g.C, fp32). Else run_gemm (a16, b16, c16 are nullptr then: is16 refused them).
void run_product(const GemmArgs& g, const void* a16 = nullptr, const void* b16 = nullptr,
                 void* c16 = nullptr) {
  const cudaDataType_t type = sixteen_bit_operands();
  if (type == CUDA_R_32F) {
    run_gemm(g);
    return;
  }
  const DType d = declared();
  const int64_t na = a_extent(g), nb = b_extent(g);
  if (!a16) a16 = noted_sixteen_bit_source(g.A, na, d);
  if (!b16) b16 = noted_sixteen_bit_source(g.B, nb, d);
  const int64_t a_bytes = a16 ? 0 : (na * 2 + 255) / 256 * 256, b_bytes = b16 ? 0 : nb * 2;
  if (a_bytes + b_bytes > 0) {
    char* ws = static_cast<char*>(workspace(static_cast<size_t>(a_bytes + b_bytes)));
    if (!a16) {
      round_to(g.A, ws, d, na);
      a16 = ws;
    }
    if (!b16) {
      round_to(g.B, ws + a_bytes, d, nb);
      b16 = ws + a_bytes;
    }
  }
  run_gemm_16bit(g, a16, b16, type, c16);
}

}  // namespace

void matmul_forward(float* y, const float* x, const float* W, const float* bias, int N, int C,
                    int OC) {
  matmul_forward(y, DType::kF32, x, DType::kF32, W, bias, N, C, OC);
}

void matmul_forward(void* y, DType y_dtype, const void* x, DType x_dtype, const float* W,
                    const float* bias, int N, int C, int OC) {
  const bool y16 = is16("matmul_forward", "y", y_dtype), x16 = is16("matmul_forward", "x", x_dtype);
  if (bias) broadcast_rows(y, fmt_of(y_dtype, "matmul_forward"), bias, N, OC);
  const GemmArgs g = matmul_forward_gemm(static_cast<float*>(y), layout(x), W, N, C, OC,
                                         bias ? 1.0f : 0.0f);
  run_product(g, nullptr, x16 ? x : nullptr, y16 ? y : nullptr);  // A = W, B = x, C = y
}

void matmul_backward(float* dx, float* dW, float* db, const float* dy, const float* x,
                     const float* W, int N, int C, int OC) {
  if (dx) matmul_backward_input(dx, dy, W, N, C, OC);
  matmul_backward_weight(dW, db, dy, x, N, C, OC);
}

void matmul_backward_input(float* dx, const float* dy, const float* W, int N, int C, int OC) {
  matmul_backward_input(dx, DType::kF32, dy, DType::kF32, W, N, C, OC);
}

void matmul_backward_input(void* dx, DType dx_dtype, const void* dy, DType dy_dtype,
                           const float* W, int N, int C, int OC) {
  const bool dx16 = is16("matmul_backward_input", "dx", dx_dtype);
  const bool dy16 = is16("matmul_backward_input", "dy", dy_dtype);
  const GemmArgs g = matmul_backward_input_gemm(static_cast<float*>(dx), layout(dy), W, N, C, OC);
  run_product(g, nullptr, dy16 ? dy : nullptr, dx16 ? dx : nullptr);  // A = W, B = dy, C = dx
}

void matmul_backward_weight(float* dW, float* db, const float* dy, const float* x, int N, int C,
                            int OC) {
  matmul_backward_weight(dW, db, dy, DType::kF32, x, DType::kF32, N, C, OC);
}

void matmul_backward_weight(float* dW, float* db, const void* dy, DType dy_dtype, const void* x,
                            DType x_dtype, int N, int C, int OC) {
  const bool dy16 = is16("matmul_backward_weight", "dy", dy_dtype);
  const bool x16 = is16("matmul_backward_weight", "x", x_dtype);
  const GemmArgs g = matmul_backward_weight_gemm(dW, layout(dy), layout(x), N, C, OC);
  run_product(g, dy16 ? dy : nullptr, x16 ? x : nullptr);  // A = dy, B = x, C = dW (fp32)
  if (db) residual_bias_backward(db, dy, N, OC, dy_dtype);  // db (OC) += Σ_rows dy (N,OC)
}

void matmul_nt_forward(float* y, const float* x, const float* Wt, int N, int C, int OC) {
  run_product(matmul_nt_forward_gemm(y, x, Wt, N, C, OC));
}

void matmul_nt_backward(float* dx, float* dWt, const float* dy, const float* x, const float* Wt,
                        int N, int C, int OC) {
  if (dx) run_product(matmul_nt_backward_input_gemm(dx, dy, Wt, N, C, OC));
  run_product(matmul_nt_backward_weight_gemm(dWt, dy, x, N, C, OC));
}

}  // namespace cuda
}  // namespace llmp
