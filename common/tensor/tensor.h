// Tensor: a shape, a dtype, a device and a view into contiguous, reference-counted storage.
//
// This is deliberately small: no autograd, no broadcasting, no strides. Layers do their own math
// on raw pointers (common/nn, kernels/) and state their shapes in comments. What the Tensor adds
// is (1) ownership, (2) the memory category each buffer is counted under (common/tensor/memory.h),
// which is how every stage measures its per-rank memory, and (3) views: narrow() of a flat buffer
// is how a rank names its shard of the parameters without copying.
//
// Glossary: numel = number of elements; nbytes = numel * dtype_size(dtype).
// Host dtypes: f32 = float, f16 = Eigen::half, bf16 = Eigen::bfloat16 (IEEE / brain float 16),
// f64 = double and u8 = uint8_t. The model computes in f32 (f16/bf16 for mixed precision); f64 and
// u8 are for bookkeeping that travels through a ProcessGroup: metrics summed exactly (f64) and
// serialised records such as trace spans (u8, bytes that are moved, never added).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/tensor/memory.h"

namespace llmp {

enum class DType { kF32, kF16, kBF16, kF64, kU8 };
// enum class Device { kCPU, kCUDA }: common/tensor/memory.h (the tracker counts bytes per device).

/// Bytes per element: 4 for f32, 2 for f16 and bf16, 8 for f64, 1 for u8.
int64_t dtype_size(DType t);
/// "f32", "f16", "bf16", "f64", "u8". parse_dtype also takes "fp32"/"float32", "fp16"/"float16",
/// "bfloat16", "fp64"/"float64" and "uint8"; it throws std::invalid_argument naming the value
/// otherwise.
const char* to_string(DType t);
DType parse_dtype(const std::string& s);
const char* to_string(Device d);

/// Allocates and frees raw bytes on one device. The CPU allocator is built in; the CUDA one
/// (kernels/cuda/device_allocator) registers itself when linked into a CUDA build.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(int64_t bytes) = 0;
  virtual void deallocate(void* p, int64_t bytes) = 0;
  /// What Storage calls: `bytes` for a buffer counted under `category`. An allocator that places
  /// buffers by lifetime (common/tensor/arena.h, --defrag) overrides it; the default ignores it.
  virtual void* allocate_for(int64_t bytes, MemCategory /*category*/) { return allocate(bytes); }

  // --- The memory operations Tensor::zeros, fill and copy_from need on this allocator's device.
  // The defaults are the host's (memset, a loop, memmove); a device allocator overrides all three
  // (kernels/cuda/device_allocator: cudaMemset, a fill kernel, cudaMemcpy). Each is complete
  // before anything issued after it reads the memory: on the host, when it returns; on a GPU,
  // in stream order (a later kernel, copy or collective waits for it; a host read is a copy,
  // which waits), without making the host wait for the device. ---

  /// Sets `bytes` bytes at p (memory of this allocator's device) to zero.
  virtual void set_zero(void* p, int64_t bytes);
  /// Sets the n floats at p (memory of this allocator's device) to `value`.
  virtual void fill_f32(float* p, int64_t n, float value);
  /// Copies `bytes` from src (on src_device) to dst (on dst_device); one of the two devices is
  /// this allocator's, the other is it too or the host. Overlapping ranges on one device are
  /// copied as memmove does.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    int64_t bytes);
  /// Copies `rows` runs of `width` bytes, run r from src + r·src_pitch to dst + r·dst_pitch, both
  /// on `device` (this allocator's), the runs of each side apart (pitch ≥ width) and the two
  /// sides not overlapping: one strided copy where copy() would be called once per run
  /// (cudaMemcpy2D's semantics). The default calls copy() once per run; a device allocator
  /// overrides it with one call (kernels/cuda/device_allocator: cudaMemcpy2DAsync), so a
  /// re-layout of B·T rows costs the host one call, not B·T.
  virtual void copy_2d(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
                       int64_t width, int64_t rows, Device device);
};
void register_allocator(Device d, Allocator* a);
/// Throws std::runtime_error("no allocator for device cuda ...") when none is registered.
Allocator& allocator_for(Device d);

/// Owns one allocation and keeps it counted in the MemoryTracker under `category` while alive.
class Storage {
 public:
  /// `tag`: a finer label counted beside the category (memory.h), kNone for most buffers.
  /// `from`: the allocator to take the bytes from (memory of `device`), nullptr for the one
  /// registered for `device` (allocator_for).
  Storage(int64_t bytes, Device device, MemCategory category, MemTag tag = MemTag::kNone,
          Allocator* from = nullptr);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  MemCategory category() const { return category_; }

 private:
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  Device device_;
  MemCategory category_;
  MemTag tag_ = MemTag::kNone;
  /// The allocator the bytes came from, given them back even if another was registered since.
  Allocator* allocator_ = nullptr;
};

class Tensor {
 public:
  /// An undefined tensor (no storage, numel 0).
  Tensor() = default;

  /// Uninitialised tensor of `shape`. Counted under `category` until the last view dies.
  static Tensor empty(std::vector<int64_t> shape, DType dtype = DType::kF32,
                      MemCategory category = MemCategory::kOther, Device device = Device::kCPU);
  /// empty(), its bytes from `from` instead of the allocator registered for `device` (`from`
  /// hands out memory of `device`): e.g. pinned host memory for the MPI backend's staging
  /// buffers (common/comm/process_group_staging.h), a host tensor like any other otherwise.
  static Tensor empty_from(Allocator& from, std::vector<int64_t> shape, DType dtype,
                           MemCategory category, Device device = Device::kCPU);
  /// empty(), counted also under `tag` (memory.h): e.g. attention scores among the activations.
  static Tensor empty_tagged(std::vector<int64_t> shape, DType dtype, MemCategory category,
                             MemTag tag, Device device = Device::kCPU);
  /// Zero-filled (host memset, or the device allocator's set_zero: cudaMemset for CUDA).
  static Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::kF32,
                      MemCategory category = MemCategory::kOther, Device device = Device::kCPU);

  bool defined() const { return storage_ != nullptr; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  int64_t nbytes() const { return numel_ * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::kCPU; }
  MemCategory category() const { return storage_ ? storage_->category() : MemCategory::kOther; }

  /// Pointer to the first element of this view.
  void* raw() const;
  template <typename T>
  T* data() const { return static_cast<T*>(raw()); }
  /// Checked access for f32 tensors: throws if dtype is not f32.
  float* f32() const;
  /// Checked access for f64 tensors: throws if dtype is not f64.
  double* f64() const;

  /// Same storage, new shape with the same numel (throws naming both shapes otherwise).
  Tensor view(std::vector<int64_t> shape) const;
  /// Flat view of elements [offset, offset + count) of this (contiguous) tensor, shape {count}.
  /// This is how a rank addresses its shard of a flat parameter or gradient buffer.
  Tensor narrow(int64_t offset, int64_t count) const;

  /// Fill every element with `value`, on the tensor's device (the device allocator's set_zero
  /// and fill_f32): f32 any value; 0 for every dtype. Throws std::runtime_error naming the
  /// tensor for a non-zero value on a non-f32 tensor.
  void fill(float value);
  /// Copy all elements from `src` (same numel and dtype, else std::invalid_argument naming
  /// both), across devices too: host -> host is a memmove, any copy touching a device goes
  /// through that device's allocator (cudaMemcpy for CUDA). Synchronous.
  void copy_from(const Tensor& src);

  /// "(4, 64, 128) f32 cpu".
  std::string describe() const;

 private:
  std::shared_ptr<Storage> storage_;
  int64_t offset_bytes_ = 0;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kF32;
};

/// Where the runs of a strided copy lie in a flat tensor: run r starts at element
/// offset + r·stride (elements, not bytes).
struct StridedRuns {
  int64_t offset = 0;
  int64_t stride = 0;
};

/// The strided copy that every re-layout of activations is made of (a head split, a rank's
/// block of each row): for r in [0, rows), dst's elements [d.offset + r·d.stride, + width) =
/// src's [s.offset + r·s.stride, + width), with dst and src read as flat buffers. One
/// Allocator::copy_2d on their device: a single cudaMemcpy2DAsync on a GPU, where a copy per run
/// would be rows calls (Ulysses' head re-layout: B·T/p runs per head group and part). Both on
/// one device, one dtype; ordered as copy_from is (on a GPU in stream order, the host not made to
/// wait). Throws std::invalid_argument naming the values for another dtype or device, a run
/// outside its tensor, runs of one side that overlap (stride < width with rows > 1), a negative
/// offset, stride, width or rows, and dst's span (its first run's start to its last run's end)
/// overlapping src's in memory. rows or width 0: nothing is copied.
void copy_strided(const Tensor& dst, StridedRuns d, const Tensor& src, StridedRuns s,
                  int64_t width, int64_t rows);

/// The swap of a flat buffer's two leading dimensions, dst (b, a, rest) = src (a, b, rest) with
/// rest = src.numel() / (a·b): the re-layout between a collective's rank-major buffer and the
/// layout with the rank second (tp mappings' (t, outer, ·) <-> (outer, t, ·), Ulysses' rows of
/// each rank, MoE's (ep, E/ep, ·) <-> (E/ep, ep, ·)). min(a, b) copy_strided calls. Throws
/// std::invalid_argument naming the values when a or b is below 1, a·b does not divide src's
/// elements or dst holds another number of them, and as copy_strided.
void swap_leading_dims(const Tensor& dst, const Tensor& src, int64_t a, int64_t b);

/// The n token ids (or positions) at `host` where the kernels of `device` read them: `host`
/// itself on the CPU, else a copy in that device's memory (4n bytes up), held by `keep` (u8,
/// counted under kActivations: ids are moved, never added) as long as the kernels need it.
const int32_t* ids_on(Device device, const int32_t* host, int64_t n, Tensor& keep);

/// Returns once `device` has finished every operation issued to it so far (4 bytes copied from a
/// buffer of that device to the host: such a copy is ordered after all of them, Allocator). What
/// a wall clock around device work reads last. Nothing on the CPU, whose operations are done when
/// they return.
void wait_for_device(Device device);

/// Product of the dimensions (1 for a scalar shape {}).
int64_t shape_numel(const std::vector<int64_t>& shape);
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace llmp
