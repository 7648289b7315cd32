// cu_to_cc IN.cu OUT.cc [HEADER...]: a .cu file as C++ for the CUDA emulator. The one thing g++
// cannot parse in the project's CUDA sources is the launch, so every
//     kernel<template args><<<grid, block, smem, stream>>>(args)
// becomes
//     ::llmp::cuda::emu::launcher([&](auto&&... a) { kernel<template args>(a...); },
//                                 grid, block, smem, stream).named("kernel")(args)
// (a call, so that template arguments a launch deduces from its arguments are deduced here too)
// and nothing else changes (a #line keeps errors and sanitizer reports on the .cu's own lines).
// The kernel expression is found by scanning back from "<<<" over white space, one balanced
// <...> and the identifier (with ::) before it. A HEADER that launches kernels itself
// (column_sums.h) is inlined where IN includes it ("#include \"HEADER\"", HEADER as given) and
// rewritten with it.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

std::string read(const char* path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cu_to_cc: cannot read %s\n", path);
    std::exit(1);
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

bool ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }

/// The start of the kernel expression that ends just before `end` (exclusive), or npos.
size_t kernel_start(const std::string& s, size_t end) {
  size_t i = end;
  while (i > 0 && std::isspace(static_cast<unsigned char>(s[i - 1]))) --i;
  if (i > 0 && s[i - 1] == '>') {  // template arguments: back to the matching '<'
    int depth = 0;
    while (i > 0) {
      const char c = s[--i];
      if (c == '>') ++depth;
      if (c == '<' && --depth == 0) break;
    }
    if (depth != 0) return std::string::npos;
  }
  const size_t name_end = i;
  while (i > 0 && ident(s[i - 1])) --i;
  return i < name_end ? i : std::string::npos;
}

/// The kernel's name for the call counts (api_counts.h): its identifier, without namespace or
/// template arguments ("ns::k<F, true>" -> "k").
std::string name_of(const std::string& kernel) {
  std::string id = kernel.substr(0, kernel.find('<'));
  while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back()))) id.pop_back();
  const size_t colon = id.rfind(':');
  return colon == std::string::npos ? id : id.substr(colon + 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: cu_to_cc IN.cu OUT.cc [HEADER...]\n");
    return 2;
  }
  std::string s = read(argv[1]);
  for (int h = 3; h < argc; ++h) {  // inline each launching header where it is included
    const std::string include = std::string("#include \"") + argv[h] + "\"";
    const size_t at = s.find(include);
    if (at == std::string::npos) continue;
    const int line = 1 + static_cast<int>(std::count(s.begin(), s.begin() + at, '\n'));
    // Its "#pragma once" becomes an empty line (the line numbers stay): in the .cu's own text
    // it would be a "#pragma once in main file" warning.
    std::string header = read(argv[h]);
    const std::string once = "#pragma once";
    if (const size_t p = header.find(once); p != std::string::npos) header.erase(p, once.size());
    s.replace(at, include.size(),
              std::string("#line 1 \"") + argv[h] + "\"\n" + header + "\n#line " +
                  std::to_string(line + 1) + " \"" + argv[1] + "\"");
  }
  for (size_t open = s.find("<<<"); open != std::string::npos; open = s.find("<<<", open)) {
    const size_t close = s.find(">>>", open);
    const size_t start = kernel_start(s, open);
    if (close == std::string::npos || start == std::string::npos) {
      std::fprintf(stderr, "cu_to_cc: %s: a <<< without its kernel or >>> at byte %zu\n", argv[1],
                   open);
      return 1;
    }
    const std::string kernel = s.substr(start, open - start);
    const std::string config = s.substr(open + 3, close - open - 3);
    const std::string call = "::llmp::cuda::emu::launcher([&](auto&&... llmp_emu_a) { " + kernel +
                             "(llmp_emu_a...); }, " + config + ").named(\"" + name_of(kernel) +
                             "\")";
    s.replace(start, close + 3 - start, call);
    open = start + call.size();
  }
  std::ofstream out(argv[2]);
  out << "#line 1 \"" << argv[1] << "\"\n" << s;
  if (!out) {
    std::fprintf(stderr, "cu_to_cc: cannot write %s\n", argv[2]);
    return 1;
  }
  return 0;
}
