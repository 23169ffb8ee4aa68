// The background job thread (see worker_thread.h).
#include "base/worker_thread.h"

#include <omp.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <utility>

namespace llm {

WorkerThread::WorkerThread(int threads, bool yielding)
    : thread_([this, threads, yielding] { run(threads, yielding); }) {}

WorkerThread::~WorkerThread() {
  {
    std::unique_lock lock(mutex_);
    work_done_.wait(lock, [&] { return finished_ == submitted_; });
    stopping_ = true;
  }
  work_ready_.notify_all();
  thread_.join();
}

uint64_t WorkerThread::submit(std::function<void()> job) {
  uint64_t number;
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
    number = ++submitted_;
  }
  work_ready_.notify_one();
  return number;
}

void WorkerThread::wait() {
  uint64_t last;
  {
    std::lock_guard lock(mutex_);
    last = submitted_;
  }
  wait_for(last);
}

void WorkerThread::wait_for(uint64_t job) {
  std::unique_lock lock(mutex_);
  work_done_.wait(lock, [&] { return finished_ >= job; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

bool WorkerThread::finished(uint64_t job) {
  std::lock_guard lock(mutex_);
  return finished_ >= job;
}

double WorkerThread::busy_seconds() {
  std::lock_guard lock(mutex_);
  return busy_seconds_;
}

void WorkerThread::run(int threads, bool yielding) {
  if (threads > 0) omp_set_num_threads(threads);
  // Linux: a thread's nice value is its own (best effort: failure is harmless).
  if (yielding) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    const bool skip = static_cast<bool>(error_);
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    std::exception_ptr error;
    if (!skip) {
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
    }
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    lock.lock();
    busy_seconds_ += took.count();
    if (error && !error_) error_ = error;
    ++finished_;
    work_done_.notify_all();
  }
}

}  // namespace llm
