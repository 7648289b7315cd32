// The emulated CUDA runtime (include/cuda_runtime.h): devices whose memory is host memory, a
// registry of its allocations, synchronous copies and sets checked against the registry (each
// first waiting for what its stream has queued: streams.cc).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "cuda_runtime.h"

namespace llmp::cuda::emu {
namespace {

struct Runtime {
  std::mutex mu;
  std::map<uintptr_t, size_t> allocations;  // begin -> bytes
  cudaError_t last = cudaSuccess;
  std::string last_why;
};

Runtime& rt() {
  static Runtime* r = new Runtime;  // never destroyed: tensors may be freed at exit
  return *r;
}

// The allocation holding [p, p + bytes) (bytes 0: p itself, or one past the end), or end().
std::map<uintptr_t, size_t>::const_iterator holding(const Runtime& r, const void* p, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = r.allocations.upper_bound(a);
  if (it == r.allocations.begin()) return r.allocations.end();
  --it;
  return a + bytes <= it->first + it->second ? it : r.allocations.end();
}

cudaError_t sticky(cudaError_t err) {
  rt().last = err;
  return err;
}

}  // namespace

bool is_device_pointer(const void* p) { return is_device_range(p, 0); }

bool is_device_range(const void* p, size_t bytes) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> lock(r.mu);
  return holding(r, p, bytes) != r.allocations.end();
}

void set_launch_error(cudaError_t err, const std::string& why) {
  rt().last = err;
  rt().last_why = why;
  std::fprintf(stderr, "CUDA emulator: launch refused: %s\n", why.c_str());
}

void note_not_ready() { rt().last = cudaErrorNotReady; }

cudaError_t set_func_attribute(const void* kernel, int attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<size_t>(value) > kMaxDynamicSmem)
    return sticky(cudaErrorInvalidValue);
  (void)kernel;
  return cudaSuccess;
}

}  // namespace llmp::cuda::emu

using llmp::cuda::emu::is_device_range;
using llmp::cuda::emu::rt;

namespace {
// $LLMP_CUDA_EMULATOR_DEVICES (1 to 64), else 1. A bad value ends the process naming it.
int device_count() {
  static const int n = [] {
    const char* env = std::getenv("LLMP_CUDA_EMULATOR_DEVICES");
    if (!env || !*env) return 1;
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end != '\0' || v < 1 || v > 64) {
      std::fprintf(stderr, "CUDA emulator: LLMP_CUDA_EMULATOR_DEVICES=%s is not 1 to 64\n", env);
      std::exit(2);
    }
    return static_cast<int>(v);
  }();
  return n;
}
int current_device = 0;
bool valid_device(int d) { return d >= 0 && d < device_count(); }
}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = current_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return llmp::cuda::emu::sticky(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!valid_device(device)) return llmp::cuda::emu::sticky(cudaErrorInvalidDevice);
  if (attr != cudaDevAttrMaxSharedMemoryPerBlockOptin)
    return llmp::cuda::emu::sticky(cudaErrorInvalidValue);
  *value = static_cast<int>(llmp::cuda::emu::kMaxDynamicSmem);
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = rt().last;
  rt().last = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return rt().last; }

const char* cudaGetErrorName(cudaError_t err) {
  switch (err) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer:
      return "cudaErrorInvalidDevicePointer";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}
const char* cudaGetErrorString(cudaError_t err) {
  switch (err) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
  }
  return "unknown error";
}

namespace llmp::cuda::emu {
namespace {
cudaError_t allocate(void** p, size_t bytes, const char* call) {
  count_call(CallKind::kAlloc, call, static_cast<double>(bytes));
  *p = std::malloc(bytes == 0 ? 1 : bytes);
  if (*p == nullptr) return sticky(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> lock(rt().mu);
  rt().allocations[reinterpret_cast<uintptr_t>(*p)] = bytes;
  return cudaSuccess;
}
cudaError_t release(void* p) {
  if (p == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (rt().allocations.erase(reinterpret_cast<uintptr_t>(p)) == 0)
      return sticky(cudaErrorInvalidDevicePointer);
  }
  std::free(p);
  return cudaSuccess;
}
}  // namespace
}  // namespace llmp::cuda::emu

cudaError_t cudaMalloc(void** p, size_t bytes) {
  return llmp::cuda::emu::allocate(p, bytes, "cudaMalloc");
}
// cudaFree waits for the whole device on a GPU (what the stream-ordered pool avoids).
cudaError_t cudaFree(void* p) {
  if (p) llmp::cuda::emu::count_call(llmp::cuda::emu::CallKind::kSync, "cudaFree");
  return llmp::cuda::emu::release(p);
}
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) {
  return llmp::cuda::emu::allocate(p, bytes, "cudaMallocAsync");
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return llmp::cuda::emu::release(p); }
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  static int the_pool = 0;
  if (!valid_device(device)) return llmp::cuda::emu::sticky(cudaErrorInvalidDevice);
  *pool = reinterpret_cast<cudaMemPool_t>(&the_pool);
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void*) { return cudaSuccess; }

namespace {
// Whether a copy of `bytes` in direction `kind` has each side where the kind says it is.
bool copy_sides_ok(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return true;
  const bool dst_dev = is_device_range(dst, bytes), src_dev = is_device_range(src, bytes);
  switch (kind) {
    case cudaMemcpyHostToHost:
      return !dst_dev && !src_dev;
    case cudaMemcpyHostToDevice:
      return dst_dev && !src_dev;
    case cudaMemcpyDeviceToHost:
      return !dst_dev && src_dev;
    case cudaMemcpyDeviceToDevice:
      return dst_dev && src_dev;
    case cudaMemcpyDefault:
      return true;
  }
  return false;
}
}  // namespace

namespace {
cudaError_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (!copy_sides_ok(dst, src, bytes, kind)) return llmp::cuda::emu::sticky(cudaErrorInvalidValue);
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

// Counts a copy by direction (api_counts.h) and, where it makes the host wait for the device
// on a GPU, a sync: cudaMemcpy unless device to device; cudaMemcpyAsync between the device and
// pageable host memory (CUDA's "API synchronization behavior").
void count_copy(const char* call, const void* dst, const void* src, size_t bytes, bool async) {
  namespace e = llmp::cuda::emu;
  const bool dst_dev = e::is_device_pointer(dst), src_dev = e::is_device_pointer(src);
  const char* dir = src_dev ? (dst_dev ? "D2D" : "D2H") : (dst_dev ? "H2D" : "H2H");
  const std::string name = std::string(call) + " " + dir;
  e::count_call(e::CallKind::kCopy, name, static_cast<double>(bytes));
  const void* host = dst_dev ? src : dst;
  const bool device_only = src_dev && dst_dev;
  if (!device_only && (!async || !e::is_pinned_range(host, bytes)))
    e::count_call(e::CallKind::kSync, async ? name + ", pageable host memory" : name);
}
}  // namespace

// The synchronous forms run on the legacy default stream: after what is queued there.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  llmp::cuda::emu::wait_for_stream(nullptr);
  count_copy("cudaMemcpy", dst, src, bytes, false);
  return copy(dst, src, bytes, kind);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  llmp::cuda::emu::wait_for_stream(stream);
  count_copy("cudaMemcpyAsync", dst, src, bytes, true);
  return copy(dst, src, bytes, kind);
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  llmp::cuda::emu::wait_for_stream(stream);
  count_copy("cudaMemcpy2DAsync", dst, src, width * height, true);
  if (width > dpitch || width > spitch) return llmp::cuda::emu::sticky(cudaErrorInvalidValue);
  for (size_t r = 0; r < height; ++r) {
    const cudaError_t e = copy(static_cast<char*>(dst) + r * dpitch,
                               static_cast<const char*>(src) + r * spitch, width, kind);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}
namespace {
cudaError_t set(void* p, int value, size_t bytes) {
  if (bytes && !is_device_range(p, bytes)) return llmp::cuda::emu::sticky(cudaErrorInvalidValue);
  if (bytes) std::memset(p, value, bytes);
  return cudaSuccess;
}
}  // namespace

// A memset of device memory does not make the host wait, even the synchronous form.
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  llmp::cuda::emu::wait_for_stream(nullptr);
  llmp::cuda::emu::count_call(llmp::cuda::emu::CallKind::kCopy, "cudaMemset", double(bytes));
  return set(p, value, bytes);
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  llmp::cuda::emu::wait_for_stream(stream);
  llmp::cuda::emu::count_call(llmp::cuda::emu::CallKind::kCopy, "cudaMemsetAsync",
                              double(bytes));
  return set(p, value, bytes);
}
