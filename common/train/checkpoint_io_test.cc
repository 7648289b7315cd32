// --load: our own files (v2 with the configuration and optimizer metadata, old v1), files in
// Hugging Face's and safetensors' own layouts (transformer. prefix, attention buffers, a tied
// lm_head, no optimizer state, no metadata), and the refusals (head count, NaN, untied head).
#include "common/train/checkpoint_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/runtime/checkpoint.h"

namespace llmp {
namespace {

namespace fs = std::filesystem;

// A fresh folder per test, removed at the end.
struct TmpDir {
  fs::path dir;
  TmpDir() {
    dir = fs::temp_directory_path() /
          ("llmp_ckpt_io_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
  }
  ~TmpDir() { fs::remove_all(dir); }
  std::string operator/(const std::string& f) const { return (dir / f).string(); }
};

GPTConfig tiny() { return GPTConfig::preset("tiny"); }

// The whole state of a model: parameters from init, m and v made-up but distinct.
struct State {
  std::vector<float> p, m, v;
  explicit State(const GPT& model) {
    const int64_t n = model.layout().num_params();
    p.resize(n), m.resize(n), v.resize(n);
    model.init_params(p.data(), 11);
    for (int64_t i = 0; i < n; ++i) m[i] = 1e-3f * (i % 7), v[i] = 1e-6f * (i % 5);
  }
};

// The one-line message of read_checkpoint(path, model), or "" when it succeeds.
std::string error_of(const std::string& path, const GPT& model) {
  try {
    read_checkpoint(path, model);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// A file laid out as transformers' save_pretrained writes GPT2LMHeadModel: "transformer."
// names, the causal-mask buffers attn.bias (1,1,ctx,ctx) and attn.masked_bias (), lm_head.weight
// (= wte), format "pt", no optimizer tensors. Written out here from GPT-2's naming, not from the
// layout's list.
void write_hf_file(const std::string& path, const GPTConfig& c, const std::vector<float>& p,
                   const GPT& model, bool prefix, bool buffers, const float* lm_head,
                   const std::map<std::string, std::string>& metadata) {
  const std::string pre = prefix ? "transformer." : "";
  static std::vector<float> mask, masked_bias = {-1e4f};
  mask.assign(c.ctx * c.ctx, 1.0f);
  std::vector<CheckpointEntry> e;
  auto add = [&](const std::string& name) {
    const ParamSpec& s = model.layout().find(name);
    e.push_back({pre + name, s.shape, p.data() + s.offset});
  };
  add("wte.weight");
  add("wpe.weight");
  for (int l = 0; l < c.layers; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    for (const char* s : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                          "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"})
      add(h + s);
    if (buffers) {
      e.push_back({pre + h + "attn.bias", {1, 1, c.ctx, c.ctx}, mask.data()});
      e.push_back({pre + h + "attn.masked_bias", {}, masked_bias.data()});
    }
  }
  add("ln_f.weight");
  add("ln_f.bias");
  if (lm_head) e.push_back({"lm_head.weight", {c.vocab, c.d}, lm_head});
  save_safetensors(path, e, metadata);
}

// A stage's extra_state (mixed precision: the precision, fp16's scaler) goes into the metadata;
// it may set "precision" but not replace a key of the file's own.
TEST(CheckpointIo, ExtraStateIsRecordedAndCannotReplaceTheFilesOwnKeys) {
  TmpDir tmp;
  const GPT model(tiny());
  State s(model);
  const std::map<std::string, std::string> fp16 = {{"precision", "fp16"},
                                                   {"loss_scale", "512"},
                                                   {"loss_scale_clean_steps", "2"},
                                                   {"loss_scale_skipped_steps", "1"}};
  write_checkpoint(tmp / "a.safetensors", model, AdamWConfig{}, s.p.data(), s.m.data(),
                   s.v.data(), 7, "baseline", fp16);
  const ModelCheckpoint ck = read_checkpoint(tmp / "a.safetensors", model);
  for (const auto& [key, value] : fp16) EXPECT_EQ(ck.file.metadata.at(key), value) << key;
  EXPECT_EQ(ck.precision.precision, TrainPrecision::kFP16);
  EXPECT_EQ(ck.precision.loss_scale, 512.0f);
  EXPECT_EQ(ck.precision.clean_steps, 2);
  EXPECT_EQ(ck.precision.skipped_steps, 1);
  EXPECT_THROW(write_checkpoint(tmp / "b.safetensors", model, AdamWConfig{}, s.p.data(),
                                s.m.data(), s.v.data(), 7, "baseline", {{"step", "99"}}),
               std::invalid_argument);
}

// A padded vocabulary is the run's layout: the file holds wte's V real rows (and m's and v's),
// and padded and unpadded runs load each other's files, the pad rows zero again.
TEST(CheckpointIo, PaddedVocabularyIsSavedUnpaddedAndLoadsEitherWay) {
  TmpDir tmp;
  GPTConfig pc = tiny();
  pc.vocab_divisible_by = 96;  // 256 -> 288: 32 pad rows
  const GPT padded(pc), plain(tiny());
  const int64_t C = pc.d, real = int64_t{256} * C, pad = int64_t{32} * C;
  State s(padded);
  for (int64_t i = real; i < real + pad; ++i) s.m[i] = s.v[i] = 0.0f;  // as training keeps them
  write_checkpoint(tmp / "p.safetensors", padded, AdamWConfig{}, s.p.data(), s.m.data(),
                   s.v.data(), 3, "baseline");
  const Checkpoint raw = load_safetensors(tmp / "p.safetensors");
  for (const char* name : {"wte.weight", "optimizer.exp_avg.wte.weight",
                           "optimizer.exp_avg_sq.wte.weight"})
    EXPECT_EQ(raw.at(name).shape, (std::vector<int64_t>{256, C})) << name;
  EXPECT_EQ(raw.metadata.at("vocab_size"), "256");

  // Into the unpadded run: its state is the padded one without the pad rows.
  State u(plain);
  unpack_state(read_checkpoint(tmp / "p.safetensors", plain), plain, u.p.data(), u.m.data(),
               u.v.data());
  auto strip = [&](const std::vector<float>& x) {
    std::vector<float> out(x.begin(), x.begin() + real);
    out.insert(out.end(), x.begin() + real + pad, x.end());
    return out;
  };
  EXPECT_EQ(u.p, strip(s.p));
  EXPECT_EQ(u.m, strip(s.m));
  EXPECT_EQ(u.v, strip(s.v));

  // And the unpadded file back into the padded run: the same state, pad rows zero.
  write_checkpoint(tmp / "u.safetensors", plain, AdamWConfig{}, u.p.data(), u.m.data(),
                   u.v.data(), 3, "baseline");
  State back(padded);
  std::fill(back.p.begin(), back.p.end(), 5.0f);  // unpack_state must write every element
  unpack_state(read_checkpoint(tmp / "u.safetensors", padded), padded, back.p.data(),
               back.m.data(), back.v.data());
  EXPECT_EQ(back.p, s.p);  // init_params made s.p's pad rows zero
  EXPECT_EQ(back.m, s.m);
  EXPECT_EQ(back.v, s.v);
}

TEST(CheckpointIo, OwnFileRecordsFormatConfigurationAndOptimizer) {
  TmpDir tmp;
  const GPT model(tiny());
  State s(model);
  AdamWConfig opt;
  opt.lr = 3e-4f, opt.weight_decay = 0.1f, opt.decay = DecayRule::kAll;
  write_checkpoint(tmp / "a.safetensors", model, opt, s.p.data(), s.m.data(), s.v.data(), 7, "zero2");
  const Checkpoint raw = load_safetensors(tmp / "a.safetensors");
  const std::map<std::string, std::string> want = {
      {"format", "pt"}, {"llmp_format", "llmp-gpt-v2"}, {"model", "tiny"}, {"n_layer", "2"},
      {"n_head", "2"}, {"n_embd", "32"}, {"vocab_size", "256"}, {"n_positions", "16"},
      {"n_ctx", "16"}, {"optimizer", "adamw"}, {"lr", "0.0003"}, {"beta1", "0.9"},
      {"beta2", "0.95"}, {"eps", "1e-08"}, {"weight_decay", "0.1"}, {"decay", "all"},
      {"step", "7"}, {"stage", "zero2"}, {"precision", "fp32"}};
  EXPECT_EQ(raw.metadata, want);

  const ModelCheckpoint ck = read_checkpoint(tmp / "a.safetensors", model);
  EXPECT_EQ(ck.origin, "llmp-gpt-v2");
  EXPECT_EQ(ck.step, 7);
  EXPECT_TRUE(ck.has_optimizer);
  EXPECT_TRUE(ck.notes.empty());
  State back(model);
  unpack_state(ck, model, back.p.data(), back.m.data(), back.v.data());
  EXPECT_EQ(back.p, s.p);
  EXPECT_EQ(back.m, s.m);
  EXPECT_EQ(back.v, s.v);
}

// H = 2 and H = 4 give the same shapes for C = 32: only the recorded configuration tells.
TEST(CheckpointIo, HeadCountMismatchIsRefusedThoughShapesAgree) {
  TmpDir tmp;
  const GPT saved(tiny());
  GPTConfig c4 = tiny();
  c4.heads = 4;
  const GPT run(c4);
  for (size_t i = 0; i < saved.layout().params().size(); ++i)
    ASSERT_EQ(saved.layout().params()[i].shape, run.layout().params()[i].shape);
  State s(saved);
  const std::string path = tmp / "h2.safetensors";
  write_checkpoint(path, saved, AdamWConfig{}, s.p.data(), s.m.data(), s.v.data(), 1, "baseline");
  EXPECT_EQ(error_of(path, run), "checkpoint " + path + ": n_head is 2, this run has 4");
  EXPECT_EQ(error_of(path, saved), "");
}

TEST(CheckpointIo, OtherModelIsRefusedByItsFirstDifferentField) {
  TmpDir tmp;
  const GPT saved(tiny()), mini(GPTConfig::preset("mini"));
  State s(saved);
  const std::string path = tmp / "t.safetensors";
  write_checkpoint(path, saved, AdamWConfig{}, s.p.data(), s.m.data(), s.v.data(), 1, "baseline");
  EXPECT_EQ(error_of(path, mini), "checkpoint " + path +
                                      ": n_layer is 2, this run has 4 (saved for model 'tiny', "
                                      "this run is 'mini')");
}

TEST(CheckpointIo, NonFiniteTensorsAreRefusedByNameAndElement) {
  TmpDir tmp;
  const GPT model(tiny());
  const int64_t ln1 = model.layout().find("h.0.ln_1.weight").offset;
  const int64_t fc = model.layout().find("h.1.mlp.c_fc.weight").offset;
  const std::string path = tmp / "nan.safetensors";
  {
    State s(model);
    s.p[ln1 + 5] = std::numeric_limits<float>::quiet_NaN();
    write_checkpoint(path, model, AdamWConfig{}, s.p.data(), s.m.data(), s.v.data(), 1, "baseline");
    EXPECT_EQ(error_of(path, model), "checkpoint " + path + ": h.0.ln_1.weight holds a nan at element 5");
  }
  {
    State s(model);
    s.v[fc + 40] = -std::numeric_limits<float>::infinity();
    write_checkpoint(path, model, AdamWConfig{}, s.p.data(), s.m.data(), s.v.data(), 1, "baseline");
    EXPECT_EQ(error_of(path, model),
              "checkpoint " + path + ": optimizer.exp_avg_sq.h.1.mlp.c_fc.weight holds a -inf at element 40");
  }
}

TEST(CheckpointIo, HuggingFaceSavePretrainedFileLoadsWithOptimizerAtZero) {
  TmpDir tmp;
  const GPT model(tiny());
  State s(model);
  const std::string path = tmp / "model.safetensors";
  const float* wte = s.p.data() + model.layout().find("wte.weight").offset;
  write_hf_file(path, tiny(), s.p, model, /*prefix=*/true, /*buffers=*/true, wte, {{"format", "pt"}});
  const ModelCheckpoint ck = read_checkpoint(path, model);
  EXPECT_EQ(ck.origin, "foreign");
  EXPECT_EQ(ck.prefix, "transformer.");
  EXPECT_FALSE(ck.has_optimizer);
  EXPECT_EQ(ck.step, 0);
  std::string notes;
  for (const std::string& n : ck.notes) notes += n + "\n";
  EXPECT_NE(notes.find("inferred from the tensor shapes: n_layer 2, n_embd 32, vocab_size 256, "
                       "n_positions 16"), std::string::npos) << notes;
  EXPECT_NE(notes.find("n_head is not recorded"), std::string::npos) << notes;
  EXPECT_NE(notes.find("m and v start at zero"), std::string::npos) << notes;
  State back(model);
  unpack_state(ck, model, back.p.data(), back.m.data(), back.v.data());
  EXPECT_EQ(back.p, s.p);
  EXPECT_EQ(back.m, std::vector<float>(s.m.size(), 0.0f));
  EXPECT_EQ(back.v, std::vector<float>(s.v.size(), 0.0f));
}

TEST(CheckpointIo, SafetensorsFileWithoutMetadataOrPrefixLoads) {
  TmpDir tmp;
  const GPT model(tiny());
  State s(model);
  const std::string path = tmp / "plain.safetensors";
  write_hf_file(path, tiny(), s.p, model, /*prefix=*/false, /*buffers=*/false, nullptr, {});
  const ModelCheckpoint ck = read_checkpoint(path, model);
  EXPECT_EQ(ck.prefix, "");
  State back(model);
  unpack_state(ck, model, back.p.data(), back.m.data(), back.v.data());
  EXPECT_EQ(back.p, s.p);
}

TEST(CheckpointIo, UntiedLmHeadIsRefused) {
  TmpDir tmp;
  const GPT model(tiny());
  State s(model);
  std::vector<float> head(256 * 32, 0.5f);
  const std::string path = tmp / "untied.safetensors";
  write_hf_file(path, tiny(), s.p, model, true, false, head.data(), {{"format", "pt"}});
  EXPECT_EQ(error_of(path, model),
            "checkpoint " + path + ": lm_head.weight differs from wte.weight: this GPT ties the LM "
            "head to the token embedding, an untied head cannot be loaded");
}

// save_pretrained's folder: config.json tells the head count the shapes cannot.
TEST(CheckpointIo, ConfigJsonBesideTheFileGivesTheHeadCount) {
  TmpDir tmp;
  GPTConfig c4 = tiny();
  c4.heads = 4;
  const GPT saved(c4), run(tiny());
  State s(saved);
  const std::string path = tmp / "model.safetensors";
  write_hf_file(path, c4, s.p, saved, true, true, nullptr, {{"format", "pt"}});
  std::ofstream(tmp / "config.json") << R"({"model_type": "gpt2", "n_layer": 2, "n_head": 4,
      "n_embd": 32, "vocab_size": 256, "n_positions": 16})";
  EXPECT_EQ(error_of(path, run), "checkpoint " + path + ": n_head is 4, this run has 2");
  const ModelCheckpoint alone = read_checkpoint(path);
  EXPECT_EQ(alone.config.heads, 4);
  EXPECT_EQ(alone.config.layers, 2);
}

// Files of the previous format (no configuration, format llmp-gpt-v1) still load.
TEST(CheckpointIo, OldV1FileLoadsWhenThePresetIsTheRuns) {
  TmpDir tmp;
  const GPT model(tiny()), mini(GPTConfig::preset("mini"));
  State s(model);
  std::vector<CheckpointEntry> e;
  for (const ParamSpec& p : model.layout().params()) e.push_back({p.name, p.shape, s.p.data() + p.offset});
  for (const ParamSpec& p : model.layout().params())
    e.push_back({"optimizer.exp_avg." + p.name, p.shape, s.m.data() + p.offset});
  for (const ParamSpec& p : model.layout().params())
    e.push_back({"optimizer.exp_avg_sq." + p.name, p.shape, s.v.data() + p.offset});
  const std::string path = tmp / "v1.safetensors";
  save_safetensors(path, e, {{"format", "llmp-gpt-v1"}, {"model", "tiny"}, {"step", "3"}, {"stage", "ddp"}});
  const ModelCheckpoint ck = read_checkpoint(path, model);
  EXPECT_EQ(ck.origin, "llmp-gpt-v1");
  EXPECT_EQ(ck.step, 3);
  State back(model);
  unpack_state(ck, model, back.p.data(), back.m.data(), back.v.data());
  EXPECT_EQ(back.v, s.v);
  EXPECT_EQ(error_of(path, mini), "checkpoint " + path + ": was saved for model 'tiny', not --model mini");
}

TEST(CheckpointIo, OtherFormatsAreRefused) {
  TmpDir tmp;
  const GPT model(tiny());
  State s(model);
  const std::string path = tmp / "tf.safetensors";
  write_hf_file(path, tiny(), s.p, model, true, false, nullptr, {{"format", "tf"}});
  EXPECT_EQ(error_of(path, model), "checkpoint " + path + ": format 'tf' is neither pt (safetensors, "
                                   "Hugging Face) nor llmp-gpt-v1, and there is no llmp_format llmp-gpt-v2");
}

}  // namespace
}  // namespace llmp
