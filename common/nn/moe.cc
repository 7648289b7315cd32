// The mixture-of-experts sub-layer (moe.h), forward and backward, line by line. fp32 only.
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

#include "common/nn/gpt.h"
#include "common/nn/sublayer.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"

namespace llmp {

Tensor ExpertComm::all_to_all(const Tensor& in) {
  Tensor out = Tensor::empty(in.shape(), in.dtype(), MemCategory::kCommBuffers);
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

// (a, b, rest) -> (b, a, rest): the (ep, E/ep) <-> (E/ep, ep) swap of the expert buffers.
Tensor swap_leading(const Tensor& in, int64_t a, int64_t b, MemCategory cat) {
  const int64_t rest = in.numel() / (a * b);
  Tensor out = Tensor::empty({b, a, rest}, DType::kF32, cat);
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      std::memcpy(out.f32() + (j * a + i) * rest, in.f32() + (i * b + j) * rest,
                  rest * sizeof(float));
  return out;
}

void check_f32(const Tensor& x) {
  if (x.dtype() != DType::kF32)
    throw std::invalid_argument(std::string("a mixture of experts trains in fp32 only (got ") +
                                to_string(x.dtype()) + ")");
}

}  // namespace

Tensor moe_forward(const GPTConfig& cfg, const BlockShape& s, MoeContext& ctx, const float* unit,
                   const Tensor& res1, int B, int T, MoeCache* c) {
  check_f32(res1);
  const int C = s.C, E = cfg.experts, k = cfg.top_k, F = s.ffn;
  ExpertComm& comm = ctx.comm();
  const int ep = comm.size(), held = E / ep, G = B;
  const int n = B * T;
  const auto bp = block_params(unit, s);
  const auto mp = moe_params(unit, s, E, held);
  *c = MoeCache{};
  c->ln2 = activation({B, T, C}, DType::kF32);
  c->ln2_mean = statistic({B, T});
  c->ln2_rstd = statistic({B, T});
  cpu::layernorm_forward(c->ln2.f32(), c->ln2_mean.f32(), c->ln2_rstd.f32(), res1.f32(), bp.ln2_w,
                         bp.ln2_b, n, C);
  // Router: z (n,E) = ln2 @ W_router; top-k, gates and slots per sequence.
  {
    Tensor z = Tensor::empty({n, E}, DType::kF32, MemCategory::kActivations);
    cpu::matmul_forward(z.f32(), c->ln2.f32(), mp.router, nullptr, n, C, E);
    c->routing = route(z.f32(), n, E, k, T, cfg.capacity_factor);
  }
  const Routing& r = c->routing;
  const int cap = r.cap;
  MoeStats& st = ctx.stats();
  for (int e = 0; e < E; ++e) st.routed[e] += r.routed[e], st.kept[e] += r.kept[e];
  for (int t = 0; t < n; ++t) ++st.first[r.expert[t * k]];
  st.assignments += static_cast<int64_t>(n) * k;
  for (int e = 0; e < E; ++e) st.dropped += r.routed[e] - r.kept[e];
  st.aux_sum += r.aux_sum, st.aux_terms += G, st.z_sum += r.z_sum, ++st.forwards;
  // Dispatch: D[e][g][s] = ln2[t] (E,G,cap,C); to the experts' ranks.     sends (ep-1)/ep·4·|D|
  Tensor x;
  {
    Tensor D = Tensor::zeros({E, G, cap, C}, DType::kF32, MemCategory::kCommBuffers);
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < k; ++j) {
        const int64_t row = r.buffer_row(t, j);
        if (row >= 0)
          std::memcpy(D.f32() + row * C, c->ln2.f32() + static_cast<int64_t>(t) * C,
                      C * sizeof(float));
      }
    const Tensor R = comm.all_to_all(D);  // (ep, E/ep, G, cap, C)
    x = swap_leading(R, ep, held, MemCategory::kActivations);
  }
  // The held experts, each over its M = ep·G·cap rows: Y = gelu(X @ W_fc + b) @ W_proj + b.
  const int M = ep * G * cap;
  c->x = x.view({held, M, C});
  c->fch = activation({held, M, F}, DType::kF32);
  c->fch_gelu = activation({held, M, F}, DType::kF32);
  Tensor y = Tensor::empty({held, M, C}, DType::kF32, MemCategory::kActivations);
  for (int e = 0; e < held; ++e) {
    const auto& w = mp.experts[e];
    const int64_t xo = static_cast<int64_t>(e) * M * C, fo = static_cast<int64_t>(e) * M * F;
    cpu::matmul_forward(c->fch.f32() + fo, c->x.f32() + xo, w.fc_w, w.fc_b, M, C, F);
    cpu::gelu_forward(c->fch_gelu.f32() + fo, c->fch.f32() + fo, static_cast<long>(M) * F);
    cpu::matmul_forward(y.f32() + xo, c->fch_gelu.f32() + fo, w.proj_w, w.proj_b, M, F, C);
  }
  // Back to the tokens' ranks.                                            sends (ep-1)/ep·4·|D|
  c->yd = comm.all_to_all(swap_leading(y, held, ep, MemCategory::kCommBuffers));  // (E,G,cap,C)
  // Combine: out[t] = res1[t] + Σ_j g_j · Yd[e_j][g][s_j].
  Tensor out = activation({B, T, C}, DType::kF32);
  std::memcpy(out.f32(), res1.f32(), out.nbytes());
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      const int64_t row = r.buffer_row(t, j);
      if (row < 0) continue;  // dropped: the residual carries the token
      const float g = r.gate[t * k + j];
      float* o = out.f32() + static_cast<int64_t>(t) * C;
      const float* yr = c->yd.f32() + row * C;
      for (int i = 0; i < C; ++i) o[i] += g * yr[i];
    }
  return out;
}

Tensor moe_backward_input(const GPTConfig& cfg, const BlockShape& s, MoeContext& ctx,
                          const float* unit, const Tensor& res1, MoeCache* c, const Tensor& dout,
                          MoeGrads* keep) {
  if (!c->filled()) throw std::invalid_argument("moe_backward_input: the cache is not filled");
  const int C = s.C, E = cfg.experts, k = cfg.top_k, F = s.ffn;
  ExpertComm& comm = ctx.comm();
  const int ep = comm.size(), held = E / ep;
  const Routing& r = c->routing;
  const int n = r.n, G = r.groups(), cap = r.cap, M = ep * G * cap;
  const auto bp = block_params(unit, s);
  const auto mp = moe_params(unit, s, E, held);
  *keep = MoeGrads{};
  keep->dy = dout;
  // Combine's backward: dYd[row] = g_j·dout[t]; dgate_j = dout[t]·Yd[row].
  std::vector<float> dgate(static_cast<size_t>(n) * k, 0.0f);
  Tensor dyx;
  {
    Tensor dYd = Tensor::zeros({E, G, cap, C}, DType::kF32, MemCategory::kCommBuffers);
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < k; ++j) {
        const int64_t row = r.buffer_row(t, j);
        if (row < 0) continue;
        const float g = r.gate[t * k + j];
        const float* d = dout.f32() + static_cast<int64_t>(t) * C;
        const float* yr = c->yd.f32() + row * C;
        float* dr = dYd.f32() + row * C;
        double dot = 0;
        for (int i = 0; i < C; ++i) dr[i] = g * d[i], dot += static_cast<double>(d[i]) * yr[i];
        dgate[t * k + j] = static_cast<float>(dot);
      }
    c->yd = Tensor();
    // To the experts (the return all_to_all's backward).             sends (ep-1)/ep·4·|D|
    dyx = swap_leading(comm.all_to_all(dYd), ep, held, MemCategory::kActivations);
  }
  keep->dyx = dyx.view({held, M, C});
  keep->dfch = activation({held, M, F}, DType::kF32);
  Tensor dx = Tensor::empty({held, M, C}, DType::kF32, MemCategory::kCommBuffers);
  for (int e = 0; e < held; ++e) {
    const auto& w = mp.experts[e];
    const int64_t xo = static_cast<int64_t>(e) * M * C, fo = static_cast<int64_t>(e) * M * F;
    float* dfch = keep->dfch.f32() + fo;
    cpu::matmul_backward_input(dfch, keep->dyx.f32() + xo, w.proj_w, M, F, C);  // dfch_gelu
    cpu::gelu_backward(dfch, c->fch.f32() + fo, dfch, static_cast<long>(M) * F);
    cpu::matmul_backward_input(dx.f32() + xo, dfch, w.fc_w, M, C, F);
  }
  c->fch = Tensor();  // W needs only GELU's output
  // Back to the tokens (the dispatch's backward).                    sends (ep-1)/ep·4·|D|
  const Tensor dD = comm.all_to_all(swap_leading(dx, held, ep, MemCategory::kCommBuffers));
  // The router: dlogits from the gates, the load-balancing loss (weight α per sequence of the
  // global mean: α·loss_scale·T) and the z-loss (β per token: β·loss_scale), then dln2 = dlogits @ W_routerᵀ + Σ_j dD[row(t,j)].
  keep->dlogits = activation({n / r.S, r.S, E}, DType::kF32);
  route_backward(r, dgate.data(), cfg.aux_loss_coef * ctx.loss_scale() * r.S,
                 keep->dlogits.f32(), cfg.z_loss_coef * ctx.loss_scale());
  keep->dln = activation({n / r.S, r.S, C}, DType::kF32);
  cpu::matmul_backward_input(keep->dln.f32(), keep->dlogits.f32(), mp.router, n, C, E);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      const int64_t row = r.buffer_row(t, j);
      if (row < 0) continue;
      float* d = keep->dln.f32() + static_cast<int64_t>(t) * C;
      const float* g = dD.f32() + row * C;
      for (int i = 0; i < C; ++i) d[i] += g[i];
    }
  // dres1 = dout (residual) + LN2ᵀ(dln2).
  Tensor dres1 = activation(res1.shape(), DType::kF32);
  std::memcpy(dres1.f32(), dout.f32(), dres1.nbytes());
  cpu::layernorm_backward(dres1.f32(), nullptr, nullptr, keep->dln.f32(), res1.f32(), bp.ln2_w,
                          c->ln2_mean.f32(), c->ln2_rstd.f32(), n, C);
  return dres1;
}

void moe_backward_weight(const GPTConfig& cfg, const BlockShape& s, MoeContext& ctx,
                         const Tensor& res1, const MoeCache& c, const MoeGrads& keep,
                         float* unit_grads) {
  const int C = s.C, E = cfg.experts, F = s.ffn;
  const int held = E / ctx.comm().size();
  const int n = c.routing.n, M = static_cast<int>(c.x.dim(1));
  const auto g = block_params(unit_grads, s);
  const auto mg = moe_params(unit_grads, s, E, held);
  // Router: dW (C,E) += ln2ᵀ @ dlogits.
  cpu::matmul_backward_weight(mg.router, nullptr, keep.dlogits.f32(), c.ln2.f32(), n, C, E);
  // Each held expert over its M rows (empty slots have zero gradients: they add nothing).
  for (int e = 0; e < held; ++e) {
    const auto& w = mg.experts[e];
    const int64_t xo = static_cast<int64_t>(e) * M * C, fo = static_cast<int64_t>(e) * M * F;
    cpu::matmul_backward_weight(w.proj_w, w.proj_b, keep.dyx.f32() + xo, c.fch_gelu.f32() + fo, M,
                                F, C);
    cpu::matmul_backward_weight(w.fc_w, w.fc_b, keep.dfch.f32() + fo, c.x.f32() + xo, M, C, F);
  }
  cpu::layernorm_backward_weight(g.ln2_w, g.ln2_b, keep.dln.f32(), res1.f32(), c.ln2_mean.f32(),
                                 c.ln2_rstd.f32(), n, C);
}

}  // namespace llmp
