// Bad input to the tensor-parallel region operators (mappings.h) ends the job with the operator's
// name and the values involved: a dimension not divisible by t, a wrong ndim, a tensor not f32, bf16 or f16.
// Each case runs this binary again as a 2-rank child job (common/testing/subprocess.h), from the
// 1-rank variant, with LLMP_PROBE naming the case; the child must fail and print the message.
//
// Glossary: t = 2 ranks in the child's group; status = the child job's exit status.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/testing/subprocess.h"
#include "common/tp/mappings.h"

namespace llmp::tp {
namespace {

// The probe: only in the child jobs (LLMP_PROBE set).
TEST(MappingsErrorProbe, BadInput) {
  const char* probe = std::getenv("LLMP_PROBE");
  if (!probe) GTEST_SKIP();
  auto tp = ProcessGroup::world();
  const std::string p = probe;
  if (p == "last_dim") ScatterToTpRegion::forward(Tensor::zeros({3, 5}), *tp);
  if (p == "sequence") ReduceScatterToSequenceRegion::forward(Tensor::zeros({2, 5, 4}), *tp);
  if (p == "ndim") GatherFromSequenceRegion::forward(Tensor::zeros({4, 6}), *tp);
  if (p == "dtype") CopyToTpRegion::backward(Tensor::zeros({4}, DType::kU8), *tp);
  tp->barrier();
}

struct Case {
  const char* probe;
  const char* message;
};

TEST(MappingsErrors, BadInputEndsTheJobNamingTheValues) {
  if (!testing::single_rank()) GTEST_SKIP() << "starts child jobs; runs in the np1 variant";
  const Case cases[] = {
      {"last_dim",
       "ScatterToTpRegion::forward: last dimension 5 of (3, 5) f32 cpu is not divisible by the "
       "tensor-parallel size t = 2"},
      {"sequence",
       "ReduceScatterToSequenceRegion::forward: sequence length T (dimension 1) 5 of (2, 5, 4) "
       "f32 cpu is not divisible by the tensor-parallel size t = 2"},
      {"ndim",
       "GatherFromSequenceRegion::forward: activations must be 3-D (B, T, C), got (4, 6) f32 cpu "
       "(ndim 2)"},
      {"dtype", "CopyToTpRegion::backward: tensors must be f32, bf16 or f16, got (4,) u8 cpu"},
  };
  for (const Case& c : cases) {
    auto res = testing::run_self({std::string("LLMP_PROBE=") + c.probe},
                                 {"--ranks=2", "--gtest_filter=MappingsErrorProbe.BadInput"});
    EXPECT_NE(res.status, 0) << c.probe << ":\n" << res.output;
    EXPECT_NE(res.output.find("mappings.cc:"), std::string::npos) << c.probe << ":\n" << res.output;
    EXPECT_NE(res.output.find(c.message), std::string::npos)
        << c.probe << ": want \"" << c.message << "\" in\n" << res.output;
  }
}

}  // namespace
}  // namespace llmp::tp
