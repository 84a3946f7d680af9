#!/usr/bin/env bash
# Rows: the rendezvous with N simulated nodes (1,000 and 10,000), each a real TCP
# connection from a load generator in another process (bench/rendezvous_load.cpp), each
# from its own loopback address. Time from the first registration to the barrier opening
# (median of 3), and the coordinator's peak RSS. Beside it, the published PyTorch figures
# (not measured here): c10d rendezvous, 4,000 hosts in ~10 s after pytorch#124982; libuv
# TCPStore, 96K ranks in ~100 s. Ratio: our rate / theirs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$TMPI_BUILD_DIR
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
ulimit -n "$(ulimit -Hn)"
ssh-keygen -q -t ed25519 -N '' -f "$work/id_ed25519"
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for n in 1000 10000; do
  python3 - "$n" > "$work/hosts.json" <<'PY'
import json, sys
n = int(sys.argv[1])
host = lambda i: f"127.{1 + i // 62500}.{(i // 250) % 250}.{2 + i % 250}"
print(json.dumps({"apiVersion": "trainer-mpi/v1", "jobset": "bench", "subdomain": "", "launcher": None,
                  "hosts": [{"name": host(i), "slots": 1, "gpus": 0, "role": "node"} for i in range(n)]}))
PY
  : > "$work/seconds"; : > "$work/rss"
  for _ in 1 2 3; do
    port=$((20000 + RANDOM % 20000))
    /usr/bin/time -f '%M' -o "$work/time" "$bin/bin/mpi-rendezvous" serve --hosts "$work/hosts.json" \
      --ssh-dir "$work" --listen-address 127.0.0.1 --rendezvous-port "$port" --log-level warn &
    server=$!
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
    result=$("$bin/bench/rendezvous_load" "$port" "$n" "$work/id_ed25519" 512)
    kill -TERM "$(pgrep -P "$server" mpi-rendezvous || echo "$server")" 2>/dev/null || true
    wait "$server" || true
    jq -r .seconds <<<"$result" >> "$work/seconds"
    cat "$work/time" >> "$work/rss"
  done
  s=$(median < "$work/seconds"); kb=$(median < "$work/rss")
  rate=$(echo "$n / $s" | bc -l)
  printf '| rendezvous, %d nodes: first registration to barrier | %.3f s (%.0f hosts/s) | 4,000 in ~10 s (400/s, c10d) | %.1fx | 10,000 < 1 s |\n' \
    "$n" "$s" "$rate" "$(echo "$rate / 400" | bc -l)"
  printf '| rendezvous, %d nodes: coordinator peak RSS | %d MB | 96K ranks in ~100 s (960/s, libuv TCPStore) | %.1fx rate | < 200 MB |\n' \
    "$n" $((kb / 1024)) "$(echo "$rate / 960" | bc -l)"
done
