// The progress line (base/progress.h) on a memory stream with a clock the
// test advances: plain output has no '\r' and a bounded number of lines; a
// terminal gets throttled redraws, cut to its width, and a final newline (or
// an erased line for a transient phase); a fast or disabled phase prints
// nothing. And the training step's line (trainer/step_progress.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "base/progress.h"
#include "model/layout.h"
#include "trainer/step_progress.h"

namespace llm {
namespace {

// A memory stream and a clock standing still until the test moves it.
class FakeOutput {
 public:
  FakeOutput() : file_(open_memstream(&buffer_, &size_)) {}
  ~FakeOutput() {
    std::fclose(file_);
    std::free(buffer_);
  }
  ProgressOutput output(bool terminal, int width = 0) {
    return {file_, terminal, width, [this] { return now_; }};
  }
  void advance(double seconds) { now_ += seconds; }
  std::string text() {
    std::fflush(file_);
    return std::string(buffer_, size_);
  }

 private:
  char* buffer_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
  double now_ = 1000;
};

long count(const std::string& text, char c) { return std::count(text.begin(), text.end(), c); }

// 1000 items, one every `step` seconds.
void run_phase(Progress& progress, FakeOutput& out, double step) {
  for (int i = 0; i < 1000; ++i) {
    out.advance(step);
    progress.add(1);
  }
}

ProgressOptions documents(ProgressStyle style = ProgressStyle::report, double show_after = 0) {
  ProgressOptions options;
  options.item_name = "documents";
  options.style = style;
  options.show_after = show_after;
  return options;
}

TEST(Progress, PlainOutputIsAStartAndAFinalLine) {
  FakeOutput out;
  {
    Progress progress("reading", 1000, documents(), out.output(/*terminal=*/false));
    run_phase(progress, out, 0.01);  // 10 s
  }
  const std::string text = out.text();
  EXPECT_EQ(count(text, '\r'), 0) << text;
  EXPECT_EQ(count(text, '\n'), 2) << text;
  EXPECT_EQ(text,
            "reading: started (1000 documents)\n"
            "reading: 1000 documents in 10s, 100 documents/s\n");
}

TEST(Progress, PlainOutputOfALongPhaseAddsALineAMinute) {
  FakeOutput out;
  {
    Progress progress("encoding", 1000, documents(), out.output(false));
    run_phase(progress, out, 0.25);  // 250 s
  }
  const std::string text = out.text();
  EXPECT_EQ(count(text, '\r'), 0) << text;
  const long minutes = static_cast<long>(250 / Progress::kPlainSeconds);
  EXPECT_EQ(count(text, '\n'), 2 + minutes) << text;
  EXPECT_NE(text.find("\nencoding: 24% 240/1000 documents, 4 documents/s, 1m00s, ETA 3m10s\n"),
            std::string::npos)
      << text;
}

TEST(Progress, PlainTransientAndTerminalOnlyPhases) {
  FakeOutput transient_out, terminal_only_out;
  {
    Progress transient("saving", 1000, documents(ProgressStyle::transient),
                       transient_out.output(false));
    Progress terminal_only("step", 1000, documents(ProgressStyle::terminal_only),
                           terminal_only_out.output(false));
    for (int i = 0; i < 1000; ++i) {
      transient_out.advance(0.15);  // 150 s: two minutes
      terminal_only_out.advance(0.15);
      transient.add(1);
      terminal_only.add(1);
    }
  }
  EXPECT_EQ(count(transient_out.text(), '\n'), 2) << "a line a minute, no start or final line";
  EXPECT_EQ(count(transient_out.text(), '\r'), 0);
  EXPECT_EQ(terminal_only_out.text(), "");
}

TEST(Progress, TerminalRedrawsAtMostTenTimesASecondAndEndsWithANewline) {
  FakeOutput out;
  {
    Progress progress("reading", 1000, documents(), out.output(/*terminal=*/true));
    run_phase(progress, out, 1.0 / 1024);  // 1000 updates in under a second
  }
  const std::string text = out.text();
  const long draws = count(text, '\r');
  EXPECT_GE(draws, 5) << text;
  EXPECT_LE(draws, 1 + 1 / Progress::kRedrawSeconds + 1) << "throttled: " << text;
  EXPECT_EQ(count(text, '\n'), 1);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  // The final state overwrites the running one on the same line.
  EXPECT_NE(text.find("\rreading: 1000 documents in 1s, 1.02k documents/s"), std::string::npos)
      << text;
}

TEST(Progress, TerminalLineShowsBarRateAndEta) {
  FakeOutput out;
  Progress progress("reading", 1000, documents(), out.output(true));
  EXPECT_EQ(out.text(), "\rreading    0% [....................] 0/1000 documents, 0s");
  out.advance(0.0625);
  progress.set(100);  // too soon to redraw
  out.advance(0.0625);
  progress.set(500);
  EXPECT_EQ(out.text().substr(out.text().rfind('\r')),
            "\rreading   50% [##########..........] 500/1000 documents, 4.00k documents/s, 0s, "
            "ETA 0s");
}

TEST(Progress, TerminalLinesAreCutToTheWidth) {
  FakeOutput out;
  {
    Progress progress("a label much longer than the terminal is wide", 1000, documents(),
                      out.output(true, /*width=*/30));
    run_phase(progress, out, 0.001);
  }
  std::string text = out.text();
  text.pop_back();  // the final newline
  size_t start = 0;
  while ((start = text.find('\r', start)) != std::string::npos) {
    const size_t end = std::min(text.find('\r', start + 1), text.size());
    EXPECT_LE(end - start - 1, 29u) << text.substr(start + 1, end - start - 1);
    start = end;
  }
}

TEST(Progress, TransientTerminalLineIsErased) {
  FakeOutput out;
  {
    ProgressOptions options;
    options.unit = ProgressUnit::fraction;
    options.style = ProgressStyle::terminal_only;
    Progress progress("step 3/10", 4, options, out.output(true));
    progress.set_detail("micro-batch 1/2 forward");
    out.advance(1);
    progress.set(1);
  }
  const std::string text = out.text();
  EXPECT_EQ(count(text, '\n'), 0) << text;
  EXPECT_NE(text.find("\rstep 3/10   25% [#####...............] 1s, ETA 3s | micro-batch 1/2 "
                      "forward"),
            std::string::npos)
      << text;
  // Blanked and the cursor back at the start: the next line prints over it.
  EXPECT_EQ(text.substr(text.rfind('\r', text.size() - 2)),
            "\r" + std::string(text.size() - text.rfind('\r', text.size() - 2) - 2, ' ') + "\r");
}

TEST(Progress, FastDisabledAndUnwoundPhases) {
  FakeOutput fast, disabled, unwound;
  {
    Progress progress("saving", 1000, documents(ProgressStyle::report, /*show_after=*/2),
                      fast.output(true));
    run_phase(progress, fast, 0.001);  // done in 1 s
  }
  EXPECT_EQ(fast.text(), "") << "a phase faster than show_after prints nothing";
  {
    ProgressOptions options = documents();
    options.enabled = false;
    Progress progress("rank 1", 1000, options, disabled.output(true));
    run_phase(progress, disabled, 0.01);
  }
  EXPECT_EQ(disabled.text(), "");
  try {
    Progress progress("reading", 1000, documents(), unwound.output(true));
    unwound.advance(1);
    progress.add(10);
    throw std::runtime_error("disk full");
  } catch (const std::runtime_error&) {
  }
  const std::string text = unwound.text();
  EXPECT_EQ(text.find(" in "), std::string::npos) << "no final figures: " << text;
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n') << "the error prints on a line of its own";
}

TEST(Progress, BytesAndUnknownTotals) {
  FakeOutput out;
  {
    ProgressOptions options;
    options.unit = ProgressUnit::bytes;
    Progress progress("loading", 0, options, out.output(false));
    out.advance(61);
    progress.add(3 << 20);
  }
  EXPECT_EQ(out.text(),
            "loading: started\n"
            "loading: 3.00 MiB, 50.36 KiB/s, 1m01s\n"
            "loading: 3.00 MiB in 1m01s, 50.36 KiB/s\n");
}

// A slow step on a terminal: the line moves at every unit boundary, names the
// micro-batch and pass, weighs a backward twice a forward, and is erased at
// the end; every UnitProvider call reaches the engine unchanged.
TEST(StepProgress, CountsUnitPassesAndForwardsEveryCall) {
  class RecordingUnits : public UnitProvider {
   public:
    const void* acquire_params(int unit, Pass) override {
      calls += "a" + std::to_string(unit);
      return this;
    }
    void release_params(int unit, Pass) override { calls += "r" + std::to_string(unit); }
    float* acquire_grads(int unit) override {
      calls += "g" + std::to_string(unit);
      return nullptr;
    }
    void release_grads(int unit) override { calls += "d" + std::to_string(unit); }
    uint64_t params_version() const override { return 0; }
    std::string calls;
  };
  ParameterLayout layout;  // units 0..2 held, unit 3 another stage's
  layout.units = {
      {"embed", 8, {}, 8}, {"layers.0", 8, {}, 8}, {"head", 8, {}, 8}, {"layers.1", 0, {}, 8}};
  RecordingUnits engine;
  FakeOutput out;
  {
    StepProgress progress(engine, layout, "step 1/5", /*micro_batches=*/2,
                          /*full_recompute=*/false, /*enabled=*/true, out.output(true));
    for (int micro = 0; micro < 2; ++micro) {
      progress.forward(micro);
      for (int unit : {0, 1, 2}) {
        EXPECT_EQ(progress.acquire_params(unit, Pass::forward), &engine);
        out.advance(1);
        progress.release_params(unit, Pass::forward);
      }
      progress.backward(micro);
      for (int unit : {2, 1, 0}) {
        progress.acquire_grads(unit);
        out.advance(2);
        progress.release_grads(unit);
      }
    }
  }
  EXPECT_EQ(engine.calls, "a0r0a1r1a2r2g2d2g1d1g0d0a0r0a1r1a2r2g2d2g1d1g0d0");
  const std::string text = out.text();
  // Work per micro-batch: 3 units x (1 forward + 2 backward) = 9 of 18.
  EXPECT_NE(text.find("\rstep 1/5   50% [##########..........] 9s, ETA 9s | micro-batch 1/2 "
                      "backward"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("| micro-batch 2/2 forward"), std::string::npos) << text;
  EXPECT_EQ(count(text, '\n'), 0) << "erased, not ended: " << text;
}

}  // namespace
}  // namespace llm
