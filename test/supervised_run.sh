# Sourced by the supervisor's tests (supervise_test.sh,
# supervise_elastic_test.sh): reading a supervised run's progress from its
# run directory ($work/run) and log ($work/run.log).

# The last step metrics.jsonl records (empty before the first).
last_step() { grep -o '"step":[0-9]*' "$work/run/metrics.jsonl" 2>/dev/null | tail -1 | cut -d: -f2; }
# Restarts restarts.jsonl records.
restarts() { cat "$work/run/restarts.jsonl" 2>/dev/null | wc -l; }
# Seconds since the date +%s.%N stamp $1, to a tenth.
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

resumed_lines=0
# After kill number $1 (from 0) at time $2: waits up to $3 tenths of a second
# for its restart to be recorded (else fails), then for the relaunch to say
# it resumed (a restart before the first checkpoint starts afresh: no such
# line); sets `recovery` to what took how long.
await_recovery() {
  local i=$1 killed_at=$2 detected resumed back
  for _ in $(seq "$3"); do [ "$(restarts)" -gt "$i" ] && break; sleep 0.1; done
  [ "$(restarts)" -gt "$i" ] || fail "no restart recorded after kill $((i + 1)): $(tail -5 "$work/run.log")"
  detected=$(since "$killed_at")
  resumed=$(tail -1 "$work/run/restarts.jsonl" | grep -o '"step":[0-9]*' | cut -d: -f2)
  back=fresh
  if [ "$resumed" -gt 0 ]; then
    for _ in $(seq 300); do
      [ "$(grep -c "resumed from" "$work/run.log")" -gt "$resumed_lines" ] && break
      sleep 0.05
    done
    back="the relaunch resumed from step $resumed $(since "$killed_at") s after the kill"
  fi
  resumed_lines=$(grep -c "resumed from" "$work/run.log")
  recovery="restart recorded after $detected s, $back"
}
