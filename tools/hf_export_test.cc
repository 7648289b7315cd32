// export_hf's folder against GPT-2's naming and GPT2Config's keys, written out here by hand
// (transformers is not installed in CI; tools/hf_check.py does the real from_pretrained).
#include "tools/hf_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace llmp {
namespace {

namespace fs = std::filesystem;

// GPT2LMHeadModel's state_dict for L = 2, C = 32, V = 256, ctx = 16, minus the attention
// buffers and the tied lm_head, in its order (what save_pretrained writes for GPT-2).
std::vector<std::pair<std::string, std::vector<int64_t>>> gpt2_tensors() {
  std::vector<std::pair<std::string, std::vector<int64_t>>> t = {
      {"transformer.wte.weight", {256, 32}}, {"transformer.wpe.weight", {16, 32}}};
  for (int l = 0; l < 2; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    t.insert(t.end(), {{h + "ln_1.weight", {32}},
                       {h + "ln_1.bias", {32}},
                       {h + "attn.c_attn.weight", {32, 96}},  // Conv1D: (in, out)
                       {h + "attn.c_attn.bias", {96}},
                       {h + "attn.c_proj.weight", {32, 32}},
                       {h + "attn.c_proj.bias", {32}},
                       {h + "ln_2.weight", {32}},
                       {h + "ln_2.bias", {32}},
                       {h + "mlp.c_fc.weight", {32, 128}},
                       {h + "mlp.c_fc.bias", {128}},
                       {h + "mlp.c_proj.weight", {128, 32}},
                       {h + "mlp.c_proj.bias", {32}}});
  }
  t.insert(t.end(), {{"transformer.ln_f.weight", {32}}, {"transformer.ln_f.bias", {32}}});
  return t;
}

struct Exported {
  fs::path dir;
  std::vector<float> params;
  Exported() {
    dir = fs::temp_directory_path() / ("llmp_export_" + std::to_string(getpid()));
    fs::create_directories(dir);
    const GPT model(GPTConfig::preset("tiny"));
    const int64_t n = model.layout().num_params();
    params.resize(n);
    std::vector<float> m(n, 0.25f), v(n, 0.5f);
    model.init_params(params.data(), 5);
    const std::string ckpt = (dir / "ours.safetensors").string();
    write_checkpoint(ckpt, model, AdamWConfig{}, params.data(), m.data(), v.data(), 9, "baseline");
    export_hf(read_checkpoint(ckpt), (dir / "hf").string());
  }
  ~Exported() { fs::remove_all(dir); }
};

TEST(ExportHf, ModelFileHasGpt2NamesShapesAndFormatPt) {
  Exported e;
  const Checkpoint f = load_safetensors((e.dir / "hf" / "model.safetensors").string());
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  const auto want = gpt2_tensors();
  ASSERT_EQ(f.tensors.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(f.tensors[i].name, want[i].first);
    EXPECT_EQ(f.tensors[i].shape, want[i].second) << want[i].first;
    EXPECT_EQ(f.tensors[i].dtype, DType::kF32) << want[i].first;
  }
  // The values are the checkpoint's: wte's first and c_fc's last element.
  const GPTLayout lay(GPTConfig::preset("tiny"));
  EXPECT_EQ(f.at("transformer.wte.weight").f32()[0], e.params[0]);
  const ParamSpec& fc = lay.find("h.1.mlp.c_fc.weight");
  EXPECT_EQ(f.at("transformer.h.1.mlp.c_fc.weight").f32()[fc.numel - 1], e.params[fc.offset + fc.numel - 1]);
}

TEST(ExportHf, ConfigJsonIsGpt2ConfigOfTheModel) {
  Exported e;
  std::ifstream in(e.dir / "hf" / "config.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("model_type"), "gpt2");
  EXPECT_EQ(j.at("architectures"), nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(j.at("n_layer"), 2);
  EXPECT_EQ(j.at("n_head"), 2);
  EXPECT_EQ(j.at("n_embd"), 32);
  EXPECT_EQ(j.at("vocab_size"), 256);
  EXPECT_EQ(j.at("n_positions"), 16);
  EXPECT_EQ(j.at("n_ctx"), 16);
  EXPECT_EQ(j.at("activation_function"), "gelu_new");  // the tanh GELU of kernels/cpu/gelu.h
  EXPECT_DOUBLE_EQ(j.at("layer_norm_epsilon").get<double>(), 1e-5);
  EXPECT_EQ(j.at("tie_word_embeddings"), true);
  for (const char* p : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) EXPECT_EQ(j.at(p), 0.0) << p;
}

// The exported folder is a foreign file --load accepts: config.json gives the head count.
TEST(ExportHf, ExportedFolderLoadsBack) {
  Exported e;
  const GPT model(GPTConfig::preset("tiny"));
  const ModelCheckpoint ck = read_checkpoint((e.dir / "hf" / "model.safetensors").string(), model);
  EXPECT_EQ(ck.origin, "foreign");
  EXPECT_FALSE(ck.has_optimizer);
  for (const ParamSpec& p : model.layout().params())
    for (int64_t i = 0; i < p.numel; ++i) ASSERT_EQ(ck.param(p.name)[i], e.params[p.offset + i]) << p.name;
}

}  // namespace
}  // namespace llmp
