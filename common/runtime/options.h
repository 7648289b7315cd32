// Adding a program's own command-line options without compiling CLI11's header.
//
// CLI11 is header-only, and its header costs ~7 s of every translation unit's compile at -O2
// (an empty file takes well under 1 s). A stage's main.cc or a tool adds a handful of options and
// nothing else, so it calls these wrappers, and only options.cc (with flags.cc, train_main.cc and
// the planner's input.cc, which use more of the parser) compiles CLI11:
//
//   auto app = make_app("recompute: activation peaks per L");   // or a CLI::App& handed in
//   int batch = 4;
//   add_option(*app, "--batch", batch, "sequences per walk (B)", in_range(1, 4096));
//   std::string device = "cpu";
//   add_option(*app, "--device", device, "cpu or cuda", one_of({"cpu", "cuda"}));
//   parse_flags_or_exit(*app, argc, argv);                      // flags.h
//
// The parser is still CLI11 (a well-kept library beats our own): these functions only forward to
// App::add_option / add_flag with the same validators, so --help and the one-line errors read as
// before ("--batch: Value 0 not in range 1 to 4096", exit 2 through parse_flags_or_exit).
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

// Declared, not included (the header's cost, above): most of the ~150 files that include
// flags.h, which includes this, only read a TrainConfig or pass a CLI::App& along.
namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace llmp {

/// A check on an option's value when the command line is parsed: none, a closed range, or a set
/// of allowed strings. Build one with in_range or one_of.
struct OptionCheck {
  enum class Kind { none, range, member };
  Kind kind = Kind::none;
  double lo = 0, hi = 0;             ///< Kind::range: lo ≤ value ≤ hi
  bool integral = true;              ///< Kind::range: compare as integers (int64_t), else double
  std::vector<std::string> members;  ///< Kind::member: the value is one of these
};

/// lo ≤ value ≤ hi (CLI::Range), compared as integers when lo and hi are integers, as doubles
/// otherwise. A value outside ends the parse: "--x: Value 0 not in range 1 to 9".
template <typename T>
OptionCheck in_range(T lo, T hi) {
  static_assert(std::is_arithmetic_v<T>, "in_range takes numbers");
  OptionCheck c;
  c.kind = OptionCheck::Kind::range;
  c.lo = static_cast<double>(lo);
  c.hi = static_cast<double>(hi);
  c.integral = std::is_integral_v<T>;
  return c;
}

/// The value is one of `members` (CLI::IsMember), e.g. one_of({"none", "full"}).
OptionCheck one_of(std::vector<std::string> members);

/// Deletes a CLI::App made by make_app (where the type is complete).
struct AppDeleter {
  void operator()(CLI::App* app) const;
};
using AppPtr = std::unique_ptr<CLI::App, AppDeleter>;

/// A new, empty parser; `description` is the first line of --help.
AppPtr make_app(const std::string& description);

/// Adds `name` (e.g. "--batch", or "a" for a positional argument) bound to `value`, with `help`
/// and `check`; --help shows the value `value` holds now as the default. Defined for int,
/// int64_t, uint64_t, double, std::string and std::vector<int> (a list: "--layers 4 9 16"; the
/// check applies to each element); other types are a link error. `value` must
/// outlive the parse. Returns the option, for required() and given().
template <typename T>
CLI::Option* add_option(CLI::App& app, const std::string& name, T& value, const std::string& help,
                        const OptionCheck& check = {});

/// The same, without a default in --help (for options whose unset value means "off" or
/// "the preset's", where printing 0 or nan would mislead).
template <typename T>
CLI::Option* add_option_no_default(CLI::App& app, const std::string& name, T& value,
                                   const std::string& help, const OptionCheck& check = {});

/// Adds the switch `name` (no value): `value` becomes true when it is given.
CLI::Option* add_flag(CLI::App& app, const std::string& name, bool& value, const std::string& help);

/// Makes the parse fail when `option` is not given ("--load is required"). Returns `option`.
CLI::Option* required(CLI::Option* option);

/// True when `option` was given on the command line (after the parse).
bool given(const CLI::Option* option);

}  // namespace llmp
