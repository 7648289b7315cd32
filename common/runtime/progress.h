// Training progress: a bar redrawn in place on a terminal, plain lines in a log file.
//
// On a TTY (isatty on the stream it writes to):
//   [########------------]  80/200 | loss 2.3456 | 12345 tok/s | eta 0:12      (redrawn with \r)
// Otherwise (a pipe, a file, mpirun's forwarded output), one line every log_every steps and at
// the last step:
//   step 80/200 | loss 2.3456 | 12345 tok/s | eta 0:12
// Only rank 0 prints, and nothing prints under --quiet (log.h's set_log_quiet).
//
// tok/s counts the tokens of the global batch (B·T per step, all ranks together), so the number
// is comparable across world sizes. ETA assumes the remaining steps run at the average speed of
// the steps so far.
//
// Glossary: B global batch, T sequence length, step = optimizer steps finished (1-based).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace llmp {

/// Seconds as "m:ss" below one hour and "h:mm:ss" from one hour on, rounded to the nearest
/// second: 12.4 -> "0:12", 754 -> "12:34", 3723 -> "1:02:03". Negative, NaN or infinite -> "?".
std::string format_duration(double seconds);

/// "step 10/200 | loss 4.1234 | 12345 tok/s | eta 0:12" (loss 4 decimals, tok/s rounded).
std::string format_plain_line(int64_t step, int64_t total, double loss, double tokens_per_s,
                              double eta_s);

/// "[#####---------------]  10/200 | loss 4.1234 | 12345 tok/s | eta 0:12": a bar of `width`
/// cells ('#' done, '-' to go) with the step right-aligned to the width of `total`.
std::string format_bar_line(int64_t step, int64_t total, double loss, double tokens_per_s,
                            double eta_s, int width = 20);

class Progress {
 public:
  /// kAuto: off on ranks other than 0 and when log_quiet(); else kBar if `out` is a TTY, else
  /// kPlain.
  enum class Mode { kAuto, kBar, kPlain, kOff };

  /// total_steps: the last step number; tokens_per_step: B·T of the global batch; log_every:
  /// steps between plain lines (≥ 1); first_step: the step the run starts after (a resumed run
  /// counts its speed from there). The clock starts now. Throws std::invalid_argument when
  /// log_every < 1 or total_steps < 0.
  Progress(int64_t total_steps, int64_t tokens_per_step, int log_every, Mode mode = Mode::kAuto,
           std::FILE* out = stdout, int64_t first_step = 0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// Step `step` (1-based) has finished with this loss: redraws the bar, or prints a plain line
  /// when step % log_every == 0 or step == total.
  void update(int64_t step, double loss);
  /// The same with the elapsed seconds since the start given explicitly (tests, replay).
  void update(int64_t step, double loss, double elapsed_s);

  /// Text appended to the following lines (" | loss scale 32768 | skipped 1": the fp16 loss
  /// scaler's state); "" for none.
  void set_note(std::string note) { note_ = std::move(note); }

  /// Prints one full line (e.g. "val loss 2.1") without tearing the bar: clears the bar, prints,
  /// and the next update redraws it. Does nothing when the mode is off.
  void print(const std::string& line);

  /// Ends the bar's line (a newline after the last redraw). Idempotent; the destructor calls it.
  void finish();

  Mode mode() const { return mode_; }

 private:
  int64_t total_, tokens_per_step_, first_step_;
  int log_every_;
  Mode mode_;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_;
  double last_draw_s_ = -1;  // elapsed time of the last bar redraw (throttling)
  bool bar_open_ = false;    // a bar line is on screen without its newline
  std::string note_;         // set_note
};

}  // namespace llmp
