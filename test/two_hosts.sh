# Two hosts on one machine, sourced by the tests that need them
# (two_host_test.sh, supervise_elastic_test.sh): two network namespaces,
# each with its own addresses and hostname, joined as a cluster's nodes are
# by two networks: a data network (veth pair va/vb, 10.77.0.0/24) that
# carries MPI's traffic, and a management network (ma/mb, 10.78.0.0/24) that
# carries the launcher's. OpenMPI runs over TCP, launched through a hostfile
# and a launch agent that starts a host's daemon with `ip netns exec` (no ssh).
# Without root (or where namespaces cannot be made) the test skips, saying
# why (exit 77, which ctest reports as skipped); it never passes silently.
# Needs: $repo (the working directory of the ranks). Defines: skip, fail
# (keeping $work for inspection), $work, $ns_a, $ns_b, $work/hostfile
# (hosta and hostb, 2 slots each), on_host_a (a command prefix), mpi_flags
# (mpirun's flags for these hosts), and a cleanup on exit.
skip() { echo "SKIP: $*"; exit 77; }
failed=0
fail() { echo "FAIL: $*"; failed=1; exit 1; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip > /dev/null && command -v unshare > /dev/null || skip "ip or unshare is missing"

id=$$
ns_a=llm_a_$id ns_b=llm_b_$id
work=$(mktemp -d /tmp/two_host.XXXXXX)
cleanup() {
  for ns in "$ns_a" "$ns_b"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  # A failure keeps the logs (the runs' output and flight recorders).
  if [ "$failed" = 1 ]; then echo "kept for inspection: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
ip netns add "$ns_a" 2>/dev/null || skip "cannot create a network namespace here"
ip netns add "$ns_b" || fail "a second namespace"
ip link add "va$id" type veth peer name "vb$id" || skip "cannot create a veth pair here"
ip link add "ma$id" type veth peer name "mb$id" || fail "a second veth pair"
ip link set "va$id" netns "$ns_a" && ip link set "vb$id" netns "$ns_b" &&
  ip link set "ma$id" netns "$ns_a" && ip link set "mb$id" netns "$ns_b" || fail "moving the veth ends"
ip -n "$ns_a" addr add 10.77.0.1/24 dev "va$id" && ip -n "$ns_b" addr add 10.77.0.2/24 dev "vb$id" &&
  ip -n "$ns_a" addr add 10.78.0.1/24 dev "ma$id" && ip -n "$ns_b" addr add 10.78.0.2/24 dev "mb$id" ||
  fail "addresses"
for ns in "$ns_a" "$ns_b"; do
  ip -n "$ns" link set lo up
  # `ip netns exec` shows this file as the namespace's /etc/hosts.
  mkdir -p "/etc/netns/$ns"
  printf '127.0.0.1 localhost\n10.78.0.1 hosta\n10.78.0.2 hostb\n' > "/etc/netns/$ns/hosts"
done
for side in a b; do
  ns=llm_${side}_$id
  ip -n "$ns" link set "v$side$id" up && ip -n "$ns" link set "m$side$id" up || fail "link up"
done


# The launch agent: "agent [options] HOST COMMAND" runs COMMAND on HOST, i.e.
# in its namespace under its own hostname.
cat > "$work/agent.sh" <<AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
case \$host in hosta) ns=$ns_a ;; hostb) ns=$ns_b ;; *) echo "agent: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$host; \$*"
AGENT
chmod +x "$work/agent.sh"
printf 'hosta slots=2\nhostb slots=2\n' > "$work/hostfile"

# "${on_host_a[@]}" COMMAND...: COMMAND in host A's namespace, hostname hosta.
on_host_a=(ip netns exec "$ns_a" unshare --uts sh -c 'hostname hosta; exec "$@"' sh)
mpi_flags=(--mca plm_rsh_agent "$work/agent.sh" --mca oob_tcp_if_include 10.78.0.0/24
           --mca btl_tcp_if_include 10.77.0.0/24 --mca btl tcp,vader,self -wdir "$repo"
           -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -x OMP_NUM_THREADS=1)
