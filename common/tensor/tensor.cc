#include "common/tensor/tensor.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>  // --config=asan (.bazelrc)
#endif

namespace llmp {

int64_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kF64: return 8;
    case DType::kU8: return 1;
  }
  throw std::invalid_argument("dtype_size: unknown dtype " + std::to_string(static_cast<int>(t)));
}

const char* to_string(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF64: return "f64";
    case DType::kU8: return "u8";
  }
  return "?";
}

DType parse_dtype(const std::string& s) {
  if (s == "f32" || s == "fp32" || s == "float32") return DType::kF32;
  if (s == "f16" || s == "fp16" || s == "float16") return DType::kF16;
  if (s == "bf16" || s == "bfloat16") return DType::kBF16;
  if (s == "f64" || s == "fp64" || s == "float64") return DType::kF64;
  if (s == "u8" || s == "uint8") return DType::kU8;
  throw std::invalid_argument("unknown dtype '" + s + "' (expected f32, f16, bf16, f64 or u8)");
}

const char* to_string(Device d) { return d == Device::kCPU ? "cpu" : "cuda"; }

namespace {
class CpuAllocator : public Allocator {
 public:
  void* allocate(int64_t bytes) override {
    // 64-byte alignment: whole cache lines, and what AVX-512 loads like.
    const int64_t size = ((bytes + 63) / 64) * 64 + 64;
    void* p = std::aligned_alloc(64, size);
    if (!p) throw std::bad_alloc();
#ifdef __SANITIZE_ADDRESS__
    // --config=asan: the rounding and the spare line are not the tensor's; poisoned, so that an
    // access one element past `bytes` (a loop running to n + 1) is reported, not silently allowed.
    ASAN_POISON_MEMORY_REGION(static_cast<char*>(p) + bytes, size - bytes);
#endif
    return p;
  }
  void deallocate(void* p, int64_t bytes) override {
#ifdef __SANITIZE_ADDRESS__
    ASAN_UNPOISON_MEMORY_REGION(p, ((bytes + 63) / 64) * 64 + 64);
#endif
    std::free(p);
  }
};

Allocator*& slot(Device d) {
  static Allocator* slots[2] = {nullptr, nullptr};
  return slots[static_cast<int>(d)];
}
}  // namespace

void register_allocator(Device d, Allocator* a) { slot(d) = a; }

void Allocator::set_zero(void* p, int64_t bytes) { std::memset(p, 0, static_cast<size_t>(bytes)); }

void Allocator::fill_f32(float* p, int64_t n, float value) {
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

void Allocator::copy(void* dst, Device /*dst_device*/, const void* src, Device /*src_device*/,
                     int64_t bytes) {
  std::memmove(dst, src, static_cast<size_t>(bytes));
}

void Allocator::copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
                        int64_t width, int64_t rows, Device device) {
  for (int64_t r = 0; r < rows; ++r)
    copy(static_cast<char*>(dst) + r * dst_pitch, device,
         static_cast<const char*>(src) + r * src_pitch, device, width);
}

Allocator& allocator_for(Device d) {
  if (d == Device::kCPU && !slot(d)) {
    static CpuAllocator cpu;
    slot(d) = &cpu;
  }
  if (!slot(d))
    throw std::runtime_error(std::string("no allocator for device ") + to_string(d) +
                             " (this binary was built without CUDA or no GPU is present)");
  return *slot(d);
}

Storage::Storage(int64_t bytes, Device device, MemCategory category, MemTag tag, Allocator* from)
    : bytes_(bytes), device_(device), category_(category), tag_(tag) {
  allocator_ = from ? from : &allocator_for(device);
  data_ = allocator_->allocate_for(bytes, category);
  MemoryTracker::instance().on_alloc(category, bytes, tag, device);
}

Storage::~Storage() {
  allocator_->deallocate(data_, bytes_);
  MemoryTracker::instance().on_free(category_, bytes_, tag_, device_);
}

const int32_t* ids_on(Device device, const int32_t* host, int64_t n, Tensor& keep) {
  if (device == Device::kCPU) return host;
  keep = Tensor::empty({4 * n}, DType::kU8, MemCategory::kActivations, device);
  allocator_for(device).copy(keep.raw(), device, host, Device::kCPU, 4 * n);
  return static_cast<const int32_t*>(keep.raw());
}

void wait_for_device(Device device) {
  if (device == Device::kCPU) return;
  const Tensor on_device = Tensor::zeros({1}, DType::kF32, MemCategory::kOther, device);
  Tensor::empty({1}, DType::kF32, MemCategory::kOther).copy_from(on_device);
}

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_str(shape));
    n *= d;
  }
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) os << ",";
  os << ")";
  return os.str();
}

Tensor Tensor::empty(std::vector<int64_t> shape, DType dtype, MemCategory category, Device device) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(t.numel_ * dtype_size(dtype), device, category);
  return t;
}

Tensor Tensor::empty_from(Allocator& from, std::vector<int64_t> shape, DType dtype,
                          MemCategory category, Device device) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(t.numel_ * dtype_size(dtype), device, category,
                                         MemTag::kNone, &from);
  return t;
}

Tensor Tensor::empty_tagged(std::vector<int64_t> shape, DType dtype, MemCategory category,
                            MemTag tag, Device device) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(t.numel_ * dtype_size(dtype), device, category, tag);
  return t;
}

Tensor Tensor::zeros(std::vector<int64_t> shape, DType dtype, MemCategory category, Device device) {
  Tensor t = empty(std::move(shape), dtype, category, device);
  allocator_for(device).set_zero(t.raw(), t.nbytes());
  return t;
}

void* Tensor::raw() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

float* Tensor::f32() const {
  if (dtype_ != DType::kF32)
    throw std::runtime_error("f32() called on a " + std::string(to_string(dtype_)) + " tensor " +
                             shape_str(shape_));
  return data<float>();
}

double* Tensor::f64() const {
  if (dtype_ != DType::kF64)
    throw std::runtime_error("f64() called on a " + std::string(to_string(dtype_)) + " tensor " +
                             shape_str(shape_));
  return data<double>();
}

Tensor Tensor::view(std::vector<int64_t> shape) const {
  if (shape_numel(shape) != numel_)
    throw std::invalid_argument("view " + shape_str(shape) + " does not match " + shape_str(shape_));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::narrow(int64_t offset, int64_t count) const {
  if (offset < 0 || count < 0 || offset + count > numel_)
    throw std::out_of_range("narrow(" + std::to_string(offset) + ", " + std::to_string(count) +
                            ") outside a tensor of " + std::to_string(numel_) + " elements");
  Tensor t = *this;
  t.offset_bytes_ = offset_bytes_ + offset * dtype_size(dtype_);
  t.shape_ = {count};
  t.numel_ = count;
  return t;
}

void Tensor::fill(float value) {
  Allocator& a = allocator_for(device());
  if (value == 0.0f) {  // all-zero bits are 0 in every dtype: a 16-bit gradient buffer's reset
    a.set_zero(raw(), nbytes());
    return;
  }
  if (dtype_ != DType::kF32)
    throw std::runtime_error("Tensor::fill(" + std::to_string(value) + ") on " + describe() +
                             ": a non-zero fill supports f32 only");
  a.fill_f32(f32(), numel_, value);
}

void Tensor::copy_from(const Tensor& src) {
  if (src.numel_ != numel_ || src.dtype_ != dtype_)
    throw std::invalid_argument("copy_from: " + src.describe() + " into " + describe());
  // The device that is not the host does the copy (both on the host: the CPU allocator's memmove).
  const Device by = device() != Device::kCPU ? device() : src.device();
  allocator_for(by).copy(raw(), device(), src.raw(), src.device(), nbytes());
}

std::string Tensor::describe() const {
  return shape_str(shape_) + " " + to_string(dtype_) + " " + to_string(device());
}

namespace {

// The runs `r` of a strided copy inside `t` (numel elements): "" if they lie in it and apart.
std::string runs_error(const char* side, const Tensor& t, StridedRuns r, int64_t width,
                       int64_t rows) {
  const std::string runs = std::string(side) + " runs (offset " + std::to_string(r.offset) +
                           ", stride " + std::to_string(r.stride) + ", width " +
                           std::to_string(width) + ", rows " + std::to_string(rows) + ")";
  if (r.offset < 0 || r.stride < 0) return runs + ": negative offset or stride";
  if (rows > 1 && r.stride < width) return runs + " overlap: stride < width";
  if (r.offset + (rows - 1) * r.stride + width > t.numel())
    return runs + " end at element " + std::to_string(r.offset + (rows - 1) * r.stride + width) +
           ", past the " + std::to_string(t.numel()) + " of " + t.describe();
  return "";
}

}  // namespace

void copy_strided(const Tensor& dst, StridedRuns d, const Tensor& src, StridedRuns s,
                  int64_t width, int64_t rows) {
  if (dst.dtype() != src.dtype() || dst.device() != src.device())
    throw std::invalid_argument("copy_strided: " + src.describe() + " into " + dst.describe() +
                                " (one dtype, one device)");
  if (width < 0 || rows < 0)
    throw std::invalid_argument("copy_strided: width " + std::to_string(width) + ", rows " +
                                std::to_string(rows) + " (neither may be negative)");
  if (width == 0 || rows == 0) return;
  for (const std::string& err :
       {runs_error("dst", dst, d, width, rows), runs_error("src", src, s, width, rows)})
    if (!err.empty()) throw std::invalid_argument("copy_strided: " + err);
  const int64_t es = dtype_size(dst.dtype());
  char* to = static_cast<char*>(dst.raw()) + d.offset * es;
  const char* from = static_cast<const char*>(src.raw()) + s.offset * es;
  const int64_t to_end = ((rows - 1) * d.stride + width) * es,
                from_end = ((rows - 1) * s.stride + width) * es;
  if (to < from + from_end && from < to + to_end)  // the spans overlap: undefined for cudaMemcpy2D
    throw std::invalid_argument("copy_strided: the dst runs of " + dst.describe() +
                                " overlap the src runs of " + src.describe() + " in memory");
  allocator_for(dst.device()).copy_2d(to, d.stride * es, from, s.stride * es, width * es, rows,
                                      dst.device());
}

void swap_leading_dims(const Tensor& dst, const Tensor& src, int64_t a, int64_t b) {
  if (a < 1 || b < 1 || src.numel() % (a * b) != 0 || dst.numel() != src.numel())
    throw std::invalid_argument("swap_leading_dims: (" + std::to_string(a) + ", " +
                                std::to_string(b) + ", ·) of " + src.describe() + " into " +
                                dst.describe());
  const int64_t rest = src.numel() / (a * b);
  if (a <= b) {
    for (int64_t i = 0; i < a; ++i)  // dst[:, i, :] = src[i, :, :]: b runs
      copy_strided(dst, {i * rest, a * rest}, src, {i * b * rest, rest}, rest, b);
  } else {
    for (int64_t j = 0; j < b; ++j)  // dst[j, :, :] = src[:, j, :]: a runs
      copy_strided(dst, {j * a * rest, rest}, src, {j * rest, b * rest}, rest, a);
  }
}

}  // namespace llmp
