// Progress of a long phase (reading a corpus, encoding shards, saving or
// loading a checkpoint, a benchmark row, a slow training step), on stdout.
// On a terminal: one line redrawn in place with '\r' (phase, done/total, rate,
// elapsed and ETA), at most 10 times a second, cut to the terminal's width.
// Elsewhere (a pipe, a log file, a rank under mpirun): plain lines only, never
// a '\r' — a start and a final line, and one a minute while a long phase runs.
// Invariants: a disabled progress (ranks other than 0, --quiet) prints
// nothing; nothing is printed before `show_after` seconds have passed, so a
// fast phase stays silent; a line drawn on a terminal is always ended (with a
// newline, or erased) before the object is gone, also when an exception
// unwinds past it. Not thread-safe: one thread reports.
// Why our own: spdlog (the logs) draws no progress line, and indicators (the
// usual C++ library for one) is not packaged in Debian; this is the part of it
// we need, plus the plain mode a log file needs.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace llm {

// Where progress goes and what that is: tests substitute a memory stream,
// a terminal or not, and a clock they advance.
struct ProgressOutput {
  std::FILE* file;
  bool terminal;                // redraw one line in place
  int width;                    // the terminal's columns (0: unknown, lines are not cut)
  std::function<double()> now;  // seconds, monotonic
};
// stdout, the steady clock, and whether stdout is a terminal: isatty(stdout),
// except under an MPI launcher (mpirun hands each rank a pty of its own even
// when its own output goes to a file, so a rank cannot tell), where it is not;
// LLM_PROGRESS=terminal or =plain decides instead (any other value is an
// error naming it). Decided at the first call, for the whole process.
ProgressOutput progress_stdout();

enum class ProgressUnit {
  count,     // done/total items, a rate in items/s
  bytes,     // done/total bytes, a rate in bytes/s
  fraction,  // a share of weighted work: the percentage only (the detail says where it is)
};

enum class ProgressStyle {
  // The phase's own result: on a terminal the line stays, ended by a newline;
  // plain output has a start line, a line a minute and a final line.
  report,
  // A wait whose caller prints its own result line: on a terminal the line is
  // erased at the end; plain output has only a line a minute.
  transient,
  // Transient on a terminal, nothing at all in plain output (a slow step's
  // micro-batches: a line a minute per step would flood a log file).
  terminal_only,
};

struct ProgressOptions {
  bool enabled = true;
  ProgressUnit unit = ProgressUnit::count;
  std::string item_name;  // "documents" (count unit)
  ProgressStyle style = ProgressStyle::report;
  double show_after = 0;  // seconds before the first line
};

class Progress {
 public:
  static constexpr double kRedrawSeconds = 0.1;  // at most 10 terminal redraws a second
  static constexpr double kPlainSeconds = 60;    // a plain line a minute during a long phase

  // `total` 0: unknown (no percentage, no ETA).
  Progress(std::string label, uint64_t total, ProgressOptions options = {},
           ProgressOutput output = progress_stdout());
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void add(uint64_t n) { set(done_ + n); }
  void set(uint64_t done);
  // Text after the figures ("micro-batch 3/8 backward"), shown from the next
  // draw on; `now`: redrawn at once on a terminal, throttle or not (a stage
  // that blocks without updates follows, such as an fsync).
  void set_detail(std::string detail, bool now = false);
  // Ends the line (see ProgressStyle); later calls do nothing.
  void finish();

 private:
  double elapsed() const;
  // "450 documents", "1.20 GiB" ("" for a fraction).
  std::string amount(uint64_t n) const;
  // The label, then "45% [####....] 450/1000 documents, 120 documents/s, 4s,
  // ETA 5s" (the bar on a terminal only; what is unknown left out), or
  // `final`: "1000 documents in 8s, 120 documents/s"; then the detail.
  std::string line(bool final) const;
  void draw(const std::string& text);
  void print_plain(const std::string& text);
  void erase();
  // The destructor's ending while an exception propagates: no final figures.
  void end_unwinding();

  std::string label_;
  uint64_t total_, done_ = 0;
  ProgressOptions options_;
  ProgressOutput out_;
  std::string detail_;
  double start_;
  double last_draw_ = -1;              // elapsed seconds at the last terminal draw
  double next_plain_ = kPlainSeconds;  // elapsed seconds of the next plain line
  size_t drawn_width_ = 0;             // characters of the line now on the terminal
  bool shown_ = false, finished_ = false;
  int unwinding_at_start_;  // std::uncaught_exceptions() at construction
};

}  // namespace llm
