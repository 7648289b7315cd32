#include "common/train/checkpoint_io.h"

#include <cstring>
#include <stdexcept>
#include <vector>

namespace llmp {
namespace {

const char* kFormat = "llmp-gpt-v1";
const char* kMomentPrefix[2] = {"optimizer.exp_avg.", "optimizer.exp_avg_sq."};

std::runtime_error bad(const std::string& path, const std::string& what) {
  return std::runtime_error("checkpoint " + path + ": " + what);
}

}  // namespace

Checkpoint read_checkpoint(const std::string& path, const GPT& model) {
  Checkpoint ckpt = load_safetensors(path);
  auto meta = [&](const char* key) {
    auto it = ckpt.metadata.find(key);
    return it == ckpt.metadata.end() ? std::string() : it->second;
  };
  if (meta("format") != kFormat)
    throw bad(path, "format '" + meta("format") + "' is not " + kFormat);
  if (meta("model") != model.config().name)
    throw bad(path, "was saved for model '" + meta("model") + "', not --model " +
                        model.config().name);
  std::vector<ExpectedTensor> expected;
  for (const ParamSpec& p : model.layout().params()) {
    expected.push_back({p.name, p.shape, DType::kF32});
    for (const char* prefix : kMomentPrefix) expected.push_back({prefix + p.name, p.shape, DType::kF32});
  }
  check_tensors(ckpt, expected);
  const std::string step = meta("step");
  try {
    size_t used = 0;
    if (std::stoll(step, &used) < 0 || used != step.size()) throw std::invalid_argument(step);
  } catch (const std::exception&) {
    throw bad(path, "metadata step '" + step + "' is not a non-negative integer");
  }
  return ckpt;
}

int64_t load_into(const std::string& path, const GPT& model, Strategy& strategy) {
  const Checkpoint ckpt = read_checkpoint(path, model);
  const int64_t psi = model.layout().num_params();
  std::vector<float> params(psi), m(psi), v(psi);
  for (const ParamSpec& p : model.layout().params()) {
    const size_t bytes = p.numel * sizeof(float);
    std::memcpy(params.data() + p.offset, ckpt.at(p.name).f32(), bytes);
    std::memcpy(m.data() + p.offset, ckpt.at(kMomentPrefix[0] + p.name).f32(), bytes);
    std::memcpy(v.data() + p.offset, ckpt.at(kMomentPrefix[1] + p.name).f32(), bytes);
  }
  strategy.set_state(params.data(), m.data(), v.data());
  return std::stoll(ckpt.metadata.at("step"));
}

void save_from(const std::string& path, const GPT& model, Strategy& strategy, int64_t step,
               const std::string& stage, bool write) {
  const int64_t psi = model.layout().num_params();
  std::vector<float> params(psi), m(psi), v(psi);
  strategy.get_state(params.data(), m.data(), v.data());
  if (!write) return;
  std::vector<CheckpointEntry> entries;
  for (const ParamSpec& p : model.layout().params()) entries.push_back({p.name, p.shape, params.data() + p.offset});
  for (const ParamSpec& p : model.layout().params())
    entries.push_back({kMomentPrefix[0] + p.name, p.shape, m.data() + p.offset});
  for (const ParamSpec& p : model.layout().params())
    entries.push_back({kMomentPrefix[1] + p.name, p.shape, v.data() + p.offset});
  save_safetensors(path, entries,
                   {{"format", kFormat},
                    {"model", model.config().name},
                    {"step", std::to_string(step)},
                    {"stage", stage}});
}

}  // namespace llmp
