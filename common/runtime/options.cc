// Options over CLI11, compiled once here (see options.h).
#include "common/runtime/options.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <utility>

namespace llmp {

OptionCheck one_of(std::vector<std::string> members) {
  OptionCheck c;
  c.kind = OptionCheck::Kind::member;
  c.members = std::move(members);
  return c;
}

void AppDeleter::operator()(CLI::App* app) const { delete app; }

AppPtr make_app(const std::string& description) { return AppPtr(new CLI::App(description)); }

namespace {

CLI::Option* with_check(CLI::Option* option, const OptionCheck& check) {
  switch (check.kind) {
    case OptionCheck::Kind::none:
      break;
    case OptionCheck::Kind::range:
      if (check.integral)  // "Value 0 not in range 1 to 9", as CLI::Range(1, 9) words it
        option->check(CLI::Range(static_cast<int64_t>(check.lo), static_cast<int64_t>(check.hi)));
      else
        option->check(CLI::Range(check.lo, check.hi));
      break;
    case OptionCheck::Kind::member:
      option->check(CLI::IsMember(check.members));
      break;
  }
  return option;
}

}  // namespace

template <typename T>
CLI::Option* add_option(CLI::App& app, const std::string& name, T& value, const std::string& help,
                        const OptionCheck& check) {
  return with_check(app.add_option(name, value, help), check)->capture_default_str();
}

template <typename T>
CLI::Option* add_option_no_default(CLI::App& app, const std::string& name, T& value,
                                   const std::string& help, const OptionCheck& check) {
  return with_check(app.add_option(name, value, help), check);
}

#define LLMP_OPTION_TYPE(T)                                                                       \
  template CLI::Option* add_option<T>(CLI::App&, const std::string&, T&, const std::string&,      \
                                      const OptionCheck&);                                        \
  template CLI::Option* add_option_no_default<T>(CLI::App&, const std::string&, T&,               \
                                                 const std::string&, const OptionCheck&);
LLMP_OPTION_TYPE(int)
LLMP_OPTION_TYPE(int64_t)
LLMP_OPTION_TYPE(uint64_t)
LLMP_OPTION_TYPE(double)
LLMP_OPTION_TYPE(std::string)
LLMP_OPTION_TYPE(std::vector<int>)
#undef LLMP_OPTION_TYPE

CLI::Option* add_flag(CLI::App& app, const std::string& name, bool& value, const std::string& help) {
  return app.add_flag(name, value, help);
}

CLI::Option* required(CLI::Option* option) { return option->required(); }

bool given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

}  // namespace llmp
