// Checkpoints in the safetensors format (Hugging Face), written atomically.
//
// File layout (https://github.com/huggingface/safetensors, "Format"):
//   [8 bytes]  N, the header length, little-endian uint64
//   [N bytes]  JSON header, padded with spaces so that 8 + N is a multiple of 8:
//                {"__metadata__": {"step": "200", ...},            (string → string, optional)
//                 "wte.weight": {"dtype": "F32", "shape": [256, 128], "data_offsets": [0, 131072]},
//                 ...}
//   [rest]     the tensors' raw little-endian bytes; data_offsets = [begin, end) are relative to
//              the start of this buffer, and the tensors tile it without gaps or overlaps.
// The same file opens in Python with safetensors.numpy.load_file / safetensors.torch.load_file.
//
// Atomic save: the bytes go to "<path>.tmp.<pid>", are flushed and fsync'ed, and the file is
// renamed over <path>. rename(2) is atomic on POSIX file systems, so a crash or an error leaves
// either the old checkpoint or the new one, never half of one. SIGINT / SIGTERM during the save
// unlink the temporary file (common/runtime/signals.h); one left by a writer that was killed
// outright is removed by the next save to the same path, once its pid is gone (one warning line
// names it).
//
// Glossary: numel = product of the shape; dtype sizes F32 4 bytes, F16 and BF16 2 bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"

namespace llmp {

/// One tensor to save: a view of caller-owned memory (numel(shape) · dtype_size(dtype) bytes).
struct CheckpointEntry {
  std::string name;             ///< unique; GPT-2 names such as "h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;   ///< () for a scalar (numel 1)
  const void* data = nullptr;   ///< host memory, little-endian; may be null only when numel is 0
  DType dtype = DType::kF32;    ///< F32; F16 and BF16 are written as their raw 2-byte words
};

/// One tensor read back: its bytes are owned here.
struct LoadedTensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
  std::vector<uint8_t> bytes;   ///< numel · dtype_size(dtype) bytes

  int64_t numel() const;
  /// The data as floats. Throws std::runtime_error when dtype is not F32.
  const float* f32() const;
};

/// A whole checkpoint read back. Tensors are in file-offset order.
struct Checkpoint {
  std::string path;
  std::vector<LoadedTensor> tensors;
  std::map<std::string, std::string> metadata;

  /// The tensor called `name`, or null.
  const LoadedTensor* find(const std::string& name) const;
  /// The tensor called `name`. Throws std::runtime_error("checkpoint <path>: no tensor <name>").
  const LoadedTensor& at(const std::string& name) const;
};

/// Writes `entries` and `metadata` to `path` as safetensors, atomically (see the file comment).
/// Tensors are laid out in the order given. Throws std::runtime_error with one line naming the
/// path when an entry is invalid (duplicate or empty name, the reserved "__metadata__", a
/// negative dimension, null data with numel > 0, a dtype checkpoints do not store: f64, u8) or
/// the file cannot be written, or when `path` exists and is not a regular file (a directory, a
/// FIFO, a device node: "checkpoint /dev/null: it is a character device, not a regular file;
/// refusing to replace it"); any file already at `path` is then left untouched and no temporary
/// file remains. Removes stale "<path>.tmp.<pid>" files whose pid no longer runs (a warning line
/// names them).
void save_safetensors(const std::string& path, const std::vector<CheckpointEntry>& entries,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads and validates a safetensors file. Throws std::runtime_error with one line
/// "checkpoint <path>: <what is wrong>" for: a missing or unreadable file, a file shorter than
/// 8 bytes, a header length beyond the file, a header that is not a JSON object, a malformed
/// entry, an unsupported dtype (only F32, F16, BF16), data_offsets that are out of range, do not
/// match shape × dtype size, overlap or leave gaps, or non-string metadata.
Checkpoint load_safetensors(const std::string& path);

/// What a checkpoint must contain: a name, shape and dtype.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
};

/// Checks that `ckpt` holds exactly the `expected` tensors with their shapes and dtypes. Throws
/// std::runtime_error naming the first difference, e.g. "checkpoint x.safetensors:
/// h.0.attn.c_attn.weight has shape (32, 96), expected (128, 384)", "... no tensor wpe.weight",
/// "... h.0.ln_1.weight has dtype BF16, expected F32", "... unexpected tensor lm_head.weight".
void check_tensors(const Checkpoint& ckpt, const std::vector<ExpectedTensor>& expected);

/// Checks that every F32 tensor of `ckpt` is finite. Throws std::runtime_error naming the first
/// NaN or Inf by tensor and element (row-major index): "checkpoint x.safetensors:
/// h.0.ln_1.weight holds a nan at element 5" ("an inf", "a -inf"). F16 and BF16 are not read.
void check_finite(const Checkpoint& ckpt);

/// "(32, 96)"; "()" for a scalar.
std::string format_shape(const std::vector<int64_t>& shape);

/// safetensors dtype names: "F32", "F16", "BF16" (stored), and "F64", "U8" for the bookkeeping
/// dtypes, which checkpoints do not store. parse_safetensors_dtype returns false for any name
/// but the three stored ones.
const char* safetensors_dtype(DType t);
bool parse_safetensors_dtype(const std::string& s, DType* out);
/// True for the dtypes a checkpoint stores: f32, f16, bf16 (not f64 or u8).
bool checkpoint_stores(DType t);

}  // namespace llmp
