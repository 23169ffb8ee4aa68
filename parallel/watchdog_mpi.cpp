// The watchdog protocol over MPI (see watchdog_mpi.h). Three messages, all
// small and fixed-size: a Question (which group), its Answer (how far this
// rank got on that group, and what it waits on now), and a Notice (rank N
// gives up). Answers to a Question are received by receives posted before it
// is sent, so the polling in serve() never takes them.
#include "parallel/watchdog_mpi.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/exit_status.h"
#include "base/stop_signal.h"
#include "collectives/watchdog.h"

namespace llm {
namespace {

constexpr int kQuestionTag = 1, kAnswerTag = 2, kNoticeTag = 3;
// How long a rank waits for answers (live ranks answer within milliseconds),
// and how long the rank that gives up first then serves the others, who ask
// their own groups and print their own line, before it aborts the job.
constexpr double kAskSeconds = 2, kFarewellSeconds = kAskSeconds + 1;

struct Question {
  char group[96];
};

struct Answer {
  int32_t has_group = 0, waiting = 0, collective = 1, peer = -1;
  int64_t collectives_entered = 0, seq = 0;
  double waited = 0;
  char op[24] = {};
  char group[96] = {};
};

struct Notice {
  int32_t rank;
};

MPI_Comm watchdog_comm = MPI_COMM_NULL;
bool giving_up = false;

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

void copy_text(char* out, size_t size, const std::string& text) {
  std::snprintf(out, size, "%s", text.c_str());
}

Answer answer_for(const char* label) {
  Answer a;
  if (const GroupTrace* trace = watchdog_find_group(label)) {
    a.has_group = 1;
    a.collectives_entered = static_cast<int64_t>(trace->collectives_entered);
  }
  const CurrentWait now = watchdog_current_wait();
  if (now.waiting) {
    a.waiting = 1;
    a.collective = now.op.collective;
    a.peer = now.op.peer;
    a.seq = static_cast<int64_t>(now.op.seq);
    a.waited = now.waited;
    copy_text(a.op, sizeof(a.op), now.op.op);
    copy_text(a.group, sizeof(a.group), now.op.group);
  }
  return a;
}

[[noreturn]] void abort_job() {
  std::fflush(stderr);
  watchdog_run_abort_hooks();  // NCCL's communicators, so the GPU is released
  MPI_Abort(MPI_COMM_WORLD, kExitRestartable);
  std::_Exit(kExitRestartable);
}

void serve();

// Serves the others for `seconds` (they may still be asking), unless the
// launcher is already ending the job: mpirun answers the abort by sending
// SIGTERM, which the training loop would only note for a graceful stop.
void serve_for(double seconds) {
  const double until = watchdog_clock() + seconds;
  while (watchdog_clock() < until) {
    if (stop_signal_received()) abort_job();
    serve();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string diagnose(const OpRecord& op, const GroupTrace& trace);

// The one line a rank prints when it gives up, or when another rank has and
// this one is waiting: what it waits on, and who never reached it.
void report(const OpRecord& op, const GroupTrace* trace, double waited, const std::string& why) {
  const std::string recorder = flight_recorder_note(
      fmt::format("watchdog: {} waited {:.1f} s{}", describe_op(op), waited, why));
  const std::string missing = trace ? diagnose(op, *trace) : "its group is gone";
  std::fprintf(stderr,
               "rank %d: error: watchdog: %s did not complete in %.1f s (parallel.timeout %g s%s); "
               "%s: %s%s\n",
               world_rank(), describe_op(op).c_str(), waited, watchdog_settings().timeout_seconds,
               why.c_str(), op.collective ? "never reached by" : "its peer", missing.c_str(),
               recorder.c_str());
  std::fflush(stderr);
}

// Another rank gave up: say what this one waits on and who never reached
// it, write the recorder, and wait to be taken down (abort after a while if
// nobody does).
[[noreturn]] void stop_for(int giver) {
  giving_up = true;
  const CurrentWait now = watchdog_current_wait();
  const std::string why = fmt::format("; rank {} gave up first", giver);
  if (now.waiting) {
    report(now.op, watchdog_find_group(now.op.group), now.waited, why);
  } else {
    const std::string recorder = flight_recorder_note(fmt::format("rank {} gave up", giver));
    std::fprintf(stderr,
                 "rank %d: error: watchdog: rank %d gave up on the job; this rank was "
                 "not waiting on a collective%s\n",
                 world_rank(), giver, recorder.c_str());
    std::fflush(stderr);
  }
  watchdog_start_abort_hooks();
  serve_for(10);
  abort_job();
}

void serve() {
  while (true) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, watchdog_comm, &flag, &status);
    if (!flag) return;
    if (status.MPI_TAG == kQuestionTag) {
      Question q;
      MPI_Recv(&q, sizeof(q), MPI_BYTE, status.MPI_SOURCE, kQuestionTag, watchdog_comm,
               MPI_STATUS_IGNORE);
      q.group[sizeof(q.group) - 1] = '\0';
      Answer a = answer_for(q.group);
      MPI_Send(&a, sizeof(a), MPI_BYTE, status.MPI_SOURCE, kAnswerTag, watchdog_comm);
    } else if (status.MPI_TAG == kNoticeTag) {
      Notice n;
      MPI_Recv(&n, sizeof(n), MPI_BYTE, status.MPI_SOURCE, kNoticeTag, watchdog_comm,
               MPI_STATUS_IGNORE);
      if (!giving_up) stop_for(n.rank);
    } else {  // a late answer to a question already given up on
      Answer late;
      MPI_Recv(&late, sizeof(late), MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, watchdog_comm,
               MPI_STATUS_IGNORE);
    }
  }
}

// How a member that did not reach `op` stands, from its answer.
std::string standing(const Answer& a, const OpRecord& op) {
  if (!a.has_group) return fmt::format("it has no group {}", op.group);
  std::string text;
  if (op.collective) text = fmt::format("at #{}", a.collectives_entered);
  if (a.waiting) {
    text += fmt::format("{}waiting {:.1f} s in {} #{} on group {}", text.empty() ? "" : ", ",
                        a.waited, a.op, a.seq, a.group);
    if (!a.collective) text += fmt::format(" with rank {}", a.peer);
  } else {
    text += fmt::format("{}not waiting on a collective or a message", text.empty() ? "" : ", ");
  }
  return text;
}

// Asks `op`'s members (a message's peer) where they stand, and every other
// rank whether it answers at all; returns the members that never reached
// `op`, each with its standing, then the other ranks that did not answer (a
// lost host's ranks are named even when this rank waits on none of them).
std::string diagnose(const OpRecord& op, const GroupTrace& trace) {
  const int me = world_rank();
  int world_size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  std::vector<int> asked;  // the members first, then the others
  if (op.collective) {
    for (int rank : trace.world_ranks) {
      if (rank != me) asked.push_back(rank);
    }
  } else {
    asked.push_back(op.peer);
  }
  const size_t members = asked.size();
  for (int rank = 0; rank < world_size; ++rank) {
    if (rank != me && std::find(asked.begin(), asked.end(), rank) == asked.end()) {
      asked.push_back(rank);
    }
  }
  std::vector<Answer> answers(asked.size());
  std::vector<MPI_Request> receives(asked.size());
  Question q;
  copy_text(q.group, sizeof(q.group), op.group);
  for (size_t i = 0; i < asked.size(); ++i) {
    MPI_Irecv(&answers[i], sizeof(Answer), MPI_BYTE, asked[i], kAnswerTag, watchdog_comm,
              &receives[i]);
    MPI_Request sent;
    MPI_Isend(&q, sizeof(q), MPI_BYTE, asked[i], kQuestionTag, watchdog_comm, &sent);
    MPI_Request_free(&sent);
  }
  std::vector<int> answered(asked.size(), 0);
  const double until = watchdog_clock() + kAskSeconds;
  size_t count = 0;
  while (count < asked.size() && watchdog_clock() < until) {
    for (size_t i = 0; i < asked.size(); ++i) {
      if (!answered[i]) {
        MPI_Test(&receives[i], &answered[i], MPI_STATUS_IGNORE);
        if (answered[i]) ++count;
      }
    }
    serve();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string missing, silent;
  for (size_t i = 0; i < asked.size(); ++i) {
    if (i >= members) {
      if (!answered[i]) silent += fmt::format("{}{}", silent.empty() ? "" : ", ", asked[i]);
      continue;
    }
    std::string entry;
    if (!answered[i]) {
      entry = fmt::format(
          "rank {} (no answer: stopped, hung outside a collective, or its host "
          "is lost)",
          asked[i]);
    } else if (!op.collective || !answers[i].has_group ||
               answers[i].collectives_entered < static_cast<int64_t>(op.seq)) {
      entry = fmt::format("rank {} ({})", asked[i], standing(answers[i], op));
    }
    if (!entry.empty()) missing += (missing.empty() ? "" : "; ") + entry;
  }
  if (missing.empty()) missing = "none: every member reached it, and it did not complete";
  if (!silent.empty()) missing += "; other ranks not answering: " + silent;
  return missing;
}

[[noreturn]] void expire(const OpRecord& op, const GroupTrace& trace, double waited) {
  giving_up = true;
  report(op, &trace, waited, "");
  const int me = world_rank();
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Notice notice{me};
  for (int rank = 0; rank < size; ++rank) {
    if (rank == me) continue;
    MPI_Request sent;
    MPI_Isend(&notice, sizeof(notice), MPI_BYTE, rank, kNoticeTag, watchdog_comm, &sent);
    MPI_Request_free(&sent);
  }
  // NCCL's communicators are aborted while the farewell runs: the job's end
  // then waits on the longer of the two, not on both.
  watchdog_start_abort_hooks();
  serve_for(kFarewellSeconds);
  abort_job();
}

}  // namespace

void watchdog_mpi_install() {
  MPI_Comm_dup(MPI_COMM_WORLD, &watchdog_comm);
  watchdog_set_world_rank(world_rank());
  watchdog_set_handlers({serve, expire});
}

}  // namespace llm
