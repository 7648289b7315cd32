// safetensors save (atomic) and load (validated). See checkpoint.h for the format.
#include "common/runtime/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/runtime/log.h"
#include "common/runtime/paths.h"
#include "common/runtime/signals.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this code copies host bytes as they are");

namespace llmp {

namespace {

using ordered_json = nlohmann::ordered_json;
using json = nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we (a garbage length would
// otherwise ask for a huge allocation before failing).
constexpr uint64_t kMaxHeader = 100'000'000;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("checkpoint " + path + ": " + what);
}

// numel of `shape`, or -1 when a dimension is negative or the product overflows 2^62.
int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > (int64_t{1} << 62) / d) return -1;
    n *= d;
  }
  return n;
}

// Removes the temporary file when the save does not get as far as the rename. The path is also
// recorded for the SIGINT / SIGTERM handler (signals.h), which unlinks it if the run is stopped
// mid-save.
struct TmpFile {
  std::string path;
  std::FILE* f = nullptr;
  bool committed = false;
  explicit TmpFile(std::string p) : path(std::move(p)) { set_temp_file_for_signals(path); }
  ~TmpFile() {
    if (f) std::fclose(f);
    if (!committed) std::remove(path.c_str());
    clear_temp_file_for_signals();
  }
};

std::string errno_text() { return std::strerror(errno); }

// Removes "<path>.tmp.<pid>" files left by writers that no longer run (killed by SIGKILL, or
// without signals.h's handlers), and says so in one line. A pid still alive may be a save in
// progress (or an unrelated process that got the pid back): its file is left alone.
void remove_stale_temp_files(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string dir = parent_directory(path);
  const std::string prefix = fs::path(path).filename().string() + ".tmp.";
  std::string removed;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive or unknown
    std::error_code rm;
    if (it->is_regular_file(rm) && fs::remove(it->path(), rm))
      removed += (removed.empty() ? "" : ", ") + it->path().string();
  }
  if (!removed.empty())
    log_warn("removed stale temporary checkpoint file(s) of writers no longer running: {}",
             removed);
}

}  // namespace

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF64: return "F64";  // named, but not stored (checkpoint_stores)
    case DType::kU8: return "U8";
  }
  return "?";
}

bool checkpoint_stores(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}

bool parse_safetensors_dtype(const std::string& s, DType* out) {
  if (s == "F32") *out = DType::kF32;
  else if (s == "F16") *out = DType::kF16;
  else if (s == "BF16") *out = DType::kBF16;
  else return false;
  return true;
}

std::string format_shape(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

int64_t LoadedTensor::numel() const { return checked_numel(shape); }

const float* LoadedTensor::f32() const {
  if (dtype != DType::kF32)
    throw std::runtime_error("tensor " + name + " has dtype " + safetensors_dtype(dtype) +
                             ", not F32");
  return reinterpret_cast<const float*>(bytes.data());
}

const LoadedTensor* Checkpoint::find(const std::string& name) const {
  for (const LoadedTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const LoadedTensor& Checkpoint::at(const std::string& name) const {
  const LoadedTensor* t = find(name);
  if (!t) fail(path, "no tensor " + name);
  return *t;
}

void save_safetensors(const std::string& path, const std::vector<CheckpointEntry>& entries,
                      const std::map<std::string, std::string>& metadata) {
  // 1. The header: __metadata__ first, then the tensors in the order given, as the reference does.
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::vector<int64_t> sizes;
  uint64_t offset = 0;
  for (const CheckpointEntry& e : entries) {
    if (e.name.empty() || e.name == "__metadata__") fail(path, "invalid tensor name '" + e.name + "'");
    if (!names.insert(e.name).second) fail(path, "duplicate tensor name " + e.name);
    const int64_t numel = checked_numel(e.shape);
    if (numel < 0) fail(path, e.name + " has an invalid shape " + format_shape(e.shape));
    if (numel > 0 && e.data == nullptr) fail(path, e.name + " has no data");
    if (!checkpoint_stores(e.dtype))
      fail(path, e.name + " has dtype " + safetensors_dtype(e.dtype) +
                     ", which checkpoints do not store (F32, F16, BF16)");
    const int64_t nbytes = numel * dtype_size(e.dtype);
    header[e.name] = {{"dtype", safetensors_dtype(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + static_cast<uint64_t>(nbytes)}}};
    sizes.push_back(nbytes);
    offset += static_cast<uint64_t>(nbytes);
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& ex) {  // e.g. metadata that is not UTF-8
    fail(path, std::string("cannot encode header: ") + ex.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // 8 + N is a multiple of 8
  const uint64_t n = text.size();

  // 2. Write a temporary file next to the target, flush it to disk, rename it over the target.
  //    rename(2) would replace a FIFO, a device node or an empty folder by a plain file: refuse.
  const std::string kind = non_regular_kind(path);
  if (!kind.empty()) fail(path, "it is " + kind + ", not a regular file; refusing to replace it");
  remove_stale_temp_files(path);
  TmpFile tmp(path + ".tmp." + std::to_string(::getpid()));
  tmp.f = std::fopen(tmp.path.c_str(), "wb");
  if (!tmp.f) fail(path, "cannot create " + tmp.path + ": " + errno_text());
  bool ok = std::fwrite(&n, 8, 1, tmp.f) == 1 && std::fwrite(text.data(), 1, n, tmp.f) == n;
  for (size_t i = 0; ok && i < entries.size(); ++i)
    if (sizes[i] > 0)
      ok = std::fwrite(entries[i].data, 1, sizes[i], tmp.f) == static_cast<size_t>(sizes[i]);
  if (!ok || std::fflush(tmp.f) != 0 || ::fsync(::fileno(tmp.f)) != 0)
    fail(path, "cannot write " + tmp.path + ": " + errno_text());
  const int rc = std::fclose(tmp.f);
  tmp.f = nullptr;
  if (rc != 0) fail(path, "cannot write " + tmp.path + ": " + errno_text());
  if (std::rename(tmp.path.c_str(), path.c_str()) != 0)
    fail(path, "cannot rename " + tmp.path + " over it: " + errno_text());
  tmp.committed = true;  // (the destructor forgets the path for the signal handler)

  // 3. Make the rename itself durable (best effort: not every file system lets a folder sync).
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

Checkpoint load_safetensors(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(path, "cannot open: " + errno_text());
  struct Closer {
    std::FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{f};

  // File size, then the 8-byte header length N.
  if (std::fseek(f, 0, SEEK_END) != 0) fail(path, "cannot seek: " + errno_text());
  const long size_l = std::ftell(f);
  if (size_l < 0) fail(path, "cannot tell its size: " + errno_text());
  const uint64_t file_size = static_cast<uint64_t>(size_l);
  std::rewind(f);
  if (file_size < 8)
    fail(path, "file is " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  if (std::fread(&n, 8, 1, f) != 1) fail(path, "cannot read the header length");
  if (n > file_size - 8)
    fail(path, "header length " + std::to_string(n) + " goes beyond the end of the file (" +
                   std::to_string(file_size) + " bytes)");
  if (n > kMaxHeader) fail(path, "header length " + std::to_string(n) + " is above 100 MB");
  std::string text(n, '\0');
  if (n > 0 && std::fread(text.data(), 1, n, f) != n) fail(path, "cannot read the header");
  const uint64_t data_start = 8 + n, data_size = file_size - data_start;

  // The JSON header.
  json header;
  try {
    header = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(path, std::string("invalid JSON header: ") + e.what());
  }
  if (!header.is_object()) fail(path, "header is not a JSON object");

  Checkpoint ck;
  ck.path = path;
  struct Span { uint64_t begin, end; size_t index; };
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(path, "__metadata__ is not a JSON object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail(path, "__metadata__ value of " + m.key() + " is not a string");
        ck.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      fail(path, name + " needs dtype, shape and data_offsets");
    LoadedTensor t;
    t.name = name;
    if (!v["dtype"].is_string() || !parse_safetensors_dtype(v["dtype"].get<std::string>(), &t.dtype))
      fail(path, name + " has unsupported dtype " + v["dtype"].dump() + " (supported: F32, F16, BF16)");
    if (!v["shape"].is_array()) fail(path, name + " has a shape that is not an array");
    for (const json& d : v["shape"]) {
      if (!d.is_number_unsigned()) fail(path, name + " has an invalid shape " + v["shape"].dump());
      t.shape.push_back(d.get<int64_t>());
    }
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(path, name + " has invalid data_offsets " + off.dump());
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
      fail(path, name + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") out of range: the data section has " + std::to_string(data_size) + " bytes");
    const int64_t numel = checked_numel(t.shape);
    if (numel < 0) fail(path, name + " has an invalid shape " + format_shape(t.shape));
    const uint64_t want = static_cast<uint64_t>(numel * dtype_size(t.dtype));
    if (end - begin != want)
      fail(path, name + " has " + std::to_string(end - begin) + " bytes of data, but shape " +
                     format_shape(t.shape) + " of " + safetensors_dtype(t.dtype) + " needs " +
                     std::to_string(want));
    spans.push_back({begin, end, ck.tensors.size()});
    ck.tensors.push_back(std::move(t));
  }

  // The tensors must tile [0, data_size) exactly: sorted by offset, no gap, no overlap.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expect = 0;
  for (const Span& s : spans) {
    if (s.begin != expect)
      fail(path, ck.tensors[s.index].name + " starts at byte " + std::to_string(s.begin) +
                     ", expected " + std::to_string(expect) + " (tensors overlap or leave a gap)");
    expect = s.end;
  }
  if (expect != data_size)
    fail(path, "tensors cover " + std::to_string(expect) + " bytes but the data section has " +
                   std::to_string(data_size));

  // Read the data, in file order.
  std::vector<LoadedTensor> ordered;
  for (const Span& s : spans) {
    LoadedTensor& t = ck.tensors[s.index];
    t.bytes.resize(s.end - s.begin);
    if (!t.bytes.empty() &&
        (std::fseek(f, static_cast<long>(data_start + s.begin), SEEK_SET) != 0 ||
         std::fread(t.bytes.data(), 1, t.bytes.size(), f) != t.bytes.size()))
      fail(path, "cannot read the data of " + t.name);
    ordered.push_back(std::move(t));
  }
  ck.tensors = std::move(ordered);
  return ck;
}

void check_tensors(const Checkpoint& ckpt, const std::vector<ExpectedTensor>& expected) {
  std::set<std::string> wanted;
  for (const ExpectedTensor& e : expected) {
    wanted.insert(e.name);
    const LoadedTensor* t = ckpt.find(e.name);
    if (!t) fail(ckpt.path, "no tensor " + e.name);
    if (t->shape != e.shape)
      fail(ckpt.path, e.name + " has shape " + format_shape(t->shape) + ", expected " +
                          format_shape(e.shape));
    if (t->dtype != e.dtype)
      fail(ckpt.path, e.name + " has dtype " + safetensors_dtype(t->dtype) + ", expected " +
                          safetensors_dtype(e.dtype));
  }
  for (const LoadedTensor& t : ckpt.tensors)
    if (!wanted.count(t.name)) fail(ckpt.path, "unexpected tensor " + t.name);
}

void check_finite(const Checkpoint& ckpt) {
  for (const LoadedTensor& t : ckpt.tensors) {
    if (t.dtype != DType::kF32) continue;
    const float* x = t.f32();
    for (int64_t i = 0, n = t.numel(); i < n; ++i)
      if (!std::isfinite(x[i]))
        fail(ckpt.path, t.name + " holds " +
                            (std::isnan(x[i]) ? "a nan" : x[i] > 0 ? "an inf" : "a -inf") +
                            " at element " + std::to_string(i));
  }
}

}  // namespace llmp
