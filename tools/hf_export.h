// A checkpoint as a Hugging Face GPT-2 folder that transformers' GPT2LMHeadModel.from_pretrained
// loads: config.json (GPT2Config) and model.safetensors.
//
//   model.safetensors   format "pt"; the parameters under GPT-2's state_dict names,
//                       "transformer.wte.weight", "transformer.h.0.attn.c_attn.weight", ...
//                       (F32, the (in, out) layout of HF's Conv1D, which is ours: no transposes);
//                       no lm_head.weight (tied to wte: from_pretrained ties it), no optimizer
//                       state, no attn.bias buffers (GPT2Attention rebuilds them).
//   config.json         common/train/gpt2_config.h's hf_config_json: gelu_new, eps 1e-5, tied.
//
// tools/hf_check.py loads the folder with transformers and compares its loss with ours.
#pragma once

#include <string>

#include "common/train/checkpoint_io.h"

namespace llmp {

/// Creates `out_dir` if needed and writes config.json and model.safetensors there. Throws
/// std::runtime_error naming the path when it cannot.
void export_hf(const ModelCheckpoint& ckpt, const std::string& out_dir);

}  // namespace llmp
