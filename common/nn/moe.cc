// The mixture-of-experts sub-layer (moe.h), forward and backward, line by line.
//
// Mixed precision (--precision bf16 / fp16; common/nn/f32_view.h): the activations the layer
// keeps and the four all_to_all buffers are in the block input's 16-bit dtype, so the tokens
// travel at 2 bytes an element; the experts' products, GELU and LayerNorm take them as stored,
// as the dense MLP does (mlp.cc). The router and the combine stay fp32, Switch Transformer's
// "selective precision" (Fedus et al. 2021, §2.4): the router logits z, the gates, dgate, the
// router's dlogits and ln_2's input gradient dln (k + 1 terms summed) are fp32, and their
// products run under an fp32 operand declaration (kernel_ops.h MatmulOperands): the gates and
// dlogits are not 16-bit values, and a GPU must not round them to 16-bit operands. fp32 runs
// the code it ran before (every view below is then the tensor's own floats).
//
// Buffers of the dispatch: D (E,G,cap,C) on the tokens' rank, ordered by expert so that chunk j
// of the all_to_all is rank j's experts; after it, rank r holds (ep, E/ep, G, cap, C): from each
// source rank i, its groups' slots of r's experts. experts_major() reorders that to
// (E/ep, ep, G, cap, C) so each held expert multiplies one contiguous (M,C) block in global
// sequence order; ranks_major() is its inverse before the return all_to_all.
//
// Glossary as in moe.h: n tokens, E experts, k, G groups, cap slots, ep ranks, M = ep·G·cap.
#include "common/nn/moe.h"

#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/nn/f32_view.h"
#include "common/nn/gpt.h"
#include "common/nn/sublayer.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

Tensor ExpertComm::all_to_all(const Tensor& in) {
  Tensor out = Tensor::empty(in.shape(), in.dtype(), MemCategory::kCommBuffers, in.device());
  out.copy_from(in);
  return out;
}

ExpertComm& ExpertComm::none() {
  static ExpertComm one;
  return one;
}

void MoeStats::reset(int E) {
  *this = MoeStats{};
  routed.assign(E, 0), kept.assign(E, 0), first.assign(E, 0);
}

MoeContext::MoeContext(int experts, ExpertComm* comm) : comm_(comm ? comm : &ExpertComm::none()) {
  stats_.reset(experts);
}

namespace {

// (a, b, rest) -> (b, a, rest): the (ep, E/ep) <-> (E/ep, ep) swap of the expert buffers, into a
// new tensor on the buffer's device (swap_leading_dims: strided copies, no host touches device
// memory).
Tensor swap_leading(const Tensor& in, int64_t a, int64_t b, MemCategory cat) {
  Tensor out = Tensor::empty({b, a, in.numel() / (a * b)}, in.dtype(), cat, in.device());
  swap_leading_dims(out, in, a, b);
  return out;
}

// Each kept assignment's dispatch-buffer row (Routing::buffer_row; −1 when dropped), in c->slots,
// and where the kernels read it: on a device a copy kept with the cache (4·n·k bytes up per
// forward), the host vector itself on the CPU. What the block's four token permutations index.
void set_slots(MoeCache* c, Device dev) {
  const Routing& r = c->routing;
  c->slots.resize(static_cast<size_t>(r.n) * r.k);
  for (int t = 0; t < r.n; ++t)
    for (int j = 0; j < r.k; ++j) c->slots[t * r.k + j] = static_cast<int32_t>(r.buffer_row(t, j));
  ids_on(dev, c->slots.data(), static_cast<int64_t>(c->slots.size()), c->slots_on_device);
}

// One token permutation of the block (kernels/cpu/permute_rows.h), every assignment a = t·k + j in
// one KernelOps call on the tensors' device: to_slots, dst's row slots[a] = src's row r(a); else
// dst's row r(a) = src's row slots[a]; r(a) = j·row_j + t·row_t, rows of C elements of the
// tensors' one dtype. Rows no kept assignment names stay as they are (dst starts as zeros).
void permute(const Tensor& dst, const Tensor& src, const MoeCache& c, int64_t row_j,
             int64_t row_t, bool to_slots, int C) {
  if (dst.dtype() != src.dtype() || dst.device() != src.device())
    throw std::invalid_argument("moe: a token permutation from " + src.describe() + " to " +
                                dst.describe() + " crosses dtypes or devices");
  const int32_t* slots = c.slots_on_device.defined()
                             ? static_cast<const int32_t*>(c.slots_on_device.raw())
                             : c.slots.data();
  kernel_ops(dst.device())
      .permute_rows(dst.raw(), src.raw(), slots, c.routing.n, c.routing.k, row_j, row_t,
                    to_slots, int64_t{C} * dtype_size(dst.dtype()));
}

// `x` readable by the host: x itself on the CPU, else a host copy (x.numel() floats down).
Tensor on_host(const Tensor& x) {
  if (x.device() == Device::kCPU) return x;
  Tensor h = Tensor::empty(x.shape(), x.dtype(), MemCategory::kActivations);
  h.copy_from(x);
  return h;
}

// A host vector as an f32 tensor on `dev` (v.size() floats up when dev is a device).
Tensor to_device(const std::vector<float>& v, std::vector<int64_t> shape, Device dev) {
  Tensor host = Tensor::empty(shape, DType::kF32, MemCategory::kActivations);
  std::memcpy(host.f32(), v.data(), v.size() * sizeof(float));
  if (dev == Device::kCPU) return host;
  Tensor d = Tensor::empty(std::move(shape), DType::kF32, MemCategory::kActivations, dev);
  d.copy_from(host);
  return d;
}

// Elements [off, off + n) of t as stored: one held expert's rows of a (E/ep, M, ·) buffer.
Act part(const Tensor& t, int64_t off, int64_t n) { return as_stored(t.narrow(off, n)); }

}  // namespace

// What crosses between host and device per MoE block (nothing on the CPU): the router logits z
// down (4·n·E bytes) and the gates up (4·n·k) in the forward; dgate down (4·n·k) and dlogits up
// (4·n·E) in the backward. Routing (top-k, capacity, slots) and its backward are integer and
// per-token bookkeeping on the host (moe_routing.h); every activation stays on the device and
// moves by KernelOps: the token permutations too (permute, one call each), indexed by the
// assignments' slots (4·n·k bytes up per forward).
Tensor moe_forward(const GPTConfig& cfg, const BlockShape& s, MoeContext& ctx, const float* unit,
                   const Tensor& res1, int B, int T, MoeCache* c) {
  const int C = s.C, E = cfg.experts, k = cfg.top_k, F = s.ffn;
  const DType dt = res1.dtype();  // f32, or mixed precision's 16-bit storage (f32_view.h)
  const Device dev = res1.device();
  KernelOps& ops = kernel_ops(dev);
  ExpertComm& comm = ctx.comm();
  const int ep = comm.size(), held = E / ep, G = B;
  const int n = B * T;
  const auto bp = block_params(unit, s);
  const auto mp = moe_params(unit, s, E, held);
  *c = MoeCache{};
  c->ln2 = activation({B, T, C}, dt, dev);
  c->ln2_mean = statistic({B, T}, dev);
  c->ln2_rstd = statistic({B, T}, dev);
  ops.layernorm_forward(as_stored(c->ln2), c->ln2_mean.f32(), c->ln2_rstd.f32(), as_stored(res1),
                        bp.ln2_w, bp.ln2_b, n, C);
  // Router: z (n,E) = ln2 @ W_router, fp32 (its operands are 16-bit values: ln2 as stored and the
  // 16-bit weights' copy); top-k, gates and slots per sequence, on the host.
  {
    Tensor z = Tensor::empty({n, E}, DType::kF32, MemCategory::kActivations, dev);
    ops.matmul_forward(z.f32(), as_stored(c->ln2), mp.router, nullptr, n, C, E);
    c->routing = route(on_host(z).f32(), n, E, k, T, cfg.capacity_factor);  // 4·n·E down
  }
  const Routing& r = c->routing;
  const int cap = r.cap;
  if (!ctx.recomputing()) {  // a recomputed forward routes the same tokens again: counted once
    MoeStats& st = ctx.stats();
    for (int e = 0; e < E; ++e) st.routed[e] += r.routed[e], st.kept[e] += r.kept[e];
    for (int t = 0; t < n; ++t) ++st.first[r.expert[t * k]];
    st.assignments += static_cast<int64_t>(n) * k;
    for (int e = 0; e < E; ++e) st.dropped += r.routed[e] - r.kept[e];
    st.aux_sum += r.aux_sum, st.aux_terms += G, st.z_sum += r.z_sum, ++st.forwards;
  }
  // Dispatch: D[e][g][s] = ln2[t] (E,G,cap,C), in ln2's dtype; to the experts' ranks.
  //                                                                  sends (ep-1)/ep·e·|D|
  set_slots(c, dev);
  Tensor x;
  {
    Tensor D = Tensor::zeros({E, G, cap, C}, dt, MemCategory::kCommBuffers, dev);
    permute(D, c->ln2, *c, /*row_j=*/0, /*row_t=*/1, /*to_slots=*/true, C);  // D[slot] = ln2[t]
    const Tensor R = comm.all_to_all(D);  // (ep, E/ep, G, cap, C)
    x = swap_leading(R, ep, held, MemCategory::kActivations);
  }
  // The held experts, each over its M = ep·G·cap rows: Y = gelu(X @ W_fc + b) @ W_proj + b,
  // every activation as stored (the dense MLP's products, mlp.cc).
  const int M = ep * G * cap;
  const int64_t MC = static_cast<int64_t>(M) * C, MF = static_cast<int64_t>(M) * F;
  c->x = x.view({held, M, C});
  c->fch = activation({held, M, F}, dt, dev);
  c->fch_gelu = activation({held, M, F}, dt, dev);
  Tensor y = Tensor::empty({held, M, C}, dt, MemCategory::kActivations, dev);
  for (int e = 0; e < held; ++e) {
    const auto& w = mp.experts[e];
    const int64_t xo = e * MC, fo = e * MF;
    ops.matmul_forward(part(c->fch, fo, MF), part(c->x, xo, MC), w.fc_w, w.fc_b, M, C, F);
    ops.gelu_forward(part(c->fch_gelu, fo, MF), part(c->fch, fo, MF), static_cast<long>(MF));
    ops.matmul_forward(part(y, xo, MC), part(c->fch_gelu, fo, MF), w.proj_w, w.proj_b, M, F, C);
  }
  // Back to the tokens' ranks.                                       sends (ep-1)/ep·e·|D|
  const Tensor yd = comm.all_to_all(swap_leading(y, held, ep, MemCategory::kCommBuffers));
  // Combine: Yg[t][j] = Yd[e_j][g][s_j] (zeros when dropped), then for every token
  // out[t] (1,C) = res1[t] + g(t) (1,k) @ Yg[t] (k,C): n products of (1,k) @ (k,C) in ONE
  // strided-batched GEMM (β = 1 onto res1), fp32 on fp32 views of Yg and res1 (the gates are
  // fp32), out rounded once. One launch on a GPU where n per-token matmuls were n launches.
  c->yg = Tensor::zeros({n, k, C}, dt, MemCategory::kActivations, dev);
  permute(c->yg, yd, *c, /*row_j=*/1, /*row_t=*/k, /*to_slots=*/false, C);  // Yg[a] = Yd[slot]
  c->gates = to_device(r.gate, {n, k}, dev);  // 4·n·k up
  Tensor out = activation({B, T, C}, dt, dev);
  {
    const MatmulOperands fp32_operands(ops, DType::kF32);
    const F32In yg(c->yg);
    const Fp32Copy o32(as_stored(out), as_stored(res1), int64_t{n} * C, dev);  // starts as res1
    // out[t] (1,C) = g(t) (1,k) @ Yg[t] (k,C) + out[t], t = 0..n-1: strides k, k·C and C.
    ops.gemm_strided_batched(false, false, 1, C, k, 1.0f, c->gates.f32(), k, k, yg.get(), C,
                             int64_t{k} * C, 1.0f, o32.get(), C, C, n);
  }
  return out;
}

Tensor moe_backward_input(const GPTConfig& cfg, const BlockShape& s, MoeContext& ctx,
                          const float* unit, const Tensor& res1, MoeCache* c, const Tensor& dout,
                          MoeGrads* keep) {
  if (!c->filled()) throw std::invalid_argument("moe_backward_input: the cache is not filled");
  const int C = s.C, E = cfg.experts, k = cfg.top_k, F = s.ffn;
  const DType dt = res1.dtype();
  const Device dev = res1.device();
  KernelOps& ops = kernel_ops(dev);
  ExpertComm& comm = ctx.comm();
  const int ep = comm.size(), held = E / ep;
  const Routing& r = c->routing;
  const int n = r.n, G = r.groups(), cap = r.cap, M = ep * G * cap;
  const int64_t MC = static_cast<int64_t>(M) * C, MF = static_cast<int64_t>(M) * F;
  const auto bp = block_params(unit, s);
  const auto mp = moe_params(unit, s, E, held);
  *keep = MoeGrads{};
  keep->dy = dout;
  // Combine's backward, for every token in fp32, each one strided-batched GEMM over the n tokens:
  // dgate[t] (1,k) = dout[t] (1,C) @ Yg[t]ᵀ (C,k) (0 for a dropped assignment: its Yg row is
  // zero) and dYg[t] (k,C) = g(t)ᵀ (k,1) @ dout[t] (1,C), dYg rounded once into dout's dtype.
  Tensor dyx;
  std::vector<float> dgate(static_cast<size_t>(n) * k);
  {
    Tensor dgate_d = Tensor::empty({n, k}, DType::kF32, MemCategory::kActivations, dev);
    Tensor dyg = activation({n, k, C}, dt, dev);
    {
      const MatmulOperands fp32_operands(ops, DType::kF32);
      const F32In d(dout), yg(c->yg);
      F32Out dyg32(dyg);
      // dgate[t] (1,k) = dout[t] (1,C) @ Yg[t]ᵀ (C,k): Yg[t] stored (k,C), transposed.
      ops.gemm_strided_batched(false, true, 1, k, C, 1.0f, d.get(), C, C, yg.get(), C,
                               int64_t{k} * C, 0.0f, dgate_d.f32(), k, k, n);
      // dYg[t] (k,C) = g(t)ᵀ (k,1) @ dout[t] (1,C): g(t) stored (1,k), transposed.
      ops.gemm_strided_batched(true, false, k, C, 1, 1.0f, c->gates.f32(), k, k, d.get(), C, C,
                               0.0f, dyg32.get(), C, int64_t{k} * C, n);
    }
    std::memcpy(dgate.data(), on_host(dgate_d).f32(), dgate.size() * sizeof(float));  // 4·n·k down
    c->yg = Tensor(), c->gates = Tensor();
    // dYd[row] = dYg[t][j] for each kept assignment; to the experts.  sends (ep-1)/ep·e·|D|
    Tensor dYd = Tensor::zeros({E, G, cap, C}, dt, MemCategory::kCommBuffers, dev);
    permute(dYd, dyg, *c, /*row_j=*/1, /*row_t=*/k, /*to_slots=*/true, C);  // dYd[slot] = dYg[a]
    dyx = swap_leading(comm.all_to_all(dYd), ep, held, MemCategory::kActivations);
  }
  keep->dyx = dyx.view({held, M, C});
  keep->dfch = activation({held, M, F}, dt, dev);
  Tensor dx = Tensor::empty({held, M, C}, dt, MemCategory::kCommBuffers, dev);
  {
    // dfch_gelu stays fp32 for gelu_backward, which writes dfch rounded once (the dense MLP's
    // order, mlp.cc): an fp32 scratch under 16-bit activations, dfch itself (in place) in fp32.
    const Tensor dfch_gelu =
        dt == DType::kF32 ? Tensor() : Tensor::empty({MF}, DType::kF32, MemCategory::kOther, dev);
    for (int e = 0; e < held; ++e) {
      const auto& w = mp.experts[e];
      const int64_t xo = e * MC, fo = e * MF;
      float* dg = dt == DType::kF32 ? keep->dfch.f32() + fo : dfch_gelu.f32();
      ops.matmul_backward_input(dg, part(keep->dyx, xo, MC), w.proj_w, M, F, C);  // dfch_gelu
      ops.gelu_backward(part(keep->dfch, fo, MF), part(c->fch, fo, MF), dg, static_cast<long>(MF));
      ops.matmul_backward_input(part(dx, xo, MC), part(keep->dfch, fo, MF), w.fc_w, M, C, F);
    }
  }
  c->fch = Tensor();  // W needs only GELU's output
  // Back to the tokens (the dispatch's backward).                    sends (ep-1)/ep·e·|D|
  const Tensor dD = comm.all_to_all(swap_leading(dx, held, ep, MemCategory::kCommBuffers));
  // The router: dlogits from the gates, the load-balancing loss (weight α per sequence of the
  // global mean: α·loss_scale·T) and the z-loss (β per token: β·loss_scale), on the host, then
  // up (4·n·E); dln2 (fp32) = dlogits @ W_routerᵀ + Σ_j dD[row(t,j)].
  {
    std::vector<float> dlogits(static_cast<size_t>(n) * E);
    route_backward(r, dgate.data(), cfg.aux_loss_coef * ctx.loss_scale() * r.S, dlogits.data(),
                   cfg.z_loss_coef * ctx.loss_scale());
    keep->dlogits = to_device(dlogits, {n / r.S, r.S, E}, dev);
  }
  keep->dln = activation({n / r.S, r.S, C}, DType::kF32, dev);
  {
    const MatmulOperands fp32_operands(ops, DType::kF32);
    ops.matmul_backward_input(keep->dln.f32(), keep->dlogits.f32(), mp.router, n, C, E);
  }
  {
    // dDg[j][t] = dD[row(t,j)] (k,n,C), zeros when dropped; dln += dDg[j] for each j (the
    // residual add with a zero bias: element-wise, no FLOPs counted, as the CPU loop was).
    Tensor dDg = Tensor::zeros({k, n, C}, dt, MemCategory::kActivations, dev);
    permute(dDg, dD, *c, /*row_j=*/n, /*row_t=*/1, /*to_slots=*/false, C);  // dDg[j][t] = dD[slot]
    const F32In dg(dDg);
    const Tensor zero = Tensor::zeros({C}, DType::kF32, MemCategory::kActivations, dev);
    for (int j = 0; j < k; ++j)
      ops.residual_bias_add(keep->dln.f32(), keep->dln.f32(),
                            dg.get() + static_cast<int64_t>(j) * n * C, zero.f32(), n, C);
  }
  // dres1 = dout (residual) + LN2ᵀ(dln2), written once in res1's dtype.
  Tensor dres1 = activation(res1.shape(), dt, dev);
  ops.layernorm_backward(as_stored(dres1), as_stored(dout), nullptr, nullptr,
                         keep->dln.f32(), as_stored(res1), bp.ln2_w, c->ln2_mean.f32(),
                         c->ln2_rstd.f32(), n, C);
  return dres1;
}

void moe_backward_weight(const GPTConfig& cfg, const BlockShape& s, MoeContext& ctx,
                         const Tensor& res1, const MoeCache& c, const MoeGrads& keep,
                         float* unit_grads) {
  const int C = s.C, E = cfg.experts, F = s.ffn;
  KernelOps& ops = kernel_ops(res1.device());
  const int held = E / ctx.comm().size();
  const int n = c.routing.n, M = static_cast<int>(c.x.dim(1));
  const int64_t MC = static_cast<int64_t>(M) * C, MF = static_cast<int64_t>(M) * F;
  const auto g = block_params(unit_grads, s);
  const auto mg = moe_params(unit_grads, s, E, held);
  // Router: dW (C,E) += ln2ᵀ @ dlogits (fp32 dlogits: an fp32 product).
  {
    const MatmulOperands fp32_operands(ops, DType::kF32);
    ops.matmul_backward_weight(mg.router, nullptr, keep.dlogits.f32(), as_stored(c.ln2), n, C, E);
  }
  // Each held expert over its M rows (empty slots have zero gradients: they add nothing).
  for (int e = 0; e < held; ++e) {
    const auto& w = mg.experts[e];
    const int64_t xo = e * MC, fo = e * MF;
    ops.matmul_backward_weight(w.proj_w, w.proj_b, part(keep.dyx, xo, MC),
                               part(c.fch_gelu, fo, MF), M, F, C);
    ops.matmul_backward_weight(w.fc_w, w.fc_b, part(keep.dfch, fo, MF), part(c.x, xo, MC), M, C,
                               F);
  }
  ops.layernorm_backward_weight(g.ln2_w, g.ln2_b, keep.dln.f32(), as_stored(res1),
                                c.ln2_mean.f32(), c.ln2_rstd.f32(), n, C);
}

}  // namespace llmp
