// Progress bar and plain progress lines. See progress.h.
#include "common/runtime/progress.h"

#include <cstdlib>

#include <unistd.h>

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "common/runtime/log.h"

namespace llmp {

namespace {
// A bar redraw at most this often (seconds); the last step always draws.
constexpr double kRedrawInterval = 0.05;

std::string stats_tail(double loss, double tokens_per_s, double eta_s) {
  const double tps = std::isfinite(tokens_per_s) && tokens_per_s >= 0 ? tokens_per_s : 0.0;
  return fmt::format("loss {:.4f} | {:.0f} tok/s | eta {}", loss, tps, format_duration(eta_s));
}
}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = std::llround(seconds);
  const int64_t h = s / 3600, m = (s % 3600) / 60, sec = s % 60;
  if (h > 0) return fmt::format("{}:{:02d}:{:02d}", h, m, sec);
  return fmt::format("{}:{:02d}", m, sec);
}

std::string format_plain_line(int64_t step, int64_t total, double loss, double tokens_per_s,
                              double eta_s) {
  return fmt::format("step {}/{} | {}", step, total, stats_tail(loss, tokens_per_s, eta_s));
}

std::string format_bar_line(int64_t step, int64_t total, double loss, double tokens_per_s,
                            double eta_s, int width) {
  const double frac = total > 0 ? std::fmin(1.0, std::fmax(0.0, double(step) / double(total))) : 1.0;
  const int done = static_cast<int>(frac * width);
  const std::string bar = std::string(done, '#') + std::string(width - done, '-');
  const int digits = static_cast<int>(std::to_string(total).size());
  return fmt::format("[{}] {:>{}}/{} | {}", bar, step, digits, total,
                     stats_tail(loss, tokens_per_s, eta_s));
}

Progress::Progress(int64_t total_steps, int64_t tokens_per_step, int log_every, Mode mode,
                   std::FILE* out, int64_t first_step)
    : total_(total_steps),
      tokens_per_step_(tokens_per_step),
      first_step_(first_step),
      log_every_(log_every),
      mode_(mode),
      out_(out),
      start_(std::chrono::steady_clock::now()) {
  if (log_every < 1) throw std::invalid_argument("progress: log_every " + std::to_string(log_every) + " must be at least 1");
  if (total_steps < 0) throw std::invalid_argument("progress: total steps " + std::to_string(total_steps) + " is negative");
  if (mode_ == Mode::kAuto) {
    if (log_rank() != 0 || log_quiet()) {
      mode_ = Mode::kOff;
    } else {
      // Under mpiexec stdout is a pipe to hydra; the launcher says whether the user's is a TTY.
      const char* tty = std::getenv("LLMP_STDOUT_IS_TTY");
      const bool terminal = isatty(fileno(out_)) ||
                            (out_ == stdout && tty != nullptr && std::string(tty) == "1");
      mode_ = terminal ? Mode::kBar : Mode::kPlain;
    }
  }
}

Progress::~Progress() { finish(); }

void Progress::update(int64_t step, double loss) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  update(step, loss, elapsed);
}

void Progress::update(int64_t step, double loss, double elapsed_s) {
  if (mode_ == Mode::kOff) return;
  const int64_t done = step - first_step_;
  const double tps = elapsed_s > 0 ? double(done) * double(tokens_per_step_) / elapsed_s : 0.0;
  const double eta = done > 0 ? double(total_ - step) * elapsed_s / double(done) : NAN;
  if (mode_ == Mode::kPlain) {
    if (step % log_every_ != 0 && step != total_) return;
    std::fprintf(out_, "%s%s\n", format_plain_line(step, total_, loss, tps, eta).c_str(),
                 note_.c_str());
    std::fflush(out_);
    return;
  }
  // kBar: \r returns to the line start, ESC[K clears what a longer previous line left behind.
  if (step != total_ && last_draw_s_ >= 0 && elapsed_s - last_draw_s_ < kRedrawInterval) return;
  last_draw_s_ = elapsed_s;
  std::fprintf(out_, "\r%s%s\x1b[K", format_bar_line(step, total_, loss, tps, eta).c_str(),
               note_.c_str());
  std::fflush(out_);
  bar_open_ = true;
}

void Progress::print(const std::string& line) {
  if (mode_ == Mode::kOff) return;
  if (bar_open_) std::fputs("\r\x1b[K", out_);
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  bar_open_ = false;
  last_draw_s_ = -1;  // redraw at the next update
}

void Progress::finish() {
  if (!bar_open_) return;
  std::fputs("\n", out_);
  std::fflush(out_);
  bar_open_ = false;
}

}  // namespace llmp
