// One background thread running jobs in submission order: the host side of an
// offloaded optimizer, which works while the caller's thread drives the
// device. Jobs are numbered from 1 in submission order; wait() returns once
// every submitted job has finished, wait_for(job) once that one has, and
// both rethrow the first exception a job threw (later jobs of the batch are
// skipped).
// Invariant: jobs never run concurrently with each other, and a job's writes
// are visible to the caller after a wait that covers it, or after finished()
// said it is done (the mutex orders them).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace llm {

class WorkerThread {
 public:
  // `threads`: the OpenMP threads a job's parallel loops use (0: the
  // default). `yielding`: the thread runs at the lowest scheduling priority,
  // taking cores only when the caller's threads leave them idle (where both
  // share the cores: a preempted member of an OpenMP team stalls the whole
  // team at its next barrier).
  explicit WorkerThread(int threads = 0, bool yielding = false);
  ~WorkerThread();  // waits for the queued jobs, then joins (errors are dropped)
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // Queues `job` and returns its number.
  uint64_t submit(std::function<void()> job);
  void wait();
  // Waits for job `job` and those before it (0: none).
  void wait_for(uint64_t job);
  // Whether job `job` and those before it have finished (0: none), without waiting.
  bool finished(uint64_t job);
  // Seconds the thread has spent running jobs since construction.
  double busy_seconds();

 private:
  void run(int threads, bool yielding);

  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  std::deque<std::function<void()>> jobs_;
  uint64_t submitted_ = 0, finished_ = 0;  // job counts
  bool stopping_ = false;
  std::exception_ptr error_;
  double busy_seconds_ = 0;
  std::thread thread_;  // last: starts after the members it reads exist
};

}  // namespace llm
