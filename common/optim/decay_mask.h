// Which elements of a GPT's flat parameter buffer weight decay applies to, as element ranges,
// built from the layout so that every stage and every shard applies the same mask element for
// element (the decay ranges AdamW takes, adamw.h).
//
// GPT-2 practice as nanoGPT's configure_optimizers does it (and minGPT before it): decay every
// tensor with 2 or more dimensions: wte (V,C), wpe (ctx,C), c_attn (C,3C), attn.c_proj (C,C),
// c_fc (C,4C), mlp.c_proj (4C,C); not the biases and LayerNorm gains and shifts (1-D). wte is
// also the tied LM head: decayed once, as the matrix it is. DecayRule::kAll decays everything.
//
// Where a stage holds part of the buffer, it takes its part of the same ranges:
//   whole model (baseline, naive DP, DDP)     decay_ranges(layout)
//   tensor-parallel slice                     decay_ranges(local layout): a slice keeps its dims
//   ZeRO shard [begin, begin + count)         slice_ranges(ranges, begin, count, 0)
//   pipeline segment (global g, local l, n)   slice_ranges(ranges, g, n, l), segment by segment
//
// Glossary: Ψ parameters, V vocab, C channels, ctx positions.
#pragma once

#include <cstdint>
#include <vector>

#include "common/nn/gpt.h"
#include "common/optim/adamw.h"

namespace llmp {

/// The elements of `layout`'s buffer (its own offsets: the whole model, or a tensor-parallel
/// rank's slice) that `rule` decays: sorted, disjoint, adjacent tensors merged.
std::vector<ElementRange> decay_ranges(const GPTLayout& layout, DecayRule rule);

/// The part of `ranges` inside [begin, begin + count), moved so that `begin` lands at `to`:
/// what a holder of that span (at its own offset `to`) decays. Sorted when `ranges` is.
std::vector<ElementRange> slice_ranges(const std::vector<ElementRange>& ranges, int64_t begin,
                                       int64_t count, int64_t to = 0);

}  // namespace llmp
