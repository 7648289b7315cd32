// The first and last units of the GPT: embeddings (unit 0) and the head (ln_f + tied LM head +
// cross-entropy, unit L+1 plus wte), forward and backward, on one rank or vocab-parallel.
//
//   part   = wte_r[tokens]                     (N,C)   rows of tokens in this rank's vocabulary
//   x      = g(part) + wpe[positions held]     (n,C)   Σ over the tp ranks (exit_forward)
//   h      = f(LN(x; ln_f))                    (N,C)   (enter_forward)
//   logits = h @ wte_rᵀ                        (N,C) @ (C,V/t) -> (N,V/t), in row chunks
//   loss   = loss_scale · Σ_n CE(logits_n, y_n)  max and sums all-reduced between the steps
//   dlogits = loss_scale·(softmax - onehot)      overwrites the logits chunk (bf16 values under
//                                                bf16, sublayer.h rounded_products)
//   dh = dlogits @ wte_r (summed by f's backward),  dwte_r += dlogitsᵀ @ h,  dx = LNᵀ(dh)
//
// Vocab-parallel embedding and cross-entropy are Megatron-LM's (Shoeybi et al. 2019, §3): no rank
// ever holds the full (N,V) logits. On one rank f and g are the identity and the reductions too.
// The logits are never held whole anyway: rows go through in chunks of at most
// KernelOps::logits_chunk_elements() elements (16 MiB on the CPU, 1 GiB on a GPU), so on the CPU
// GPT-2's (B·T, 50257) never exists; for the small presets one chunk holds them all.
// Press & Wolf 2017 (tied embeddings); llm.c's fused classifier. A padded vocabulary
// (GPTConfig::vocab_divisible_by; V/t below is then Vp/t) adds zero rows to wte whose logits are
// masked: the loss and every real gradient are the unpadded model's.
//
// Glossary: B batch, T sequence, Tl rows of a sequence held, n = B·Tl, N = B·T, C channels,
// V vocab, t tp ranks, r rank, wte_r this rank's V/t rows of wte.
#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/nn/checks.h"
#include "common/nn/f32_view.h"
#include "common/nn/gpt.h"
#include "common/nn/sublayer.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

Tensor GPT::embed_forward(const float* emb_params, const int32_t* tokens, int B, int T) const {
  check_batch_shape("embed_forward", cfg_, B, T, tp_->seq_shards());
  check_ids("embed_forward", "token", tokens, B, T, cfg_.vocab);
  if (core_) {  // context parallelism: this rank's rows of every sequence, whole replicas
    const std::vector<int> pos = core_->positions(T);
    const std::vector<int32_t> held = ids_held(tokens, B, T);
    const int C = cfg_.d, Tl = static_cast<int>(pos.size());
    // On a device (a core with supports_device()): the held ids and positions go up, 4(B·Tl+Tl).
    Tensor ids_dev, pos_dev;
    const int32_t* ids = ids_on(device_, held.data(), int64_t{B} * Tl, ids_dev);
    const int* at = ids_on(device_, pos.data(), Tl, pos_dev);
    // In the run's activation dtype, rounded as the whole-sequence path below rounds.
    Tensor x = activation({B, Tl, C}, act_dtype_, device_);
    KernelOps& ops = kernel_ops(device_);
    ops.token_embedding_forward(F32Out(x), ids, emb_params, 0, vocab_rows(), B * Tl, C);
    ops.position_embedding_forward_at(F32Out(x, /*load=*/true),
                                      emb_params + int64_t{vocab_rows()} * C, B, Tl, at, C);
    return x;
  }
  const int C = cfg_.d, Tl = T / tp_->seq_shards(), Vr = vocab_rows();
  const float* wte = emb_params;                            // (V/t,C)
  const float* wpe = emb_params + int64_t{Vr} * C;          // (ctx,C)
  KernelOps& ops = kernel_ops(device_);
  Tensor ids_dev;
  const int32_t* ids = ids_on(device_, tokens, int64_t{B} * T, ids_dev);
  // The residual stream starts here, in the run's activation dtype (f32, or 16-bit: f32_view.h),
  // on the model's device.
  Tensor part = activation({B, T, C}, act_dtype_, device_);
  ops.token_embedding_forward(F32Out(part), ids, wte, vocab_begin(), Vr, B * T, C);
  Tensor x = tp_->exit_forward(std::move(part));  // Σ of the ranks' rows: (N,C) -> (n,C)
  ops.position_embedding_forward(F32Out(x, /*load=*/true), wpe, B, Tl, first_position(T), C);
  return x;
}

void GPT::embed_backward(const int32_t* tokens, int B, int T, const Tensor& dx,
                         float* emb_grads) const {
  check_batch_shape("embed_backward", cfg_, B, T, tp_->seq_shards());
  check_ids("embed_backward", "token", tokens, B, T, cfg_.vocab);
  if (core_) {
    const std::vector<int> pos = core_->positions(T);
    const std::vector<int32_t> held = ids_held(tokens, B, T);
    const int C = cfg_.d, Tl = static_cast<int>(pos.size());
    Tensor ids_dev, pos_dev;  // on a device: up again, 4(B·Tl+Tl) bytes
    const int32_t* ids = ids_on(device_, held.data(), int64_t{B} * Tl, ids_dev);
    const int* at = ids_on(device_, pos.data(), Tl, pos_dev);
    KernelOps& ops = kernel_ops(device_);
    const F32In d(dx);  // dx itself in fp32; a widened copy of a 16-bit dx
    ops.position_embedding_backward_at(emb_grads + int64_t{vocab_rows()} * C, d, B, Tl, at, C);
    ops.token_embedding_backward(emb_grads, d, ids, 0, vocab_rows(), B * Tl, C);
    return;
  }
  const int C = cfg_.d, Tl = T / tp_->seq_shards(), Vr = vocab_rows();
  KernelOps& ops = kernel_ops(device_);
  Tensor ids_dev;
  const int32_t* ids = ids_on(device_, tokens, int64_t{B} * T, ids_dev);
  ops.position_embedding_backward(emb_grads + int64_t{Vr} * C, F32In(dx), B, Tl,
                                  first_position(T), C);
  const Tensor dfull = tp_->exit_backward(dx);  // (n,C) -> (N,C)
  ops.token_embedding_backward(emb_grads, F32In(dfull), ids, vocab_begin(), Vr, B * T, C);
}

double GPT::head_forward_backward(const float* lnf_params, const float* wte, const Tensor& x,
                                  const int32_t* targets, int B, int T, float loss_scale,
                                  Tensor* dx, float* lnf_grads, float* wte_grads) const {
  check_batch_shape("head_forward_backward", cfg_, B, T, tp_->seq_shards());
  check_ids("head_forward_backward", "target", targets, B, T, cfg_.vocab);
  std::vector<int32_t> held;
  if (core_) {  // context parallelism: the targets of this rank's rows; the loss is its part
    held = ids_held(targets, B, T);
    targets = held.data();
    T /= core_->shards();
  }
  const int C = cfg_.d, Vr = vocab_rows(), v0 = vocab_begin();
  const int n = static_cast<int>(x.numel() / C), N = B * T;
  const bool backward = dx != nullptr;
  const float* lnf_w = lnf_params;
  const float* lnf_b = lnf_params + C;

  // h = LN(x; ln_f)  (n,C), then the whole rows the vocab-parallel product needs (N,C)
  // Under mixed precision h and dh are 16-bit like every activation; the logits chunk, its
  // softmax and the loss stay fp32 (f32_view.h).
  const DType dt = x.dtype();
  const Device dev = x.device();
  KernelOps& ops = kernel_ops(dev);
  Tensor ids_dev;
  targets = ids_on(dev, targets, int64_t{N}, ids_dev);
  Tensor h = activation(x.shape(), dt, dev), mean = statistic({n}, dev), rstd = statistic({n}, dev);
  ops.layernorm_forward(as_stored(h), mean.f32(), rstd.f32(), as_stored(x), lnf_w, lnf_b, n, C);
  const Tensor hf = tp_->enter_forward(h);
  const F32In hf32(hf);

  const int64_t chunk = ops.logits_chunk_elements();
  const int rows = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(N, chunk / Vr)));
  Tensor logits = statistic({rows, Vr}, dev), m = statistic({rows}, dev);
  Tensor sums = statistic({2 * rows}, dev);
  // A padded vocabulary: this rank's last `pad` columns are no token's. Their logits become -inf
  // before the softmax (probability 0: on the CPU each adds at most 2⁻¹²⁶ to a sum ≥ 1, Eigen's
  // exp clamping its argument at -88.4; nothing on a GPU) and their dlogits 0 after it (not
  // that ~2⁻¹²⁶ quotient), so the pad rows of wte get exactly zero gradients. Both are
  // copy_columns from a (rows, pad) block.
  const int pad = vocab_pad_rows();
  Tensor neg_inf, zero;
  if (pad > 0) {
    neg_inf = statistic({rows, pad}, dev);
    neg_inf.fill(-std::numeric_limits<float>::infinity());
    if (backward) zero = Tensor::zeros({rows, pad}, DType::kF32, MemCategory::kActivations, dev);
  }
  Tensor dh;
  if (backward) dh = activation({B, T, C}, dt, dev);
  F32Out dh32(dh);

  // bf16 activations: the dlogits become bf16 values, as every activation gradient is
  // (sublayer.h rounded_products), rounded by the loss step as it writes them, and the two
  // backward products read 16-bit operands only; under the walk's bf16 declaration a GPU runs
  // them on its 16-bit tensor cores. Else (f32: rd = f32) nothing is rounded.
  const DType rd = rounded_products(dt);
  const bool whole_vocab = Vr == cfg_.padded_vocab();  // no vocabulary split: nothing to reduce
  double total = 0.0;
  for (int r0 = 0; r0 < N; r0 += rows) {
    const int k = std::min(rows, N - r0);
    const float* hc = hf32.get() + int64_t{r0} * C;
    const int32_t* y = targets + r0;
    ops.matmul_nt_forward(logits.f32(), hc, wte, k, C, Vr);  // (k,C) @ (C,V/t) -> (k,V/t)
    if (pad > 0) ops.copy_columns(logits.f32() + (Vr - pad), Vr, neg_inf.f32(), pad, k, pad);
    if (whole_vocab) {  // the row maxima and Σ exp in one pass over the logits
      ops.cross_entropy_max_sums(m.f32(), sums.f32(), logits.f32(), y, v0, k, Vr);
    } else {
      ops.cross_entropy_row_max(m.f32(), logits.f32(), k, Vr);
      Tensor mk = m.narrow(0, k), sk = sums.narrow(0, 2 * k);
      tp_->all_reduce_max(mk);  // the row maxima over the whole vocabulary
      ops.cross_entropy_exp_sums(sums.f32(), logits.f32(), y, v0, k, Vr, m.f32());
      tp_->all_reduce_sum(sk);  // Σ exp and the target logit over the whole vocabulary
    }
    // Σ CE over the chunk; with backward the logits become loss_scale·(softmax - onehot).
    total += ops.cross_entropy_loss(logits.f32(), y, v0, k, Vr, m.f32(), sums.f32(), loss_scale,
                                    backward, rd);
    if (backward) {  // dh (k,C) = dlogits @ wte_r (partial);  dwte_r (V/t,C) += dlogitsᵀ @ h
      if (pad > 0) ops.copy_columns(logits.f32() + (Vr - pad), Vr, zero.f32(), pad, k, pad);
      const MatmulOperands operands(ops, rd == DType::kF32 ? DType::kF32 : ops.matmul_operands());
      ops.matmul_nt_backward(dh32.get() + int64_t{r0} * C, wte_grads, logits.f32(), hc, wte, k, C,
                             Vr);
    }
  }
  if (backward) {  // dx (n,C) = LNᵀ(Σ_ranks dh); layernorm_backward accumulates, so start from 0
    dh32.store();
    const Tensor dhs = tp_->enter_backward(std::move(dh));
    *dx = Tensor::zeros(x.shape(), dt, MemCategory::kActivations, dev);
    ops.layernorm_backward(as_stored(*dx), as_stored(*dx), lnf_grads, lnf_grads + C,
                           as_stored(dhs), as_stored(x), lnf_w, mean.f32(), rstd.f32(), n, C);
  }
  return static_cast<double>(loss_scale) * total;
}

}  // namespace llmp
