// Closed forms for Optimus 2D (Xu et al. 2021) and Tesseract 2.5D (Wang et al. 2021) tensor
// parallelism on a d×q×q grid (d = 1: 2D), derived for this project's GPT-2 (fp32, no dropout)
// from the algorithms, not from the code, so that the stage's measurements are checked here.
//
// Shapes per rank: N = B·T/(dq) rows (Bl = B/(dq) whole sequences), Cl = C/q channels.
//
// Parameters per rank (each tensor's block, layout in common/tp2d/layout_2p5d.h):
//   Ψ_vec = (ctx·C + 13LC + 2C)/q        wpe columns, LayerNorms and biases: column blocks
//   Ψ_mat = (VC + 12LC²)/q²              wte and the four weights per block: q×q blocks
//   Ψ_local = Ψ_vec + Ψ_mat;  parameters and gradients 4Ψ_local bytes, Adam's m and v 8Ψ_local.
//
// Activations one block keeps (floats): ln1, atty, res1, ln2 (N·Cl each), qkv (3N·Cl), fc and
// gelu(fc) (4N·Cl each): 15·N·Cl; four LayerNorm statistics (N each): 4N; the softmax
// probabilities of H/q heads over Bl sequences: Bl·(H/q)·T². Bytes: 4·(15N·C/q + 4N + Bl·H·T²/q).
//
// Bytes sent per rank and step (S per broadcast and reduce, ring factors for the others;
// common/comm/process_group.h). SUMMA (common/tp2d/summa.h) sends, for a linear (K→M) forward
// plus backward (AB, ABT, ATB, q steps each): 12·N·K on the row group and 12·K·M/q on the
// column group (q > 1; 0 at q = 1). Per block K = C, C, C, 4C and K·M = 3C², C², 4C², 4C²:
//   row group     L·84NC + 12NV (head: K = V for dxf, C→V for logits)
//                 + (2L+1)·2(q-1)/q·16N   (LayerNorm: 2 all_reduces of N floats forward,
//                                          one of 2N backward)
//                 + 2(q-1)/q·12N          (cross-entropy: max, then [Σexp | target])
//   column group  L·144C²/q + 12VC/q (head)
//                 + 2·(q-1)/q·4NC          (embedding: reduce_scatter forward, all_gather backward
//                                          of the depth layer's q·N rows: (q-1)/q·4qN·Cl each)
//                 + 2(q-1)/q·8            (the loss, one double)
//                 + 2(q-1)/q·4Ψ_vec       (vector gradients summed over the rows' blocks)
//   depth group   2(d-1)/d·8 + 2(d-1)/d·4Ψ_local   (loss; every gradient over the replicas)
// Collective calls per step (counted on groups of one rank too): row (12L+3)q + 3(2L+1) + 2,
// column (12L+3)q + 4, depth 2.
//
// Flash attention (--attention flash, common/nn/flash_attention.h): a block keeps lse, N·H/q
// floats (Bl sequences × H/q heads × T rows), where it kept P: 4·(15N·C/q + 4N + N·H/q).
//
// Activation recomputation (common/nn/recompute.h; the walk: common/tp2d/gpt_2p5d.h):
//   selective  a block keeps all of the above but P: 4·(15N·C/q + 4N). P is made again from the
//              rank's own q and k (its heads, whole sequences): nothing more is sent.
//   full       the kept bytes are the checkpoints, ⌈L/k⌉ block inputs of N·Cl floats over the L
//              blocks: ⌈L/k⌉/L·4N·C/q per block (k = --recompute_every). Each of the L blocks runs
//              its forward once more, so a step adds the forward's share of the traffic:
//     row      L·(28NC + 2(q-1)/q·16N)   AB's X broadcasts, q·4·N·K/q for K = C, C, C, 4C, and
//                                        two LayerNorms' two all_reduces of N floats
//     column   L·48C²/q                  AB's W broadcasts, 4·K·M/q for K·M = 3C², C², 4C², 4C²
//     calls    L·(8q + 4)                4q broadcasts on each group, 4 all_reduces on the row
//
// Glossary: B global batch, T sequence, C channels, H heads, V vocab, L layers, ctx positions,
// q grid side, d depth (grid layers), P = d·q² ranks.
#pragma once

#include "common/nn/recompute.h"
#include "common/plan/tp_formulas.h"  // TpModelDims

namespace llmp {

/// Ψ_vec = (ctx·C + 13LC + 2C)/q: the column-block tensors a rank holds.
double tp2d_vector_params(const TpModelDims& m, int q);
/// Ψ_local = Ψ_vec + (VC + 12LC²)/q².
double tp2d_params_per_rank(const TpModelDims& m, int q);
/// Bytes one block keeps under `policy`, N = B·T/(dq), Bl = B/(dq): none 4·(15·N·C/q + 4N +
/// Bl·H·T²/q), selective 4·(15·N·C/q + 4N), full (every `every` blocks) ⌈L/k⌉/L·4N·C/q. With
/// `flash` (--attention flash) a block keeps each row's log-sum-exp, Bl·(H/q)·T = N·H/q floats,
/// instead of P: 4·(15·N·C/q + 4N + N·H/q) under none.
double tp2d_activation_bytes_per_block(const TpModelDims& m, int64_t B, int64_t T, int q, int d,
                                       Recompute policy = Recompute::kNone, int every = 1,
                                       bool flash = false);
/// Its formula's text, as the report prints it.
const char* tp2d_activation_formula_text(Recompute policy, bool flash = false);
/// Full recomputation, added per step: the L forwards' row bytes L·(28NC + 2(q-1)/q·16N),
/// column bytes L·48C²/q (0 at q = 1) and collective calls L·(8q + 4).
double tp2d_recompute_row_bytes_per_step(const TpModelDims& m, int64_t B, int64_t T, int q,
                                         int d);
double tp2d_recompute_column_bytes_per_step(const TpModelDims& m, int q);
double tp2d_recompute_calls_per_step(const TpModelDims& m, int q);
/// Bytes one rank sends per step on its row, column and depth group (formulas above).
double tp2d_row_bytes_per_step(const TpModelDims& m, int64_t B, int64_t T, int q, int d);
double tp2d_column_bytes_per_step(const TpModelDims& m, int64_t B, int64_t T, int q, int d);
double tp2d_depth_bytes_per_step(const TpModelDims& m, int q, int d);
/// Collective calls per step over the three groups together.
double tp2d_calls_per_step(const TpModelDims& m, int q);

}  // namespace llmp
