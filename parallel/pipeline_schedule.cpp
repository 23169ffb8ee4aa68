// The GPipe and 1F1B schedules (see pipeline_schedule.h).
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "base/error.h"

namespace llm {

int pipeline_in_flight(PipelineSchedule schedule, int stages, int stage, int micro_batches) {
  if (schedule == PipelineSchedule::gpipe) return micro_batches;
  return std::min(stages - stage, micro_batches);
}

double pipeline_bubble_fraction(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / (micro_batches + stages - 1);
}

namespace {

// One stage's part of a step: its compute and its messages, by micro-batch.
class StageRunner {
 public:
  StageRunner(Transformer& model, UnitProvider& units, int micro_batches, int B, int T, float dloss,
              const std::function<MicroBatchTokens(int)>& tokens,
              const std::function<void(int)>& before_backward)
      : model_(model),
        units_(units),
        group_(model.split().pipeline),
        stage_(model.layout().slice.pp_rank),
        stages_(model.layout().slice.pp_size),
        slots_(model.split().in_flight),
        B_(B),
        T_(T),
        dloss_(dloss),
        tokens_(tokens),
        before_backward_(before_backward) {
    LLM_CHECK(micro_batches >= 1, "pipeline: {} micro-batches", micro_batches);
  }

  void forward(int micro) {
    MicroBatchTokens t = tokens_(micro);
    result_.loss_sum +=
        model_.stage_forward(units_, slot(micro), t.inputs, t.targets, B_, T_, dloss_);
  }
  void backward(int micro) {
    before_backward_(micro);
    result_.loss_sum += model_.stage_backward(units_, slot(micro), B_, T_);
  }

  // Messages; each is a no-op where the stage has no such neighbour.
  void recv_forward(int micro) {
    if (!first()) exchange(std::nullopt, model_.stage_input(slot(micro), B_, T_), stage_ - 1);
  }
  void send_forward(int micro) {
    if (!last()) exchange(model_.stage_output(slot(micro), B_, T_), std::nullopt, stage_ + 1);
  }
  void recv_backward() {
    if (!last()) exchange(std::nullopt, model_.stage_gradient(B_, T_), stage_ + 1);
  }
  void send_backward() {
    if (!first()) exchange(model_.stage_gradient(B_, T_), std::nullopt, stage_ - 1);
  }
  void send_forward_recv_backward(int micro) {
    if (last()) return;
    exchange(model_.stage_output(slot(micro), B_, T_), model_.stage_gradient(B_, T_), stage_ + 1);
  }
  void send_backward_recv_forward(int next_micro) {
    if (first()) return;
    exchange(model_.stage_gradient(B_, T_), model_.stage_input(slot(next_micro), B_, T_),
             stage_ - 1);
  }

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  const PipelineStepResult& result() const { return result_; }

 private:
  bool first() const { return stage_ == 0; }
  bool last() const { return stage_ == stages_ - 1; }
  int slot(int micro) const { return micro % slots_; }
  // Sends `send` to and receives `recv` from `peer` (either may be absent,
  // not both), waiting for both.
  void exchange(const std::optional<StageMessage>& send, const std::optional<StageMessage>& recv,
                int peer) {
    auto start = std::chrono::steady_clock::now();
    if (send && recv) {
      group_
          ->send_recv_async(send->data, send->count, peer, recv->data, recv->count, peer,
                            send->type)
          .wait();
    } else if (send) {
      group_->send(send->data, send->count, send->type, peer);
    } else {
      group_->recv(recv->data, recv->count, recv->type, peer);
    }
    result_.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  Transformer& model_;
  UnitProvider& units_;
  Group* group_;
  int stage_, stages_, slots_, B_, T_;
  float dloss_;
  const std::function<MicroBatchTokens(int)>& tokens_;
  const std::function<void(int)>& before_backward_;
  PipelineStepResult result_;
};

void run_gpipe(StageRunner& run, int M) {
  for (int i = 0; i < M; ++i) {
    run.recv_forward(i);
    run.forward(i);
    run.send_forward(i);
  }
  for (int i = 0; i < M; ++i) {
    run.recv_backward();
    run.backward(i);
    run.send_backward();
  }
}

// Megatron-LM's non-interleaved 1F1B order of messages.
void run_one_f_one_b(StageRunner& run, int M) {
  const int warmup = std::min(run.stages() - run.stage() - 1, M), steady = M - warmup;
  for (int i = 0; i < warmup; ++i) {
    run.recv_forward(i);
    run.forward(i);
    run.send_forward(i);
  }
  if (steady > 0) run.recv_forward(warmup);
  for (int i = 0; i < steady; ++i) {
    const int f = warmup + i;  // forward f, then backward i
    run.forward(f);
    run.send_forward_recv_backward(f);
    run.backward(i);
    if (i == steady - 1)
      run.send_backward();
    else
      run.send_backward_recv_forward(f + 1);
  }
  for (int i = steady; i < M; ++i) {
    run.recv_backward();
    run.backward(i);
    run.send_backward();
  }
}

}  // namespace

PipelineStepResult pipeline_step(PipelineSchedule schedule, Transformer& model, UnitProvider& units,
                                 int micro_batches, int B, int T, float dloss,
                                 const std::function<MicroBatchTokens(int)>& tokens,
                                 const std::function<void(int)>& before_backward) {
  const ModelSlice& slice = model.layout().slice;
  LLM_CHECK(model.split().in_flight >=
                pipeline_in_flight(schedule, slice.pp_size, slice.pp_rank, micro_batches),
            "pipeline: stage {} holds {} micro-batches' activations, the schedule needs {}",
            slice.pp_rank, model.split().in_flight,
            pipeline_in_flight(schedule, slice.pp_size, slice.pp_rank, micro_batches));
  StageRunner run(model, units, micro_batches, B, T, dloss, tokens, before_backward);
  if (schedule == PipelineSchedule::gpipe)
    run_gpipe(run, micro_batches);
  else
    run_one_f_one_b(run, micro_batches);
  return run.result();
}

}  // namespace llm
