// Tests for safetensors checkpoints: round trip, the byte layout of the format, atomic
// replacement, and one clear message per kind of corruption.
#include "common/runtime/checkpoint.h"
#include "common/testing/files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmp {
namespace {

using testing::fresh_dir;
using testing::read_bytes;
using testing::error_of;

namespace fs = std::filesystem;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file with the given raw header text (N is its length) followed by `data`.
std::string raw_file(const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  std::string s(reinterpret_cast<const char*>(&n), 8);
  return s + header + data;
}

// A small model-like set: two f32 matrices, a bf16 vector, a scalar.
struct Fixture {
  std::vector<float> w = std::vector<float>(6), b = {0.5f, -1.5f, 3.25f};
  std::vector<uint16_t> h = {0x3f80, 0xc000};  // bf16 1.0, -2.0
  float s = 42.0f;
  Fixture() {
    for (int i = 0; i < 6; ++i) w[i] = 0.1f * i - 0.2f;
  }
  std::vector<CheckpointEntry> entries() const {
    return {{"h.0.attn.c_attn.weight", {2, 3}, w.data()},
            {"h.0.attn.c_attn.bias", {3}, b.data()},
            {"half", {2}, h.data(), DType::kBF16},
            {"scalar", {}, &s}};
  }
};

TEST(Checkpoint, RoundTrip) {
  const std::string path = fresh_dir("roundtrip") + "/m.safetensors";
  Fixture fx;
  save_safetensors(path, fx.entries(), {{"step", "200"}, {"model", "tiny"}});
  const Checkpoint ck = load_safetensors(path);
  ASSERT_EQ(ck.tensors.size(), 4u);
  EXPECT_EQ(ck.tensors[0].name, "h.0.attn.c_attn.weight") << "file order is the order given";
  const LoadedTensor& w = ck.at("h.0.attn.c_attn.weight");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(w.f32(), fx.w.data(), 6 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(ck.at("h.0.attn.c_attn.bias").f32(), fx.b.data(), 12), 0);
  const LoadedTensor& h = ck.at("half");
  EXPECT_EQ(h.dtype, DType::kBF16);
  EXPECT_EQ(std::memcmp(h.bytes.data(), fx.h.data(), 4), 0);
  EXPECT_THROW(h.f32(), std::runtime_error);
  EXPECT_EQ(ck.at("scalar").numel(), 1);
  EXPECT_EQ(ck.at("scalar").f32()[0], 42.0f);
  EXPECT_EQ(ck.metadata.at("step"), "200");
  EXPECT_EQ(ck.metadata.at("model"), "tiny");
  EXPECT_EQ(ck.find("nope"), nullptr);
  EXPECT_EQ(error_of([&] { ck.at("nope"); }), "checkpoint " + path + ": no tensor nope");
}

TEST(Checkpoint, ByteLayoutFollowsTheFormat) {
  const std::string path = fresh_dir("layout") + "/m.safetensors";
  Fixture fx;
  save_safetensors(path, fx.entries(), {{"step", "7"}});
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "header padded to 8-byte alignment";
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}')) << "padding is spaces after the JSON";
  const nlohmann::json j = nlohmann::json::parse(header);
  EXPECT_EQ(j["__metadata__"]["step"], "7");
  EXPECT_EQ(header.find("{\"__metadata__\""), 0u) << "metadata first, as the reference writes it";
  EXPECT_EQ(j["h.0.attn.c_attn.weight"]["dtype"], "F32");
  EXPECT_EQ(j["h.0.attn.c_attn.weight"]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(j["h.0.attn.c_attn.weight"]["data_offsets"], nlohmann::json({0, 24}));
  EXPECT_EQ(j["h.0.attn.c_attn.bias"]["data_offsets"], nlohmann::json({24, 36}));
  EXPECT_EQ(j["half"]["dtype"], "BF16");
  EXPECT_EQ(j["half"]["data_offsets"], nlohmann::json({36, 40}));
  EXPECT_EQ(j["scalar"]["shape"], nlohmann::json::array());
  EXPECT_EQ(bytes.size(), 8 + n + 44);
  float w1;
  std::memcpy(&w1, bytes.data() + 8 + n + 4, 4);  // little-endian f32, element 1 of the weight
  EXPECT_EQ(w1, fx.w[1]);
}

TEST(Checkpoint, SaveReplacesAtomicallyAndLeavesNoTemporary) {
  const std::string dir = fresh_dir("atomic");
  const std::string path = dir + "/m.safetensors";
  Fixture fx;
  save_safetensors(path, fx.entries());
  std::vector<float> other = {9, 8, 7};
  save_safetensors(path, {{"only", {3}, other.data()}});
  const Checkpoint ck = load_safetensors(path);
  ASSERT_EQ(ck.tensors.size(), 1u);
  EXPECT_EQ(ck.at("only").f32()[2], 7.0f);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(e.path().filename(), "m.safetensors");
  }
  EXPECT_EQ(files, 1) << "no .tmp file remains";
}

TEST(Checkpoint, FailedSaveLeavesTheOldFileIntact) {
  const std::string dir = fresh_dir("failed");
  const std::string path = dir + "/m.safetensors";
  Fixture fx;
  save_safetensors(path, fx.entries());
  const std::string before = read_bytes(path);
  std::vector<float> other = {1, 2};

  // The temporary file cannot be created (a folder sits where it would go).
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  fs::create_directory(tmp);
  std::string msg = error_of([&] { save_safetensors(path, {{"x", {2}, other.data()}}); });
  EXPECT_NE(msg.find("checkpoint " + path + ": cannot create"), std::string::npos) << msg;
  EXPECT_EQ(read_bytes(path), before);
  fs::remove(tmp);

  // Invalid entries are refused before anything is written.
  msg = error_of([&] { save_safetensors(path, {{"x", {2}, other.data()}, {"x", {2}, other.data()}}); });
  EXPECT_EQ(msg, "checkpoint " + path + ": duplicate tensor name x");
  msg = error_of([&] { save_safetensors(path, {{"x", {2, -1}, other.data()}}); });
  EXPECT_EQ(msg, "checkpoint " + path + ": x has an invalid shape (2, -1)");
  msg = error_of([&] { save_safetensors(path, {{"x", {2}, nullptr}}); });
  EXPECT_EQ(msg, "checkpoint " + path + ": x has no data");
  const double wide[2] = {1, 2};
  msg = error_of([&] { save_safetensors(path, {{"x", {2}, wide, DType::kF64}}); });
  EXPECT_EQ(msg, "checkpoint " + path + ": x has dtype F64, which checkpoints do not store "
                 "(F32, F16, BF16)");
  const uint8_t bytes[2] = {1, 2};
  msg = error_of([&] { save_safetensors(path, {{"x", {2}, bytes, DType::kU8}}); });
  EXPECT_NE(msg.find("x has dtype U8, which checkpoints do not store"), std::string::npos) << msg;
  EXPECT_EQ(read_bytes(path), before);

  // The target is a folder: refused by name before any temporary file is made
  // (checkpoint_write_test covers FIFOs and devices).
  const std::string folder = dir + "/folder";
  fs::create_directories(folder + "/inside");
  msg = error_of([&] { save_safetensors(folder, {{"x", {2}, other.data()}}); });
  EXPECT_NE(msg.find("it is a directory, not a regular file"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(folder + ".tmp." + std::to_string(::getpid())));
}

TEST(Checkpoint, CorruptFilesGiveOneLineNamingThePathAndTheProblem) {
  const std::string dir = fresh_dir("corrupt");
  const std::string good = dir + "/good.safetensors";
  Fixture fx;
  save_safetensors(good, fx.entries());
  const std::string bytes = read_bytes(good);
  const std::string p = dir + "/bad.safetensors";
  auto load_msg = [&](const std::string& content) {
    write_bytes(p, content);
    const std::string m = error_of([&] { load_safetensors(p); });
    EXPECT_EQ(m.rfind("checkpoint " + p + ": ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m;
  };
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  };

  EXPECT_TRUE(has(error_of([&] { load_safetensors(dir + "/missing"); }),
                  "checkpoint " + dir + "/missing: cannot open: No such file or directory"));
  EXPECT_TRUE(has(load_msg(bytes.substr(0, 5)), "file is 5 bytes, shorter than the 8-byte header length"));
  EXPECT_TRUE(has(load_msg(bytes.substr(0, 40)), "goes beyond the end of the file (40 bytes)"));
  EXPECT_TRUE(has(load_msg(bytes.substr(0, bytes.size() - 4)),
                  "scalar has data_offsets [40, 44) out of range: the data section has 40 bytes"))
      << "a truncated data section";
  EXPECT_TRUE(has(load_msg(bytes + "junk"), "tensors cover 44 bytes but the data section has 48"));
  std::string garbled = bytes;
  garbled[9] = '#';
  EXPECT_TRUE(has(load_msg(garbled), "invalid JSON header"));
  EXPECT_TRUE(has(load_msg(raw_file("[1, 2]  ", "")), "header is not a JSON object"));
  EXPECT_TRUE(has(load_msg(raw_file(R"({"a":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}})", "x")),
                  "a has unsupported dtype \"I8\" (supported: F32, F16, BF16)"));
  EXPECT_TRUE(has(load_msg(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})",
                                    std::string(8, '\0'))),
                  "a has data_offsets [0, 16) out of range: the data section has 8 bytes"));
  EXPECT_TRUE(has(load_msg(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                                    std::string(8, '\0'))),
                  "a has 8 bytes of data, but shape (3) of F32 needs 12"));
  EXPECT_TRUE(has(load_msg(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                    std::string(8, '\0'))),
                  "starts at byte 0, expected 4 (tensors overlap or leave a gap)"));
  EXPECT_TRUE(has(load_msg(raw_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
                                    std::string(4, '\0'))),
                  "a has an invalid shape [-1]"));
  EXPECT_TRUE(has(load_msg(raw_file(R"({"a":{"dtype":"F32"}})", "")), "a needs dtype, shape and data_offsets"));
  EXPECT_TRUE(has(load_msg(raw_file(R"({"__metadata__":{"step":3}})", "")),
                  "__metadata__ value of step is not a string"));
}

TEST(Checkpoint, CheckTensorsNamesTheTensorAndBothShapes) {
  const std::string path = fresh_dir("check") + "/x.safetensors";
  std::vector<float> w(32 * 96);
  save_safetensors(path, {{"h.0.attn.c_attn.weight", {32, 96}, w.data()}});
  const Checkpoint ck = load_safetensors(path);
  EXPECT_NO_THROW(check_tensors(ck, {{"h.0.attn.c_attn.weight", {32, 96}}}));
  EXPECT_EQ(error_of([&] { check_tensors(ck, {{"h.0.attn.c_attn.weight", {128, 384}}}); }),
            "checkpoint " + path + ": h.0.attn.c_attn.weight has shape (32, 96), expected (128, 384)");
  EXPECT_EQ(error_of([&] {
              check_tensors(ck, {{"h.0.attn.c_attn.weight", {32, 96}}, {"wpe.weight", {64, 32}}});
            }),
            "checkpoint " + path + ": no tensor wpe.weight");
  EXPECT_EQ(error_of([&] { check_tensors(ck, {{"h.0.attn.c_attn.weight", {32, 96}, DType::kBF16}}); }),
            "checkpoint " + path + ": h.0.attn.c_attn.weight has dtype F32, expected BF16");
  EXPECT_EQ(error_of([&] { check_tensors(ck, {}); }),
            "checkpoint " + path + ": unexpected tensor h.0.attn.c_attn.weight");
}

TEST(Checkpoint, FormatShapeAndDtypeNames) {
  EXPECT_EQ(format_shape({}), "()");
  EXPECT_EQ(format_shape({7}), "(7)");
  EXPECT_EQ(format_shape({32, 96}), "(32, 96)");
  DType t;
  EXPECT_TRUE(parse_safetensors_dtype("BF16", &t));
  EXPECT_EQ(t, DType::kBF16);
  EXPECT_FALSE(parse_safetensors_dtype("F64", &t));
  EXPECT_FALSE(parse_safetensors_dtype("U8", &t));
  EXPECT_FALSE(checkpoint_stores(DType::kF64));
  EXPECT_TRUE(checkpoint_stores(DType::kBF16));
  EXPECT_STREQ(safetensors_dtype(DType::kF16), "F16");
}

}  // namespace
}  // namespace llmp
