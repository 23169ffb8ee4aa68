// Progress lines: the terminal's redrawn line and the plain lines of a pipe
// (see progress.h).
#include "base/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/system.h"

namespace llm {
namespace {

constexpr int kBarWidth = 20;

// The longest prefix of `text` of at most `width` bytes that does not cut a
// UTF-8 character.
std::string cut_to_width(std::string text, size_t width) {
  if (text.size() <= width) return text;
  size_t end = width;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  text.resize(end);
  return text;
}

// Whether stdout is the user's terminal (see progress_stdout).
bool stdout_is_terminal() {
  if (const char* forced = std::getenv("LLM_PROGRESS")) {
    const std::string mode = forced;
    LLM_CHECK(mode == "terminal" || mode == "plain",
              "LLM_PROGRESS={}: expected terminal (redrawn lines) or plain (lines for a log)",
              mode);
    return mode == "terminal";
  }
  // Open MPI, MPICH (Hydra) and PMIx launchers.
  for (const char* launcher : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(launcher)) return false;
  }
  return ::isatty(::fileno(stdout)) == 1;
}

}  // namespace

ProgressOutput progress_stdout() {
  // Decided once per process (a training step asks at every step): whether
  // stdout is a terminal, and its width then.
  static const ProgressOutput output = [] {
    const bool terminal = stdout_is_terminal();
    winsize size{};
    const int width =
        terminal && ::ioctl(::fileno(stdout), TIOCGWINSZ, &size) == 0 ? size.ws_col : 0;
    auto now = [] {
      using std::chrono::steady_clock;
      return std::chrono::duration<double>(steady_clock::now().time_since_epoch()).count();
    };
    return ProgressOutput{stdout, terminal, width, now};
  }();
  return output;
}

Progress::Progress(std::string label, uint64_t total, ProgressOptions options,
                   ProgressOutput output)
    : label_(std::move(label)),
      total_(total),
      options_(std::move(options)),
      out_(std::move(output)),
      start_(out_.now()),
      unwinding_at_start_(std::uncaught_exceptions()) {
  set(0);
}

Progress::~Progress() {
  try {
    if (std::uncaught_exceptions() > unwinding_at_start_) {
      end_unwinding();
    } else {
      finish();
    }
  } catch (...) {  // a destructor reports nothing more
  }
}

double Progress::elapsed() const { return out_.now() - start_; }

void Progress::set(uint64_t done) {
  done_ = done;
  if (!options_.enabled || finished_) return;
  const double t = elapsed();
  if (t < options_.show_after) return;
  if (out_.terminal) {
    if (last_draw_ < 0 || t - last_draw_ >= kRedrawSeconds) draw(line(/*final=*/false));
    return;
  }
  if (options_.style == ProgressStyle::terminal_only) return;
  if (!shown_ && options_.style == ProgressStyle::report) {
    print_plain(label_ + ": started" + (total_ > 0 ? " (" + amount(total_) + ")" : ""));
  } else if (t >= next_plain_) {
    print_plain(line(/*final=*/false));
  }
  next_plain_ = std::max(next_plain_, (std::floor(t / kPlainSeconds) + 1) * kPlainSeconds);
}

void Progress::set_detail(std::string detail, bool now) {
  detail_ = std::move(detail);
  if (now && options_.enabled && !finished_ && out_.terminal && shown_) draw(line(/*final=*/false));
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (!options_.enabled) return;
  const bool report = options_.style == ProgressStyle::report;
  const bool slow = elapsed() >= options_.show_after;
  if (out_.terminal) {
    if (report && slow) {
      draw(line(/*final=*/true));
      std::fputc('\n', out_.file);
      std::fflush(out_.file);
    } else if (shown_) {
      erase();
    }
  } else if (report && slow) {
    print_plain(line(/*final=*/true));
  }
}

std::string Progress::amount(uint64_t n) const {
  switch (options_.unit) {
    case ProgressUnit::count:
      return options_.item_name.empty() ? std::to_string(n)
                                        : fmt::format("{} {}", n, options_.item_name);
    case ProgressUnit::bytes:
      return format_bytes(static_cast<double>(n));
    case ProgressUnit::fraction:
      break;
  }
  return "";
}

std::string Progress::line(bool final) const {
  const double t = elapsed();
  const bool figures = options_.unit != ProgressUnit::fraction;
  const double rate = t > 0 ? static_cast<double>(done_) / t : 0;
  std::string rate_text;
  if (options_.unit == ProgressUnit::count) {
    const std::string& name = options_.item_name;
    rate_text = format_si(rate, "") + (name.empty() ? "" : " " + name) + "/s";
  } else if (options_.unit == ProgressUnit::bytes) {
    rate_text = format_bytes(rate) + "/s";
  }
  std::string text = label_;
  if (final) {
    text += ": " + (figures ? amount(done_) : std::string("done")) + " in " + format_duration(t);
    if (figures && t > 0) text += ", " + rate_text;
  } else {
    // The terminal's percentage keeps its width from one redraw to the next.
    text += out_.terminal ? "  " : ": ";
    std::vector<std::string> parts;
    if (total_ > 0) {
      const double share = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
      text += out_.terminal ? fmt::format("{:3.0f}% ", 100 * share)
                            : fmt::format("{:.0f}% ", 100 * share);
      if (out_.terminal) {
        const int filled = static_cast<int>(share * kBarWidth);
        text +=
            fmt::format("[{}{}] ", std::string(filled, '#'), std::string(kBarWidth - filled, '.'));
      }
      if (options_.unit == ProgressUnit::bytes) {
        parts.push_back(format_bytes(static_cast<double>(done_)) + "/" + amount(total_));
      } else if (figures) {
        parts.push_back(fmt::format("{}/{}", done_, amount(total_)));
      }
    } else if (figures) {
      parts.push_back(amount(done_));
    }
    if (figures && done_ > 0) parts.push_back(rate_text);
    parts.push_back(format_duration(t));
    if (total_ > 0 && done_ > 0 && done_ < total_) {
      parts.push_back("ETA " + format_duration(t * static_cast<double>(total_ - done_) / done_));
    }
    for (size_t i = 0; i < parts.size(); ++i) text += (i > 0 ? ", " : "") + parts[i];
  }
  if (!detail_.empty()) text += " | " + detail_;
  return text;
}

void Progress::draw(const std::string& text) {
  const std::string cut = out_.width > 1 ? cut_to_width(text, out_.width - 1) : text;
  // Spaces cover what a longer previous line left.
  const size_t pad = drawn_width_ > cut.size() ? drawn_width_ - cut.size() : 0;
  fmt::print(out_.file, "\r{}{}", cut, std::string(pad, ' '));
  std::fflush(out_.file);
  drawn_width_ = cut.size();
  last_draw_ = elapsed();
  shown_ = true;
}

void Progress::print_plain(const std::string& text) {
  fmt::print(out_.file, "{}\n", text);
  std::fflush(out_.file);
  shown_ = true;
}

void Progress::erase() {
  fmt::print(out_.file, "\r{}\r", std::string(drawn_width_, ' '));
  std::fflush(out_.file);
  drawn_width_ = 0;
}

void Progress::end_unwinding() {
  finished_ = true;
  if (!options_.enabled || !out_.terminal || !shown_) return;
  // The error follows on its own line; a report keeps its last state above it.
  if (options_.style == ProgressStyle::report) {
    std::fputc('\n', out_.file);
    std::fflush(out_.file);
  } else {
    erase();
  }
}

}  // namespace llm
