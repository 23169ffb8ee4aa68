// The hosts of an elastic job (`./train supervise` with a hostfile): an
// OpenMPI hostfile read and written, which hosts the next launch uses, and
// the world size that still fits on them.
// The rule (docs/failure.md#a-job-that-comes-back-train-supervise): a host named in
// `set_aside_after` failures in a row is set aside for the next
// `retry_after` launches, then tried again; a host is never set aside when
// the others could not run a world the config fits.
// Invariant: ranks fill the hosts in order, each up to its slots (mpirun's
// default placement by slot), so a rank's host follows from the hostfile.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace llm {

struct Host {
  std::string name;
  int slots = 1;
};

// "name [slots=N] ..." per line, '#' starts a comment; other fields
// (max_slots=) are ignored. Errors name the file and line.
std::vector<Host> hostfile_read(const std::string& path);
// The hosts as "name slots=N" lines.
void hostfile_write(const std::string& path, const std::vector<Host>& hosts);
int total_slots(const std::vector<Host>& hosts);
// The host of world rank `rank` placed by slot ("" beyond the slots).
std::string host_of_rank(const std::vector<Host>& hosts, int rank);

// The largest world size in [1, limit] that `fits`, else 0.
int largest_fitting_world(int limit, const std::function<bool(int)>& fits);

class HostPool {
 public:
  HostPool(std::vector<Host> hosts, int set_aside_after, int retry_after);
  // A launch failed, naming `host` ("" when its output named none).
  void record_failure(const std::string& host);
  // The hosts of the next launch, in the hostfile's order: those not set
  // aside, after a host set aside sat out its launches. `fits` says whether
  // a set of hosts can run the job.
  std::vector<Host> next_launch(const std::function<bool(const std::vector<Host>&)>& fits);
  // The hosts set aside now.
  std::vector<std::string> set_aside() const;

 private:
  struct State {
    Host host;
    int failures_in_a_row = 0;
    int launches_aside = 0;  // > 0 while set aside
  };
  std::vector<State> hosts_;
  int set_aside_after_, retry_after_;
};

}  // namespace llm
