// The CUDA emulator's runtime (include/cuda_runtime.h) and cuBLAS (include/cublas_v2.h): the
// checks a GPU's runtime and cuBLAS make, and cuBLAS's column-major products, against values
// worked by hand.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace llmp::cuda {
namespace {

/// n floats of emulated device memory holding `values`, freed at the end of the scope.
struct DeviceFloats {
  float* p = nullptr;
  explicit DeviceFloats(const std::vector<float>& values) {
    EXPECT_EQ(cudaMalloc(&p, values.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(p); }
  std::vector<float> get(size_t n) const {
    std::vector<float> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

TEST(CudaEmulatorRuntime, CopiesAndSetsMustLandWhereTheirKindSays) {
  std::vector<float> host(8, 1.0f);
  DeviceFloats dev(host);
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 4, 16, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);  // the destination is host memory
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "reading the last error resets it";
  EXPECT_EQ(cudaMemcpy(dev.p + 4, host.data(), 8 * sizeof(float), cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);  // runs 16 bytes past the allocation
  EXPECT_EQ(cudaMemset(host.data(), 0, 4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(dev.p, 0, 8 * sizeof(float)), cudaSuccess);
  EXPECT_EQ(dev.get(8), std::vector<float>(8, 0.0f));
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidDevicePointer);
  cudaGetLastError();
}

__global__ void twice(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}

TEST(CudaEmulatorRuntime, LaunchesRefuseHostPointersAndEmptyGrids) {
  std::vector<float> host{1, 2, 3};
  DeviceFloats dev(host);
  // kernel<<<1, 32>>>(args) as cu_to_cc writes it
  emu::launcher([&](auto&&... a) { twice(a...); }, dim3(1), dim3(32))(dev.p, 3);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(dev.get(3), (std::vector<float>{2, 4, 6}));
  emu::launcher([&](auto&&... a) { twice(a...); }, dim3(1), dim3(32))(host.data(), 3);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "a host pointer among the arguments";
  EXPECT_EQ(host, (std::vector<float>{1, 2, 3})) << "the refused launch ran nothing";
  emu::launcher([&](auto&&... a) { twice(a...); }, dim3(0), dim3(32))(dev.p, 3);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  const int rows = -1;  // a negative count cast to the grid: 4,294,967,295 blocks
  emu::launcher([&](auto&&... a) { twice(a...); }, dim3(rows), dim3(32))(dev.p, 3);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration) << "a grid over 2^31 - 1 blocks";
  emu::launcher([&](auto&&... a) { twice(a...); }, dim3(1, 65536), dim3(32))(dev.p, 3);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration) << "gridDim.y over 65535";
  EXPECT_EQ(dev.get(3), (std::vector<float>{2, 4, 6})) << "the refused launches ran nothing";
}

// C (2 × 2) = A (2 × 3) · B (3 × 2), all column-major as cuBLAS reads them, worked by hand:
// A = [1 2 3; 4 5 6] is stored 1 4 2 5 3 6, B = [1 0; 0 1; 1 1] is stored 1 0 1 0 1 1,
// A·B = [4 5; 10 11], stored 4 10 5 11. Then C = Aᵀ-form: the same product from A stored as its
// transpose (3 × 2, ld 3: 1 2 3 4 5 6) with CUBLAS_OP_T.
TEST(CudaEmulatorCublas, ColumnMajorProductsAsCublasDefinesThem) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  DeviceFloats A({1, 4, 2, 5, 3, 6}), At({1, 2, 3, 4, 5, 6}), B({1, 0, 1, 0, 1, 1}),
      C({9, 9, 9, 9});
  const float one = 1.0f, zero = 0.0f;
  ASSERT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A.p, 2, B.p, 3, &zero, C.p, 2),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(C.get(4), (std::vector<float>{4, 10, 5, 11})) << "β = 0: C's 9s are not read";
  ASSERT_EQ(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &one, At.p, 3, B.p, 3, &one, C.p, 2),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(C.get(4), (std::vector<float>{8, 20, 10, 22})) << "β = 1 accumulates";
  EXPECT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A.p, 1, B.p, 3, &zero, C.p, 2),
            CUBLAS_STATUS_INVALID_VALUE)
      << "lda 1 < m 2";
  EXPECT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 3, 3, &one, A.p, 2, B.p, 3, &zero, C.p, 2),
            CUBLAS_STATUS_INVALID_VALUE)
      << "n 3: B and C read past their allocations";
  cublasDestroy(h);
}

// bf16 operands, a bf16 C rounded once; TF32 rounds fp32 operands to 10 mantissa bits.
TEST(CudaEmulatorCublas, SixteenBitCAndTf32Rounding) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const float one = 1.0f, zero = 0.0f;
  // 1 × 1 products: A = 1 + 2⁻⁷ (a bf16 value), B = 1 + 2⁻⁷: A·B = 1 + 2⁻⁶ + 2⁻¹⁴, which a bf16 C
  // rounds to 1 + 2⁻⁶ (bits 0x3F82).
  uint16_t* ab = nullptr;
  ASSERT_EQ(cudaMalloc(&ab, 3 * sizeof(uint16_t)), cudaSuccess);
  const uint16_t bits[3] = {0x3F81, 0x3F81, 0};
  ASSERT_EQ(cudaMemcpy(ab, bits, sizeof(bits), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, ab, CUDA_R_16BF, 1, ab + 1,
                         CUDA_R_16BF, 1, &zero, ab + 2, CUDA_R_16BF, 1, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  uint16_t c = 0;
  ASSERT_EQ(cudaMemcpy(&c, ab + 2, 2, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(c, 0x3F82);
  cudaFree(ab);
  // fp32 A = 1 + 2⁻¹² is 1 in TF32 (10 mantissa bits): the product with B = 1 is 1 under TF32
  // math and 1 + 2⁻¹² without it.
  DeviceFloats A({1.0f + 1.0f / 4096}), B({1.0f}), C({0.0f});
  ASSERT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, A.p, 1, B.p, 1, &zero, C.p, 1),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(C.get(1)[0], 1.0f + 1.0f / 4096);
  ASSERT_EQ(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, A.p, 1, B.p, 1, &zero, C.p, 1),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(C.get(1)[0], 1.0f);
  cublasDestroy(h);
}

}  // namespace
}  // namespace llmp::cuda
