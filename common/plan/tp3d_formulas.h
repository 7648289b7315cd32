// Closed forms of 3D tensor parallelism (Bian et al. 2021) for this project's GPT: parameters,
// activations kept per block, and bytes and collective calls per training step, per rank and per
// group of the cube (common/tp3d/cube.h). Pure functions of the model dims, B, T and q; derived
// in stages/tp_3d/README.md and asserted against what the stage measures (MemoryTracker,
// CommStats).
//
// With M = B·T rows, m = M/q² rows per rank, f = (q-1)/q, f2 = (q²-1)/q², a linear (K,N) sends
// per rank (linear_3d.h): gx 2·f·4MK/q², gw 3·f·4KN/q², gy 2·f·4MN/q² bytes, 7 calls. The
// block's linears: c_attn (C,3C) and c_fc (C,4C) A→B (gx = j, gy = l), attn.c_proj (C,C) and
// mlp.c_proj (4C,C) B→A (gx = l, gy = j); the head (C,V) A→B; all with gw = the i-axis.
//
// Glossary: V vocab, ctx positions, L layers, C channels, H heads, B batch, T sequence, q side.
#pragma once

#include <cstdint>

#include "common/nn/recompute.h"

namespace llmp {

struct Tp3dDims {
  int vocab, ctx, layers, d, heads;
};

/// Ψ_r = (VC + 12LC²)/q³ + (ctx·C + 13LC + 2C)/q: weights in q³ blocks, vectors in q.
double tp3d_params_per_rank(const Tp3dDims& d, int q);

/// Bytes one block keeps for its backward (f32): with m = BT/q², Cq = C/q,
///   x, res1 (m·Cq each) + qkv (3m·Cq) + fch (4m·Cq)            = 9·m·Cq   (layout A/B, local)
///   ln_1, attention output, ln_2 gathered (q·m·Cq each)
///   + GELU output gathered (4q·m·Cq)                            = 7q·m·Cq  (linears' X_g)
///   + 2 LayerNorms' mean and rstd (4m) + probabilities (B/q²)(H/q)T²,
/// times 4 bytes: 4·[BTC(9 + 7q)/q³ + 4BT/q² + BHT²/q³].
/// Under activation recomputation (common/nn/recompute.h): selective keeps all but P,
/// 4·[BTC(9 + 7q)/q³ + 4BT/q²]; full only the checkpoints, the inputs of ⌈L/k⌉ blocks of the L
/// (k = `every`): ⌈L/k⌉/L·4BTC/q³.
/// With `flash` (--attention flash) a block keeps lse, (B/q²)(H/q)T floats, instead of P (its
/// backward reads the attention output from c_proj's gathered input, kept anyway):
/// 4·[BTC(9 + 7q)/q³ + 4BT/q² + BHT/q³] (selective too: there is no P to drop).
double tp3d_activation_bytes_per_block(const Tp3dDims& d, int B, int T, int q,
                                       Recompute policy = Recompute::kNone, int every = 1,
                                       bool flash = false);
/// Its formula's text, as the report prints it.
const char* tp3d_activation_formula_text(Recompute policy, bool flash = false);

/// Bytes one rank sends in a training step, per group.
struct Tp3dBytes {
  double i_axis = 0, j_axis = 0, l_axis = 0, plane_l = 0, plane_j = 0;
};
///   i-axis  12f/q²·(12LC² + VC)                     weights: gather, gather again, reduce_scatter
///   j-axis  4f/q²·(8L+2)·MC + 24f·m                 linears + the cross-entropy's 2 all_reduces
///   l-axis  4f/q²·(24L·C + 2V)·M + 32f·m·(2L+1)     linears + 2L+1 LayerNorms (3 all_reduces)
///   plane(l) 8f2·MC/q + 8f2·(ctx + 6L + 2)·C/q      embedding reduce_scatter + all_gather, A
///                                                    vectors' gradients
///   plane(j) 8f2·7LC/q + 16f2                       B vectors' gradients, the loss (1 double)
Tp3dBytes tp3d_bytes_per_step(const Tp3dDims& d, int B, int T, int q);

/// Full recomputation adds the L block forwards' share once more (linear_3d.h's forward: x
/// gathered over gx, W over gw, y reduce-scattered over gy; the LayerNorms' two all_reduces):
///   i-axis  48f/q²·LC²                      the four weights' all_gathers (K·N = 3C², C², 4C², 4C²)
///   j-axis  16f/q²·L·MC                     c_attn's and c_fc's x, the c_projs' y
///   l-axis  48f/q²·L·MC + 32f·L·m           c_attn's and c_fc's y, the c_projs' x; 2 LayerNorms
///   planes  0
Tp3dBytes tp3d_recompute_bytes_per_step(const Tp3dDims& d, int B, int T, int q);
/// ... in 16L calls (3 per linear, 2 per LayerNorm).
int64_t tp3d_recompute_calls_per_step(const Tp3dDims& d);

/// Collective calls per step, all groups: 7(4L+1) linears + 3(2L+1) LayerNorms + 2 embedding
/// + 2 cross-entropy + 2 gradient all_reduces + 1 loss = 34L + 17 (independent of q: a group
/// of one rank still counts its calls).
int64_t tp3d_calls_per_step(const Tp3dDims& d);

}  // namespace llmp
