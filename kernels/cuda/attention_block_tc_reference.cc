// The kernels/cpu twins' run of a tensor-core test sequence (attention_block_tc_reference.h).
#include "kernels/cuda/attention_block_tc_reference.h"

#include <limits>

namespace llmp {
namespace test {

TcReference cpu_reference(const TcCase& c) {
  const int B = c.B, H = c.H, Tl = c.Tl, hs = c.hs, A = c.A(), rows = c.rows();
  TcReference r;
  r.qkv = bf16_values(size_t(B) * Tl * 3 * A, c.seed);
  r.blk = bf16_values(size_t(B) * Tl * 2 * A, c.seed + 1);
  r.dout = bf16_values(size_t(B) * Tl * A, c.seed + 2);
  const float inf = std::numeric_limits<float>::infinity();
  Vec m(rows, -inf), l(rows, 0.0f), sc(size_t(Tl) * Tl), P(size_t(Tl) * Tl), dS(size_t(Tl) * Tl);
  r.o.assign(size_t(B) * Tl * A, 0.0f);
  r.lse.resize(rows);
  r.D.resize(rows);
  r.dq.assign(r.qkv.size(), 0.0f);
  r.dkv.assign(r.blk.size(), 0.0f);
  for (const cpu::BlockPairs& p : c.forward)
    cpu::attention_block_forward(r.o.data(), A, m.data(), l.data(), sc.data(), r.qkv.data(), 3 * A,
                                 r.blk.data(), r.blk.data() + A, 2 * A, B, H, Tl, hs, p);
  cpu::attention_block_finalize(r.o.data(), A, r.lse.data(), m.data(), l.data(), B, H, Tl, hs);
  cpu::attention_block_rowdot(r.D.data(), r.dout.data(), r.o.data(), A, B, H, Tl, hs);
  for (const cpu::BlockPairs& p : c.backward)
    cpu::attention_block_backward(r.dq.data(), r.dkv.data(), r.dkv.data() + A, 2 * A, P.data(),
                                  dS.data(), r.qkv.data(), 3 * A, r.blk.data(), r.blk.data() + A,
                                  2 * A, r.dout.data(), A, r.lse.data(), r.D.data(), B, H, Tl, hs,
                                  p);
  return r;
}

}  // namespace test
}  // namespace llmp
