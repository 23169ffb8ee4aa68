// Hostfiles and the hosts of the next launch (host_pool.h).
#include "commands/host_pool.h"

#include <sstream>

#include "base/error.h"
#include "base/file_io.h"

namespace llm {

std::vector<Host> hostfile_read(const std::string& path) {
  std::istringstream text(read_file(path));
  std::vector<Host> hosts;
  std::string line;
  for (int number = 1; std::getline(text, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    Host host;
    if (!(fields >> host.name)) continue;
    for (std::string field; fields >> field;) {
      if (field.rfind("slots=", 0) != 0) continue;
      const std::string slots = field.substr(6);
      LLM_CHECK(!slots.empty() && slots.size() < 7 &&
                    slots.find_first_not_of("0123456789") == std::string::npos &&
                    std::stoi(slots) > 0,
                "{}:{}: expected slots=N with N a positive integer, got '{}'", path, number, field);
      host.slots = std::stoi(slots);
    }
    hosts.push_back(host);
  }
  LLM_CHECK(!hosts.empty(), "{}: no hosts in the hostfile", path);
  return hosts;
}

void hostfile_write(const std::string& path, const std::vector<Host>& hosts) {
  std::string text;
  for (const Host& host : hosts) text += host.name + " slots=" + std::to_string(host.slots) + "\n";
  write_file_atomically(path, text);
}

int total_slots(const std::vector<Host>& hosts) {
  int slots = 0;
  for (const Host& host : hosts) slots += host.slots;
  return slots;
}

std::string host_of_rank(const std::vector<Host>& hosts, int rank) {
  for (const Host& host : hosts) {
    if (rank < host.slots) return host.name;
    rank -= host.slots;
  }
  return "";
}

int largest_fitting_world(int limit, const std::function<bool(int)>& fits) {
  for (int world = limit; world >= 1; --world) {
    if (fits(world)) return world;
  }
  return 0;
}

HostPool::HostPool(std::vector<Host> hosts, int set_aside_after, int retry_after)
    : set_aside_after_(set_aside_after), retry_after_(retry_after) {
  for (Host& host : hosts) hosts_.push_back({std::move(host)});
}

void HostPool::record_failure(const std::string& host) {
  for (State& state : hosts_) {
    state.failures_in_a_row = state.host.name == host ? state.failures_in_a_row + 1 : 0;
  }
}

std::vector<Host> HostPool::next_launch(const std::function<bool(const std::vector<Host>&)>& fits) {
  auto in_use = [&] {
    std::vector<Host> hosts;
    for (const State& state : hosts_) {
      if (state.launches_aside == 0) hosts.push_back(state.host);
    }
    return hosts;
  };
  for (State& state : hosts_) {
    if (state.launches_aside > 0) --state.launches_aside;  // this launch is one it sits out
  }
  for (State& state : hosts_) {
    if (state.launches_aside > 0 || state.failures_in_a_row < set_aside_after_) continue;
    state.launches_aside = retry_after_;
    state.failures_in_a_row = 0;
    if (!fits(in_use())) state.launches_aside = 0;  // the others alone cannot run the job
  }
  return in_use();
}

std::vector<std::string> HostPool::set_aside() const {
  std::vector<std::string> names;
  for (const State& state : hosts_) {
    if (state.launches_aside > 0) names.push_back(state.host.name);
  }
  return names;
}

}  // namespace llm
