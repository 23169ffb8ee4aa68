// The watchdog's bookkeeping: the group registry, the ring of records, the
// polled wait and the JSON dump. Only the main thread issues and waits on
// operations; the SIGQUIT handler only sets a flag, served in the next wait.
#include "collectives/watchdog.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <csignal>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "base/file_io.h"
#include "base/system.h"

namespace llm {
namespace {

namespace fs = std::filesystem;

const auto kProcessStart = std::chrono::steady_clock::now();
const auto kProcessStartWall = std::chrono::system_clock::now();

struct TrackedOp {
  GroupTrace* trace;
  OpRecord op;
  std::function<bool()> complete;
};

struct State {
  WatchdogSettings settings;
  int world_rank = 0;
  std::vector<GroupTrace*> groups;
  std::vector<OpRecord> ring = std::vector<OpRecord>(settings.recorder_entries);
  uint64_t issued = 0;
  WatchdogHandlers handlers;
  CurrentWait current;  // a collective or a message waited on
  double total_wait = 0;
  std::deque<TrackedOp> tracked;  // in issue order: the front is the oldest
  double next_tracked_check = 0;
  // A host wait on device work: its operation (group "device") and start.
  bool in_device_wait = false;
  OpRecord device_work;
  GroupTrace device_trace{"device", {}, 0, 0, 0, "device"};
  std::vector<std::pair<const void*, std::function<void()>>> abort_hooks;
};

State& state() {
  static State s;
  return s;
}

std::atomic<bool> dump_requested{false};

void on_dump_signal(int) { dump_requested = true; }

void serve_dump_request() {
  if (!dump_requested.exchange(false)) return;
  const std::string path = flight_recorder_dump("requested by SIGQUIT");
  if (!path.empty()) {
    fmt::print(stderr, "rank {}: flight recorder written to {}\n", state().world_rank, path);
  }
}

}  // namespace

void watchdog_configure(const WatchdogSettings& settings) {
  State& s = state();
  s.settings = settings;
  s.ring.assign(std::max<size_t>(settings.recorder_entries, 1), OpRecord{});
  s.issued = 0;
  std::signal(kDumpSignal, on_dump_signal);
}

void watchdog_set_dump_dir(const std::string& dir) { state().settings.dump_dir = dir; }
void watchdog_set_world_rank(int world_rank) { state().world_rank = world_rank; }
const WatchdogSettings& watchdog_settings() { return state().settings; }

double watchdog_clock() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - kProcessStart).count();
}

void watchdog_register(GroupTrace* trace) { state().groups.push_back(trace); }
const std::vector<GroupTrace*>& watchdog_groups() { return state().groups; }
void watchdog_unregister(GroupTrace* trace) {
  State& s = state();
  std::erase(s.groups, trace);
  std::erase_if(s.tracked, [trace](const TrackedOp& t) { return t.trace == trace; });
}

const GroupTrace* watchdog_find_group(std::string_view label) {
  for (const GroupTrace* trace : state().groups) {
    if (trace->label == label) return trace;
  }
  return nullptr;
}

WatchdogHandlers watchdog_set_handlers(WatchdogHandlers handlers) {
  return std::exchange(state().handlers, std::move(handlers));
}

CurrentWait watchdog_current_wait() {
  const State& s = state();
  CurrentWait wait = s.current;
  if (!wait.waiting && s.in_device_wait) {
    // The device's work waits on its oldest tracked operation, if any.
    wait = {true, s.tracked.empty() ? s.device_work : s.tracked.front().op, 0};
  }
  if (wait.waiting) wait.waited = watchdog_clock() - wait.op.started;
  return wait;
}

uint64_t fnv1a(uint64_t hash, std::string_view bytes) {
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

namespace {

// splitmix64's finalizer: every input bit reaches every output bit.
uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t collective_fingerprint(uint64_t previous, const CollectiveSignature& signature) {
  uint64_t h = fnv1a(kFnv1aOffset ^ previous, signature.op);
  h = fnv1a(h, signature.dtype);
  return mix(h ^ mix(signature.bytes + 0x9e3779b97f4a7c15ull));
}

const OpRecord& watchdog_issue(GroupTrace& trace, const char* op, uint64_t bytes, const char* dtype,
                               int peer) {
  State& s = state();
  OpRecord& record = s.ring[s.issued % s.ring.size()];
  record = OpRecord{};
  record.ticket = ++s.issued;
  record.op = op;
  record.group = trace.label;
  record.collective = peer < 0;
  record.seq = record.collective ? ++trace.collectives_entered : ++trace.messages_entered;
  if (peer >= 0 && static_cast<size_t>(peer) < trace.world_ranks.size()) {
    record.peer = trace.world_ranks[static_cast<size_t>(peer)];
  }
  record.bytes = bytes;
  record.dtype = dtype;
  record.stream = trace.transport;
  record.enqueued = record.started = watchdog_clock();
  if (record.collective) {
    const CollectiveSignature signature{op, bytes, dtype, record.seq};
    trace.fingerprint = collective_fingerprint(trace.fingerprint, signature);
    if (trace.unchecked.size() < GroupTrace::kMaxUncheckedCollectives)
      trace.unchecked.push_back(signature);
  }
  return record;
}

namespace {

// Marks `op` of `trace` as completed: its record's end time, and the group's
// completed count.
void mark_completed(GroupTrace& trace, const OpRecord& op) {
  State& s = state();
  OpRecord& slot = s.ring[(op.ticket - 1) % s.ring.size()];
  if (op.ticket != 0 && slot.ticket == op.ticket) slot.ended = watchdog_clock();
  if (op.collective) trace.collectives_completed = std::max(trace.collectives_completed, op.seq);
}

void expire(const OpRecord& op, GroupTrace& trace, double waited) {
  State& s = state();
  if (s.handlers.expire) s.handlers.expire(op, trace, waited);
}

// Retires the tracked operations the device has run; the oldest still
// pending expires past the timeout. Checked every 10 ms at most: a
// completion query costs a driver call, and the timeout is seconds.
void check_tracked() {
  State& s = state();
  const double now = watchdog_clock();
  if (now < s.next_tracked_check) return;
  s.next_tracked_check = now + 0.01;
  std::erase_if(s.tracked, [](TrackedOp& t) {
    if (!t.complete()) return false;
    mark_completed(*t.trace, t.op);
    return true;
  });
  if (s.tracked.empty()) return;
  TrackedOp& oldest = s.tracked.front();
  const double age = now - oldest.op.enqueued;
  if (age > s.settings.timeout_seconds) expire(oldest.op, *oldest.trace, age);
}

// Polls done() until it is true: spins for the first millisecond, as
// MPI_Wait would (a collective of a training step ends within it, and a
// sleep would add its wake-up latency to every one), then polls every 20 us,
// serving peers' questions and dump requests, and calling check() (which
// expires, and does not return, once something waited past the timeout).
// Returns the seconds it waited.
double poll(const std::function<bool()>& done, const std::function<void(double waited)>& check) {
  State& s = state();
  const double start = watchdog_clock();
  constexpr double kSpinSeconds = 1e-3;
  bool spinning = true;
  for (int spins = 0; !done(); ++spins) {
    if (spinning) {
      if (spins % 64 != 0 || watchdog_clock() - start < kSpinSeconds) continue;
      spinning = false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (s.handlers.serve) s.handlers.serve();
    serve_dump_request();
    check(watchdog_clock() - start);
  }
  return watchdog_clock() - start;
}

}  // namespace

void watchdog_wait(GroupTrace& trace, const OpRecord& issued, const std::function<bool()>& done) {
  State& s = state();
  // The ring may have wrapped since the issue: keep a copy to report.
  const OpRecord op = issued;
  if (!done()) {
    s.current = {true, op, 0};
    struct Clear {
      ~Clear() { state().current = {}; }
    } clear_on_exit;
    s.total_wait += poll(done, [&](double waited) {
      check_tracked();  // an older device operation expires first
      if (waited > s.settings.timeout_seconds) expire(op, trace, waited);
    });
  }
  mark_completed(trace, op);
}

void watchdog_track(GroupTrace& trace, const OpRecord& op, std::function<bool()> complete) {
  State& s = state();
  // Retire what the device has finished from the front, so that the list
  // stays as long as the work in flight.
  while (!s.tracked.empty() && s.tracked.front().complete()) {
    mark_completed(*s.tracked.front().trace, s.tracked.front().op);
    s.tracked.pop_front();
  }
  s.tracked.push_back({&trace, op, std::move(complete)});
}

size_t watchdog_tracked_count() { return state().tracked.size(); }

void watchdog_wait_device(const char* what, const std::function<bool()>& done) {
  State& s = state();
  if (done()) return;
  s.device_work = OpRecord{};
  s.device_work.op = what;
  s.device_work.group = s.device_trace.label;
  s.device_work.dtype = "-";
  s.device_work.stream = s.device_trace.transport;
  s.device_work.seq = ++s.device_trace.collectives_entered;
  s.device_work.enqueued = s.device_work.started = watchdog_clock();
  s.in_device_wait = true;
  struct Clear {
    ~Clear() { state().in_device_wait = false; }
  } clear_on_exit;
  // The time spent here is the device's work, not waiting for peers: it is
  // not added to watchdog_total_wait_seconds.
  poll(done, [&](double waited) {
    check_tracked();
    if (s.tracked.empty() && waited > s.settings.timeout_seconds) {
      s.device_trace.world_ranks = {s.world_rank};
      expire(s.device_work, s.device_trace, waited);
    }
  });
  mark_completed(s.device_trace, s.device_work);
}

void watchdog_add_abort_hook(const void* owner, std::function<void()> hook) {
  state().abort_hooks.emplace_back(owner, std::move(hook));
}

void watchdog_remove_abort_hooks(const void* owner) {
  std::erase_if(state().abort_hooks, [owner](const auto& hook) { return hook.first == owner; });
}

namespace {
// The hooks' run, once started: they are taken out of the state first, so a
// hook runs once even if the abort path is re-entered.
struct AbortRun {
  std::shared_ptr<std::atomic<bool>> done;
  std::chrono::steady_clock::time_point started;
};
std::optional<AbortRun> abort_run;
}  // namespace

void watchdog_start_abort_hooks() {
  if (abort_run) return;
  auto hooks =
      std::make_shared<decltype(State::abort_hooks)>(std::exchange(state().abort_hooks, {}));
  abort_run = AbortRun{std::make_shared<std::atomic<bool>>(hooks->empty()),
                       std::chrono::steady_clock::now()};
  if (hooks->empty()) return;
  // On a thread of its own, which is left behind if it does not finish: on
  // an H100 (2026-11-26) ncclCommAbort did not return while a peer was
  // stopped, and the job stayed up after the watchdog's line.
  std::thread([hooks, done = abort_run->done] {
    for (const auto& [owner, hook] : *hooks) hook();
    done->store(true);
  }).detach();
}

bool watchdog_run_abort_hooks(double seconds) {
  watchdog_start_abort_hooks();
  const AbortRun run = *std::exchange(abort_run, std::nullopt);
  const auto until = run.started + std::chrono::duration<double>(seconds);
  while (!run.done->load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (run.done->load()) return true;
  std::fprintf(stderr,
               "watchdog: the abort hooks (NCCL's communicators) did not return in %.1f s; "
               "going down without them\n",
               seconds);
  return false;
}

double watchdog_total_wait_seconds() { return state().total_wait; }

std::string describe_op(const OpRecord& op) {
  std::string text = fmt::format("{} #{} on group {}", op.op, op.seq, op.group);
  if (!op.collective) text += fmt::format(" with rank {}", op.peer);
  return text + fmt::format(" ({} {})", format_bytes(static_cast<double>(op.bytes)), op.dtype);
}

std::string flight_recorder_json(const std::string& reason) {
  const State& s = state();
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  const uint64_t first = s.issued > s.ring.size() ? s.issued - s.ring.size() : 0;
  for (uint64_t ticket = first + 1; ticket <= s.issued; ++ticket) {
    const OpRecord& r = s.ring[(ticket - 1) % s.ring.size()];
    nlohmann::ordered_json entry = {{"ticket", r.ticket},         {"op", r.op},
                                    {"group", r.group},           {"seq", r.seq},
                                    {"collective", r.collective}, {"bytes", r.bytes},
                                    {"dtype", r.dtype},           {"stream", r.stream},
                                    {"enqueued", r.enqueued},     {"started", r.started}};
    entry["ended"] = r.ended >= 0 ? nlohmann::ordered_json(r.ended) : nlohmann::ordered_json();
    if (!r.collective) entry["peer"] = r.peer;
    entries.push_back(std::move(entry));
  }
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const GroupTrace* trace : s.groups) {
    groups.push_back({{"label", trace->label},
                      {"world_ranks", trace->world_ranks},
                      {"collectives_entered", trace->collectives_entered},
                      {"collectives_completed", trace->collectives_completed}});
  }
  const double wall_start =
      std::chrono::duration<double>(kProcessStartWall.time_since_epoch()).count();
  const nlohmann::ordered_json dump = {{"rank", s.world_rank},
                                       {"pid", static_cast<int>(::getpid())},
                                       {"reason", reason},
                                       {"dumped_at", watchdog_clock()},
                                       {"clock_zero_unix_seconds", wall_start},
                                       {"timeout_seconds", s.settings.timeout_seconds},
                                       {"groups", groups},
                                       {"entries", entries}};
  return dump.dump(1) + "\n";
}

std::string flight_recorder_dump(const std::string& reason) {
  const State& s = state();
  if (s.settings.dump_dir.empty()) return "";
  const fs::path dir = fs::path(s.settings.dump_dir) / "flight_recorder";
  try {
    fs::create_directories(dir);
    const std::string path = (dir / fmt::format("rank_{:05d}.json", s.world_rank)).string();
    write_file_atomically(path, flight_recorder_json(reason));
    return path;
  } catch (const std::exception&) {
    return "";  // a dump is best effort: the job is going down anyway
  }
}

std::string flight_recorder_note(const std::string& reason) {
  const std::string path = flight_recorder_dump(reason);
  return path.empty() ? "" : " (flight recorder: " + path + ")";
}

}  // namespace llm
