// The collective watchdog and its flight recorder (docs/failure.md). Every
// operation a Group issues is recorded in a ring of the last N (op, group,
// sequence number, bytes, type, stream; enqueue, start and end times), and
// every wait on one is polled against parallel.timeout. Past it, the comm
// layer's expiry handler asks the group's members where they are, prints one
// line naming the members that never reached the operation, writes the
// recorder and takes the job down with kExitRestartable (exit_status.h).
// Operations queued on a device (NCCL) are tracked until the device has run
// them; a host wait on device work (a stream synchronize) is polled the same
// way, and expires on the oldest tracked operation past the timeout.
// Invariant: no wait on a collective, a message or device work blocks longer
// than the timeout plus the few seconds the expiry handler spends asking the
// peers.
#pragma once

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace llm {

struct WatchdogSettings {
  double timeout_seconds = 600;  // parallel.timeout
  std::string dump_dir;          // the run directory; "" writes no recorder file
  size_t recorder_entries = 2000;
};
// The signal that asks a process for a recorder dump; its handler runs on the
// signal thread (signal_thread.h).
inline constexpr int kDumpSignal = SIGQUIT;
// Applies `settings` from now on; installs the kDumpSignal handler that asks for
// a recorder dump. `world_rank` names this process's files and lines.
void watchdog_configure(const WatchdogSettings& settings);
// Sets settings.dump_dir alone: the trainer names its run directory once the
// run has started, so input found bad before that writes nothing.
void watchdog_set_dump_dir(const std::string& dir);
void watchdog_set_world_rank(int world_rank);
const WatchdogSettings& watchdog_settings();

// One collective as its members must agree on it: what it is and its size.
struct CollectiveSignature {
  const char* op = "";  // "all_reduce", ...
  uint64_t bytes = 0;
  const char* dtype = "";  // "f32", "bf16", "-"
  uint64_t seq = 0;        // the group's collective number
};

// FNV-1a over `bytes`, continuing from `hash` (start from kFnv1aOffset): the
// hash of the collectives' fingerprints and of the agreement check's keys.
inline constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ull;
uint64_t fnv1a(uint64_t hash, std::string_view bytes);

// The fingerprint after `previous` extended by one collective: a 64-bit hash
// of the sequence of signatures (op, bytes, dtype; not seq, which is the
// position itself), equal on members that issued the same collectives.
uint64_t collective_fingerprint(uint64_t previous, const CollectiveSignature& signature);

// Where one group of this process stands. Collectives are numbered 1, 2, ...
// in the order issued, the same on every member; messages are numbered apart.
// `fingerprint` hashes every collective's signature in order, and `unchecked`
// keeps the signatures issued since the members last compared fingerprints
// (parallel/collective_agreement.h), the first kMaxUncheckedCollectives of them.
struct GroupTrace {
  static constexpr size_t kMaxUncheckedCollectives = 4096;
  std::string label;             // "world", "tensor", "data", ... (the same on every member)
  std::vector<int> world_ranks;  // member i's rank in the world
  uint64_t collectives_entered = 0, collectives_completed = 0;
  uint64_t messages_entered = 0;
  const char* transport = "mpi";  // how its operations travel: "mpi", "nccl" (records' stream)
  uint64_t fingerprint = 0;
  std::vector<CollectiveSignature> unchecked;
};

// One recorded operation; times in seconds since this process started.
struct OpRecord {
  uint64_t ticket = 0;  // this process's operation count
  const char* op = "";  // "all_reduce", "recv", ...
  std::string group;    // its label
  uint64_t seq = 0;     // collectives: the group's collective number; messages: theirs
  bool collective = true;
  int peer = -1;  // a message's other end, as a world rank
  uint64_t bytes = 0;
  const char* dtype = "";
  const char* stream = "";                       // its group's transport: "mpi", "nccl"
  double enqueued = 0, started = 0, ended = -1;  // ended < 0: not waited for yet
};

// Records an operation that `trace`'s group issues now and numbers it.
// `peer` (a member index) marks a point-to-point message.
const OpRecord& watchdog_issue(GroupTrace& trace, const char* op, uint64_t bytes, const char* dtype,
                               int peer = -1);
// Blocks until done() is true, polling it and serving the comm layer's
// watchdog messages; past the timeout calls the expiry handler, which does
// not return. Marks the operation completed.
void watchdog_wait(GroupTrace& trace, const OpRecord& op, const std::function<bool()>& done);

// An operation queued on a device stream (an NCCL collective): the host does
// not wait for it, so the watchdog keeps it until complete() says the device
// has run it. Every wait retires the completed ones, and expires once the
// oldest has been pending (since its enqueue, as PyTorch's NCCL watchdog
// counts) past the timeout. `op` comes from watchdog_issue on `trace`.
void watchdog_track(GroupTrace& trace, const OpRecord& op, std::function<bool()> complete);
// Tracked operations not yet seen complete.
size_t watchdog_tracked_count();
// A host wait on device work (`what`: "synchronize", ...): polls done() as
// watchdog_wait does. While it waits, peers are told it waits on the oldest
// tracked operation; past the timeout with none tracked, the device itself
// is hung, and it expires on the work as an operation of group "device".
void watchdog_wait_device(const char* what, const std::function<bool()>& done);

// Run, in the order added, before the watchdog takes the job down (so that
// NCCL's communicators are aborted and the GPU released); an owner removes
// its hooks before it goes. The hooks get `seconds` in all, on a thread of
// their own: a hook that does not return (ncclCommAbort can wait on a peer
// that is stopped) is left behind, said so on stderr, and the job still goes
// down.
constexpr double kAbortHookSeconds = 5;
void watchdog_add_abort_hook(const void* owner, std::function<void()> hook);
void watchdog_remove_abort_hooks(const void* owner);
// Starts the hooks now, so that they run while the rank still does other
// work on its way down (the watchdog's farewell); the seconds count from here.
void watchdog_start_abort_hooks();
// Starts the hooks if not started, and waits until `seconds` after their
// start; returns whether every hook returned in time.
bool watchdog_run_abort_hooks(double seconds = kAbortHookSeconds);

// What the comm layer plugs in (parallel/comm_mpi.cpp).
struct WatchdogHandlers {
  std::function<void()> serve;  // answers peers' questions; called while waiting
  std::function<void(const OpRecord& op, const GroupTrace& trace, double waited)> expire;
};
// Returns the handlers it replaces (a test puts them back).
WatchdogHandlers watchdog_set_handlers(WatchdogHandlers handlers);

// What this process waits on now, for answers to peers.
struct CurrentWait {
  bool waiting = false;
  OpRecord op;
  double waited = 0;
};
CurrentWait watchdog_current_wait();
// This process's group labelled `label`, or null.
const GroupTrace* watchdog_find_group(std::string_view label);
// Every group of this process, in the order they were made (the same order
// on every rank, as groups are made collectively).
const std::vector<GroupTrace*>& watchdog_groups();
void watchdog_register(GroupTrace* trace);
void watchdog_unregister(GroupTrace* trace);

// Writes the recorder as JSON to <dump_dir>/flight_recorder/rank_NNNNN.json
// with `reason`; returns the path, or "" without a dump directory.
std::string flight_recorder_dump(const std::string& reason);
// Writes the dump and returns " (flight recorder: PATH)" for an error line,
// or "" when nothing was written.
std::string flight_recorder_note(const std::string& reason);
// The recorder's JSON text (what the dump writes).
std::string flight_recorder_json(const std::string& reason);
// Seconds this process has spent blocked in watchdog_wait, in all: the time
// it waited for other ranks (the straggler report subtracts it from a step).
double watchdog_total_wait_seconds();
// Seconds since this process started (the recorder's clock).
double watchdog_clock();
// "4.0 MiB f32" style description of an operation, for messages.
std::string describe_op(const OpRecord& op);

}  // namespace llm
