#include "tools/zero_memory_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace llmp {

const std::vector<int>& paper_ranks() {
  static const std::vector<int> r = {1, 4, 16, 64, 256, 1024};
  return r;
}

std::string zero_memory_arg_error(double psi, int ranks, double K) {
  char buf[160];
  if (!std::isfinite(psi) || psi <= 0) {
    std::snprintf(buf, sizeof buf, "--params must be a positive number of parameters, got %g", psi);
    return buf;
  }
  if (ranks < 1) return "--ranks must be >= 1, got " + std::to_string(ranks);
  if (!std::isfinite(K) || K < 0) {
    std::snprintf(buf, sizeof buf, "--k must be >= 0 bytes per parameter, got %g", K);
    return buf;
  }
  return "";
}

ZeroMemoryTable zero_memory_table(double psi, int highlight, Precision prec) {
  ZeroMemoryTable t;
  t.psi = psi;
  t.prec = prec;
  t.highlight = highlight;
  t.ranks = paper_ranks();
  if (std::find(t.ranks.begin(), t.ranks.end(), highlight) == t.ranks.end()) {
    t.ranks.push_back(highlight);
    std::sort(t.ranks.begin(), t.ranks.end());
  }
  const std::string p = format_3sig(prec.param_bytes), g = format_3sig(prec.grad_bytes);
  const std::string pg = format_3sig(prec.param_bytes + prec.grad_bytes);
  t.rows = {
      {DPStage::kBaseline, "baseline", "(" + p + "+" + g + "+K)Ψ", {}},
      {DPStage::kZeRO1, "P_os     (ZeRO-1)", pg + "Ψ + KΨ/N_d", {}},
      {DPStage::kZeRO2, "P_os+g   (ZeRO-2)", p + "Ψ + (" + g + "+K)Ψ/N_d", {}},
      {DPStage::kZeRO3, "P_os+g+p (ZeRO-3)", "(" + p + "+" + g + "+K)Ψ/N_d", {}},
  };
  for (ZeroMemoryRow& row : t.rows)
    for (int n : t.ranks)  // the paper's figures: unpadded Ψ/N_d, GB = 1e9 bytes
      row.gb.push_back(plan_memory(row.stage, psi, n, prec, /*padded=*/false).total() / 1e9);
  return t;
}

std::string format_3sig(double x) {
  if (x == 0 || !std::isfinite(x)) return x == 0 ? "0" : std::to_string(x);
  // Digits after the point for three significant ones; never fewer than 0 (12345 stays 12345).
  int decimals = std::max(0, 2 - static_cast<int>(std::floor(std::log10(std::fabs(x)))));
  double r = std::round(x * std::pow(10.0, decimals)) / std::pow(10.0, decimals);
  if (decimals > 0 && std::fabs(r) >= std::pow(10.0, 3 - decimals)) --decimals;  // 99.96 -> 100
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", std::max(decimals, 0), r);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

namespace {
// Pads to `w` display columns (Ψ is two bytes in UTF-8 but one column on screen).
std::string pad(const std::string& s, size_t w) {
  size_t cols = 0;
  for (unsigned char c : s) cols += (c & 0xC0) != 0x80;  // count code points, not bytes
  return s + std::string(w > cols ? w - cols : 0, ' ');
}
}  // namespace

std::string render(const ZeroMemoryTable& t) {
  std::ostringstream o;
  const bool mixed = t.prec.param_bytes == 2 && t.prec.grad_bytes == 2;
  o << "Per-device model-state memory (ZeRO, Rajbhandari et al. 2020, Table 1)\n"
    << "Ψ = " << format_3sig(t.psi / 1e9) << "B parameters, K = " << format_3sig(t.prec.K)
    << " (" << (mixed ? "mixed precision: 16-bit params and grads" : "fp32 params and grads")
    << "), GB = 1e9 bytes\n\n";
  const size_t hi = std::find(t.ranks.begin(), t.ranks.end(), t.highlight) - t.ranks.begin();
  o << "N_d = " << t.highlight << ":\n";
  for (const ZeroMemoryRow& r : t.rows)
    o << "  " << pad(r.name, 19) << pad(r.formula, 22) << format_3sig(r.gb[hi]) << " GB\n";
  o << "\nGB per device by N_d (* = --ranks):\n  " << pad("", 19);
  for (int n : t.ranks) {
    std::string h = (n == t.highlight ? "*" : "") + std::to_string(n);
    o << std::string(h.size() < 8 ? 8 - h.size() : 1, ' ') << h;
  }
  o << "\n";
  for (const ZeroMemoryRow& r : t.rows) {
    o << "  " << pad(r.name, 19);
    for (double gb : r.gb) {
      const std::string v = format_3sig(gb);
      o << std::string(v.size() < 8 ? 8 - v.size() : 1, ' ') << v;
    }
    o << "\n";
  }
  return o.str();
}

}  // namespace llmp
