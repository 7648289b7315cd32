// The per-device registry of KernelOps, Fp32Copy and round_counted (the CPU table itself:
// cpu_kernel_ops.cc).
#include "kernels/ops/kernel_ops.h"

#include <stdexcept>
#include <string>

#include "kernels/ops/cpu_kernel_ops.h"

namespace llmp {

void KernelOps::set_matmul_operands(DType d) {
  if (d != DType::kF32 && d != DType::kF16 && d != DType::kBF16)
    throw std::invalid_argument(std::string("set_matmul_operands: ") + to_string(d) +
                                " is none of f32, f16, bf16");
  matmul_operands_ = d;
}

namespace {

KernelOps*& slot(Device d) {
  static KernelOps* slots[2] = {nullptr, nullptr};
  return slots[static_cast<int>(d)];
}

}  // namespace

Fp32Copy::Fp32Copy(const void* p, DType dtype, int64_t n, Device device, bool load, bool store)
    : p_(const_cast<void*>(p)), dtype_(dtype), n_(n), store_(store) {
  if (dtype == DType::kF32) {
    f32_ = static_cast<float*>(p_);
    store_ = false;
    return;
  }
  if (dtype != DType::kF16 && dtype != DType::kBF16)
    throw std::invalid_argument(std::string("Fp32Copy: dtype ") + to_string(dtype) +
                                " is none of f32, f16, bf16");
  tmp_ = Tensor::empty({n}, DType::kF32, MemCategory::kOther, device);
  f32_ = tmp_.f32();
  if (load) kernel_ops(device).widen(p, dtype, f32_, n);
  if (load && !store) {  // read-only: p's exact widening for its whole life
    kernel_ops(device).note_source(f32_, p, dtype, n);
    noted_ = true;
  }
}

Fp32Copy::Fp32Copy(Act a, ActIn initial, int64_t n, Device device)
    : Fp32Copy(a.p, a.dtype, n, device, /*load=*/initial.p == a.p, /*store=*/true) {
  if (initial.p != a.p) kernel_ops(device).widen(initial.p, initial.dtype, f32_, n);
}

Fp32Copy::~Fp32Copy() {
  store();
  if (noted_) kernel_ops(tmp_.device()).forget_source(f32_);  // before tmp_ is freed
}

void Fp32Copy::store() {
  if (!store_) return;
  store_ = false;
  kernel_ops(tmp_.device()).round_to(f32_, p_, dtype_, n_);
  tmp_ = Tensor();  // the copy is done with: freed now, not at the end of the scope
  f32_ = nullptr;
}

KernelOps& kernel_ops(Device d) {
  if (d == Device::kCPU && !slot(d)) {
    slot(d) = &cpu_kernel_ops();
  }
  if (!slot(d))
    throw std::runtime_error(std::string("no kernels for device ") + to_string(d) +
                             " (this binary does not link kernels/cuda:ops, or was built without "
                             "CUDA)");
  return *slot(d);
}

void register_kernel_ops(Device d, KernelOps* ops) { slot(d) = ops; }

std::string device_unavailable_reason(Device d) {
  try {
    return kernel_ops(d).unavailable_reason();
  } catch (const std::exception& e) {
    return e.what();
  }
}

// ---- rounding statistics on any device (kernel_ops.h, round_counted).
void round_counted(KernelOps& ops, const float* src, void* dst, DType dst_dtype, int64_t n,
                   bool accumulate, cpu::RoundStats* stats) {
  cpu::RoundStats* counted_here = ops.device() == Device::kCPU ? stats : nullptr;
  if (stats && !counted_here) *stats += ops.count_rounding(src, dst, dst_dtype, n, accumulate);
  if (accumulate) ops.accumulate_to(src, dst, dst_dtype, n, counted_here);
  else ops.round_to(src, dst, dst_dtype, n, counted_here);
}

}  // namespace llmp