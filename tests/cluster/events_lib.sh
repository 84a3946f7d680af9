# events_lib.sh: the launcher pod as the runtimes run it for Events (docs/design.md, "Trust"):
# the job's one API token in the pod's mpi-rendezvous sidecar alone, which relays the
# launcher's Events to the Kubernetes API (the faithful fake, tests/fakes/fake_kube_api.py, on
# the launcher pod's loopback, knowing TrainJob team-a/train). Shared by api_token_test.sh and
# explained_test.sh; sourced after launcher_lib.sh.
#
# The launcher pod's containers run as the kubelet runs them (cib's CIB_CONTAINER): each its
# own mount namespace and PID namespace, the pod's network and hostname shared. The sidecar
# mounts a tmpfs at the service account's path in its own mount namespace and writes the token
# there from a pipe: it is in no file of the box's shared filesystem, no argument and no
# variable of a process that a container can see. It runs as the pods' uid (1000), no
# capabilities, no new privileges, as the runtimes run it, and holds the token open (fd 7), so
# that a way in through /proc/PID/fd would show.
events_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sa_path=/var/run/secrets/kubernetes.io/serviceaccount  # where the runtimes mount it (policies_test.py)
sa="$CIB_DIR/pods/$launcher/serviceaccount"  # that path, in the box: empty but in the sidecar's mount namespace
mkdir -p "$sa"
new_token() { echo "projected-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"; }
token=$(new_token)
trainjob_uid=5e1f0000-aaaa-bbbb-cccc-000011112222

# start_api [fake options]: the fake API in the launcher pod, which takes $token only; it holds
# the JobSet's pods of $api_pods (a JSON list), none by default.
start_api() {
  local dir="$CIB_DIR/kube"; mkdir -p "$dir"
  [[ -f $dir/ca.crt ]] || bash "$events_here/../fakes/make_test_ca.sh" "$dir"
  echo '{"trainjobs": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
         "metadata": {"name": "train", "namespace": "team-a", "uid": "'"$trainjob_uid"'"}}]}' |
    jq --argjson pods "${api_pods:-[]}" '.pods = $pods' > "$dir/state.json"
  rm -f "$dir/port"
  in_pod "$launcher" python3 "$events_here/../fakes/fake_kube_api.py" --cert "$dir/server.crt" --key "$dir/server.key" \
    --token "$token" --state "$dir/state.json" --port-file "$dir/port" --log "$dir/requests.log" "$@" &
  api_pid=$!
  for _ in $(seq 100); do [[ -s $dir/port ]] && break; sleep 0.05; done
  [[ -s $dir/port ]] || fail "the fake Kubernetes API did not start"
  api_port=$(cat "$dir/port")
}
stop_api() { kill "$api_pid" 2>/dev/null || true; wait "$api_pid" 2>/dev/null || true; }

# The job key where uid 1000 reads it (the runtimes' HOME volume is the pod's fsGroup's).
key_dir="$CIB_DIR/pods/$launcher/sidecar-ssh"
mkdir -p "$key_dir"; cp "$CIB_DIR/pods/$launcher/home/.ssh/"id_* "$key_dir/"
chown -R 1000:1000 "$key_dir"; chmod 700 "$key_dir"; chmod 600 "$key_dir"/id_*
as_pod_user=(setpriv --reuid 1000 --regid 1000 --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all)

# start_token_sidecar: mpi-rendezvous (the relay) as the launcher pod's sidecar container, with
# $token in its own mount namespace only.
# token_sidecar_args: what follows `mpi-rendezvous`; the relay alone (`relay`) by default. Where
# the launcher pod is a host too, the runtimes' way: one sidecar that registers and relays.
start_token_sidecar() {
  local log="$CIB_DIR/pods/$launcher/mpi-rendezvous.log"
  printf '%s' "$token" | CIB_CONTAINER=1 "$CIB" exec "$launcher" -- bash -c '
    set -e
    mount -t tmpfs -o size=64k,mode=0755 tmpfs "$1"
    cat > "$1/token"; chmod 0644 "$1/token"
    echo team-a > "$1/namespace"; cp "$2" "$1/ca.crt"
    exec 7< "$1/token" </dev/null
    shift 2; exec "$@"' _ "$sa" "$CIB_DIR/kube/ca.crt" \
    "${as_pod_user[@]}" env -i HOME="$CIB_DIR/pods/$launcher/home" KUBERNETES_SERVICE_HOST=127.0.0.1 \
    KUBERNETES_SERVICE_PORT="$api_port" "$TMPI_BIN/mpi-rendezvous" "${token_sidecar_args[@]:-relay}" --trainjob train \
    --ssh-dir "$key_dir" --service-account-dir "$sa" > "$log" 2>&1 &
  sidecar_pid=$!
  wait_for "api relay: Events about TrainJob team-a/train on 127.0.0.1:29412" "$log" 10
}
# The container's first process (its PID namespace's init: mpi-rendezvous) gets SIGTERM, as the
# kubelet stops a container; unshare, its parent here, ignores SIGTERM and waits for it.
stop_token_sidecar() {
  local init; init=$(pgrep -P "$sidecar_pid" || true)
  [[ -z $init ]] || kill -TERM "$init"
  wait "$sidecar_pid" 2>/dev/null || true
}

# The launcher at the runtimes' defaults, in its own container: the kubelet's variables for the
# API, the service account's path empty there (no token mounted in this container).
launch_in_container() {
  CIB_CONTAINER=1 launch "$@"
}
launch() {
  in_pod "$launcher" timeout -k 5 240 env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$api_port" \
    TMPI_SERVICE_ACCOUNT_DIR="$sa" "$L" run --hosts "$ETC_MPI/hosts.json" --iface eth0 \
    --report "$report" --beat-interval 1s --lost-after 3s --grace 3s "$@"
}
events_logged() {  # the Events the fake API created: "reason|message" per line
  jq -r 'select(.method == "POST" and (.path | endswith("/events")) and .code == 201) |
         "\(.object.reason)|\(.object.involvedObject.name)|\(.object.involvedObject.uid)|\(.object.message)"' \
    "$CIB_DIR/kube/requests.log"
}
no_token_in() { ! grep -qF -- "$token" "$@" || fail "the token is in ${*:-what the rank read}"; }
