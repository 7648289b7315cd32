// Tests for the option wrappers over CLI11 (options.h): each check accepts its bounds and
// members and rejects what lies outside with the one-line error and exit 2 of
// parse_flags_or_exit; --help shows the default only where asked; given() and required().
#include "common/runtime/options.h"

#include <CLI/CLI.hpp>  // App::help, to read what --help would print

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/runtime/flags.h"

namespace llmp {
namespace {

// Parses `args` (without argv[0]) with `app`; a bad value exits 2 (parse_flags_or_exit).
void parse(CLI::App& app, std::vector<std::string> args) {
  std::vector<char*> argv = {const_cast<char*>("tool")};
  for (std::string& a : args) argv.push_back(a.data());
  parse_flags_or_exit(app, static_cast<int>(argv.size()), argv.data());
}

TEST(Options, IntegerRangeAcceptsBothBounds) {
  for (const char* v : {"1", "9"}) {
    const AppPtr app = make_app("t");
    int n = 5;
    add_option(*app, "--n", n, "a count", in_range(1, 9));
    parse(*app, {"--n", v});
    EXPECT_EQ(n, std::stoi(v));
  }
}

TEST(OptionsDeathTest, IntegerRangeRejectsJustOutside) {
  for (const char* v : {"0", "10"}) {
    const AppPtr app = make_app("t");
    int n = 5;
    add_option(*app, "--n", n, "a count", in_range(1, 9));
    EXPECT_EXIT(parse(*app, {"--n", v}), testing::ExitedWithCode(2),
                std::string("^error: --n: Value ") + v + " not in range 1 to 9\n$");
  }
}

TEST(OptionsDeathTest, DoubleRangeComparesAsDoubles) {
  const AppPtr app = make_app("t");
  double x = 1;
  add_option(*app, "--x", x, "a ratio", in_range(0.5, 2.0));
  parse(*app, {"--x", "1.5"});
  EXPECT_DOUBLE_EQ(x, 1.5);
  const AppPtr bad = make_app("t");
  add_option(*bad, "--x", x, "a ratio", in_range(0.5, 2.0));
  EXPECT_EXIT(parse(*bad, {"--x", "2.5"}), testing::ExitedWithCode(2),
              "^error: --x: Value 2.5 not in range");
}

TEST(OptionsDeathTest, OneOfAcceptsMembersOnly) {
  const AppPtr app = make_app("t");
  std::string mode = "a";
  add_option(*app, "--mode", mode, "a or b", one_of({"a", "b"}));
  parse(*app, {"--mode", "b"});
  EXPECT_EQ(mode, "b");
  const AppPtr bad = make_app("t");
  add_option(*bad, "--mode", mode, "a or b", one_of({"a", "b"}));
  EXPECT_EXIT(parse(*bad, {"--mode", "c"}), testing::ExitedWithCode(2),
              "^error: --mode: c not in \\{a,b\\}\n$");
}

TEST(OptionsDeathTest, RangeAppliesToEveryElementOfAList) {
  const AppPtr app = make_app("t");
  std::vector<int> layers = {4};
  add_option(*app, "--layers", layers, "the L", in_range(1, 256));
  parse(*app, {"--layers", "4", "9", "16"});
  EXPECT_EQ(layers, (std::vector<int>{4, 9, 16}));
  const AppPtr bad = make_app("t");
  add_option(*bad, "--layers", layers, "the L", in_range(1, 256));
  EXPECT_EXIT(parse(*bad, {"--layers", "4", "300"}), testing::ExitedWithCode(2),
              "^error: --layers: Value 300 not in range 1 to 256\n$");
}

TEST(Options, HelpShowsTheDefaultOnlyWhereAsked) {
  const AppPtr app = make_app("the tool's description");
  int batch = 7;
  double off = 0;
  add_option(*app, "--batch", batch, "sequences per walk");
  add_option_no_default(*app, "--off_mb", off, "unset means off");
  const std::string help = app->help();
  EXPECT_NE(help.find("the tool's description"), std::string::npos) << help;
  EXPECT_NE(help.find("sequences per walk"), std::string::npos) << help;
  EXPECT_NE(help.find("=7"), std::string::npos) << help;     // CLI11 prints "INT=7"
  EXPECT_EQ(help.find("FLOAT=0"), std::string::npos) << help;  // no default shown
}

TEST(Options, GivenAndFlag) {
  const AppPtr app = make_app("t");
  double mb = 0;
  bool sp = false;
  const CLI::Option* mb_opt = add_option_no_default(*app, "--mb", mb, "MiB");
  add_flag(*app, "--sequence_parallel", sp, "a switch");
  EXPECT_FALSE(given(mb_opt));
  EXPECT_FALSE(given(nullptr));
  parse(*app, {"--sequence_parallel"});
  EXPECT_FALSE(given(mb_opt));  // parsed, but not on the command line
  EXPECT_TRUE(sp);
  const AppPtr again = make_app("t");
  const CLI::Option* again_opt = add_option_no_default(*again, "--mb", mb, "MiB");
  parse(*again, {"--mb", "0"});  // given, even with the unset value
  EXPECT_TRUE(given(again_opt));
}

TEST(OptionsDeathTest, RequiredOptionMissingIsOneLineExitTwo) {
  const AppPtr app = make_app("t");
  std::string load;
  required(add_option_no_default(*app, "--load", load, "checkpoint"));
  EXPECT_EXIT(parse(*app, {}), testing::ExitedWithCode(2), "^error: --load is required\n$");
}

}  // namespace
}  // namespace llmp
