// Lab gpipe_step: the adapter header. The tests call gpipe_step() with a layer of their own per
// rank (labs/layer_chain/layer.h) and nothing else, so you may organise your code as you like
// behind it.
//
// Pipeline parallelism (GPipe: Huang et al. 2019, "GPipe: Efficient Training of Giant Neural
// Networks using Pipeline Parallelism", §2.2-2.3). A chain of layers too large for one device is
// cut into p stages, one per rank of the pipeline group, and the batch into m micro-batches, so
// that while stage r works on micro-batch i, stage r+1 can work on micro-batch i−1. One GPipe
// step: every micro-batch's forward flows down the pipeline (each stage receives its input from
// the stage before and sends its output to the stage after), then every micro-batch's backward
// flows back up (dy from the stage after, dx to the stage before), and the parameter gradients
// of the m micro-batches add up before one optimizer step (not part of this lab).
//
// Glossary: p = pp.size() stages, r = pp.rank() (stage r holds layer r of the chain), m
// micro-batches, i a micro-batch, n floats per activation, S = 4n bytes, F i / B i this stage's
// forward / backward of micro-batch i.
#pragma once

#include <functional>
#include <vector>

#include "common/comm/process_group.h"
#include "common/tensor/tensor.h"
#include "labs/layer_chain/layer.h"  // Layer, LayerForward: what the tests' layers implement

namespace llmp::lab {

/// dy of the chain's output for micro-batch i (called on the last stage): a new tensor.
using LossGradFn = std::function<Tensor(int i, const Tensor& y)>;

/// One GPipe step of this rank's stage over the pipeline group `pp`.
///
/// stage:   this rank's layer (layer r of the chain).
/// inputs:  on rank 0, the m micro-batches' inputs, each (n) host f32; on other ranks ignored
///          (pass {}).
/// m, n:    the micro-batches and the floats per activation, the same on every rank.
/// loss_grad: called on the last rank for each micro-batch's output.
/// Returns: on rank 0 the m input gradients dx_0 .. dx_{m−1} (each (n)); elsewhere {}.
///
/// The schedule, exactly (the tests compare each stage's calls): F 0, F 1, ..., F m−1, then
/// B m−1, ..., B 0 (all forwards before any backward: the flush of GPipe; the backward of the
/// last micro-batch first, as autograd would run it). Stage r receives F i's input from rank r−1
/// (rank 0: inputs[i]) and sends its output to rank r+1 (the last rank: loss_grad(i, y) instead);
/// it receives B i's dy from rank r+1 (the last rank: the loss_grad result) and sends dx to rank
/// r−1 (rank 0: returned). So every stage keeps m caches at the end of the forward.
///
/// Results: bit for bit the chain's plain backpropagation of each micro-batch, with each layer's
/// parameter gradients accumulated in the order m−1, ..., 0.
///
/// Traffic: point to point only (send/recv of pp, no collective): m sends of S bytes forward
/// (ranks 0 .. p−2) and m sends of S bytes backward (ranks 1 .. p−1), nothing else. A blocking
/// send is safe here: the messages only flow down in the forward and up in the backward.
///
/// Errors (std::invalid_argument, one line, before any communication): m < 1 or n < 1
/// ("gpipe_step: m = 0 (want m >= 1)", "gpipe_step: n = 0 (want n >= 1)"); on rank 0, a number
/// of inputs other than m ("gpipe_step: 2 inputs, m = 3") or an input that is not (n)
/// ("gpipe_step: inputs[1] has 5 elements, want n = 4").
std::vector<Tensor> gpipe_step(ProcessGroup& pp, Layer& stage, const std::vector<Tensor>& inputs,
                               int m, int64_t n, const LossGradFn& loss_grad);

}  // namespace llmp::lab
