// The collectives' agreement check: one all-gather over the world of every
// rank's groups (a key naming the group, its fingerprint, its label), and on
// a disagreement a second one of the differing group's unchecked signatures,
// to name the first collective its members issued differently.
// Invariant: every rank computes its verdict and message from the same
// gathered words, so all agree on both.
#include "parallel/collective_agreement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "parallel/comm.h"
#include "base/error.h"
#include "collectives/watchdog.h"

namespace llm {
namespace {

// Groups of several members one rank may hold (the 3-D mesh with NCCL holds
// about a dozen, each NCCL group with its MPI twin).
constexpr size_t kMaxGroups = 32;
constexpr size_t kLabelWords = 3;  // a label's first 24 characters
// A group's slot: key, fingerprint, unchecked count, transport, label.
constexpr size_t kSlotWords = 4 + kLabelWords;
constexpr size_t kSignatureWords = 4;  // op, bytes, dtype, seq

constexpr const char* kOps[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
constexpr const char* kDtypes[] = {"f32", "bf16", "-"};
constexpr const char* kTransports[] = {"mpi", "nccl"};

template <size_t N>
uint64_t code_of(std::string_view name, const char* const (&names)[N]) {
  for (size_t i = 0; i < N; i++)
    if (name == names[i]) return i + 1;
  return N + 1;  // a name the table lacks
}

template <size_t N>
const char* name_of(uint64_t code, const char* const (&names)[N]) {
  return code >= 1 && code <= N ? names[code - 1] : "?";
}

// Names the group identically on every member, and apart from other groups:
// its label, transport and members, and `ordinal`, its place among this
// rank's groups that share all three (made in the same order on every member).
uint64_t group_key(const GroupTrace& trace, uint64_t ordinal) {
  uint64_t h = fnv1a(kFnv1aOffset, trace.label);
  auto add = [&h](uint64_t word) {
    h = fnv1a(h, std::string_view(reinterpret_cast<const char*>(&word), sizeof word));
  };
  add(code_of(trace.transport, kTransports));
  for (int rank : trace.world_ranks) add(static_cast<uint64_t>(rank) + 0x10000);
  add(ordinal + 0x100000000ull);
  return h | 1;  // 0 marks an empty slot
}

// The keys of `traces`, in order.
std::vector<uint64_t> group_keys(const std::vector<GroupTrace*>& traces) {
  std::vector<uint64_t> keys;
  std::map<uint64_t, uint64_t> seen;  // key at ordinal 0 -> groups so far
  for (const GroupTrace* trace : traces)
    keys.push_back(group_key(*trace, seen[group_key(*trace, 0)]++));
  return keys;
}

// Every rank's `mine` (the same length on each), in rank order. The words
// travel as pairs of f32 elements: an all-gather copies bits, it adds nothing.
std::vector<uint64_t> gather_words(Group& world, const std::vector<uint64_t>& mine) {
  static_assert(sizeof(uint64_t) == 2 * sizeof(float));
  std::vector<uint64_t> all(mine.size() * static_cast<size_t>(world.size()));
  world.all_gather(mine.data(), all.data(), mine.size() * 2, WireType::f32);
  return all;
}

struct Row {
  int rank;
  uint64_t fingerprint, unchecked;
};

// "0, 2-5, 7 and 8" for sorted ranks: runs of three or more as a range.
std::string rank_list(const std::vector<int>& ranks) {
  std::vector<std::string> runs;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) j++;
    if (j - i >= 2) {
      runs.push_back(fmt::format("{}-{}", ranks[i], ranks[j]));
    } else {
      for (size_t k = i; k <= j; k++) runs.push_back(fmt::format("{}", ranks[k]));
    }
    i = j + 1;
  }
  std::string text;
  for (size_t i = 0; i < runs.size(); i++)
    text += (i == 0 ? "" : i + 1 == runs.size() ? " and " : ", ") + runs[i];
  return text;
}

// The message for the group `key`, whose members (rows) disagree: a second
// gather of their unchecked signatures finds the first that differs.
std::string describe_disagreement(Group& world, const std::vector<GroupTrace*>& mine,
                                  const std::vector<uint64_t>& keys, uint64_t key,
                                  const std::vector<Row>& rows, const std::string& label,
                                  const char* transport) {
  uint64_t length = 0;
  for (const Row& row : rows) length = std::max(length, row.unchecked);
  std::vector<uint64_t> words(length * kSignatureWords, 0);
  for (size_t i = 0; i < mine.size(); i++) {
    if (keys[i] != key) continue;
    const GroupTrace* trace = mine[i];
    for (size_t j = 0; j < std::min<size_t>(length, trace->unchecked.size()); j++) {
      const CollectiveSignature& s = trace->unchecked[j];
      uint64_t* w = &words[j * kSignatureWords];
      w[0] = code_of(s.op, kOps), w[1] = s.bytes, w[2] = code_of(s.dtype, kDtypes), w[3] = s.seq;
    }
  }
  const std::vector<uint64_t> all = gather_words(world, words);
  auto signature = [&](int rank, uint64_t j) {
    return &all[static_cast<size_t>(rank) * words.size() + j * kSignatureWords];
  };
  std::vector<int> members;
  for (const Row& row : rows) members.push_back(row.rank);
  const std::string group =
      fmt::format("group '{}' ({}, world ranks {})", label, transport, rank_list(members));
  for (uint64_t j = 0; j < length; j++) {
    // Each distinct version of collective j, with the members that issued it.
    std::map<std::vector<uint64_t>, std::vector<int>> versions;
    for (int rank : members) {
      const uint64_t* w = signature(rank, j);
      versions[{w[0], w[1], w[2], w[3]}].push_back(rank);
    }
    if (versions.size() == 1) continue;
    // Listed by their lowest rank.
    std::vector<std::pair<std::vector<uint64_t>, std::vector<int>>> listed(versions.begin(),
                                                                           versions.end());
    std::sort(listed.begin(), listed.end(),
              [](const auto& a, const auto& b) { return a.second.front() < b.second.front(); });
    std::string each;
    for (const auto& [w, ranks] : listed) {
      each += each.empty() ? "" : "; ";
      each += fmt::format("rank{} {}: ", ranks.size() > 1 ? "s" : "", rank_list(ranks));
      each += w[0] == 0 ? std::string("nothing (it issued fewer collectives)")
                        : fmt::format("{} #{} of {} bytes ({})", name_of(w[0], kOps), w[3], w[1],
                                      name_of(w[2], kDtypes));
    }
    return fmt::format(
        "collectives disagree on {}: {}. Neither NCCL nor MPI compares what the members pass; "
        "this step's update was not applied",
        group, each);
  }
  return fmt::format(
      "collectives disagree on {}: their fingerprints differ, though the first {} collectives "
      "since the last check agree; this step's update was not applied",
      group, length);
}

}  // namespace

std::string collective_disagreement(Group& world) {
  if (world.size() == 1) return "";
  std::vector<GroupTrace*> mine;
  for (GroupTrace* trace : watchdog_groups())
    if (trace->world_ranks.size() > 1) mine.push_back(trace);
  LLM_CHECK(mine.size() <= kMaxGroups,
            "the collectives' agreement check compares at most {} groups of several members a "
            "rank; this rank has {}",
            kMaxGroups, mine.size());
  const std::vector<uint64_t> keys = group_keys(mine);
  std::vector<uint64_t> words(kMaxGroups * kSlotWords, 0);
  for (size_t i = 0; i < mine.size(); i++) {
    uint64_t* w = &words[i * kSlotWords];
    w[0] = keys[i];
    w[1] = mine[i]->fingerprint;
    w[2] = mine[i]->unchecked.size();
    w[3] = code_of(mine[i]->transport, kTransports);
    std::memcpy(&w[4], mine[i]->label.data(),
                std::min(mine[i]->label.size(), kLabelWords * sizeof(uint64_t)));
  }
  const std::vector<uint64_t> all = gather_words(world, words);

  // Each group's rows, by key (ordered: every rank picks the same first).
  std::map<uint64_t, std::vector<Row>> groups;
  std::map<uint64_t, const uint64_t*> slot_of;
  for (int rank = 0; rank < world.size(); rank++) {
    for (size_t i = 0; i < kMaxGroups; i++) {
      const uint64_t* w = &all[(static_cast<size_t>(rank) * kMaxGroups + i) * kSlotWords];
      if (w[0] == 0) continue;
      groups[w[0]].push_back({rank, w[1], w[2]});
      slot_of.emplace(w[0], w);
    }
  }
  for (const auto& [key, rows] : groups) {
    const uint64_t first = rows.front().fingerprint;
    const bool agree = std::all_of(rows.begin(), rows.end(),
                                   [first](const Row& row) { return row.fingerprint == first; });
    if (agree) continue;
    const uint64_t* w = slot_of[key];
    char label[kLabelWords * sizeof(uint64_t) + 1] = {};
    std::memcpy(label, &w[4], kLabelWords * sizeof(uint64_t));
    return describe_disagreement(world, mine, keys, key, rows, label, name_of(w[3], kTransports));
  }
  for (GroupTrace* trace : mine) trace->unchecked.clear();
  return "";
}

void check_collective_agreement(Group& world) {
  const std::string message = collective_disagreement(world);
  if (message.empty()) return;
  flight_recorder_dump(message);
  comm_abort_collective(message);
}

}  // namespace llm
