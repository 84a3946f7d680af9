#!/usr/bin/env bash
# The identity mpi-init writes works with real sshd, with strict host key checking on:
# the launcher's mpi-init writes the topology and key; the key reaches the node pods as a
# read-only Secret folder; each node runs `mpi-init --role node` and sshd with the config
# it wrote; the launcher reaches every node by FQDN, short name and address; scp and sftp
# copy a file there and back. A node whose sshd presents another host key is refused.
# Usage (under cib run): mpi_init_ssh_test.sh generated|trainer-ecdsa
source "$(dirname "$0")/lib.sh"
mode=$1
init="$TMPI_BUILD_DIR/bin/mpi-init"
sub=$(subdomain); launcher=$(launcher_pod); nodes=($(node_pods))
secret="$CIB_DIR/secret"; mkdir -p "$secret"
launcher_args=()
if [[ $mode == trainer-ecdsa ]]; then
  # Trainer's Secret: an ECDSA P-521 PEM key mounted as id_rsa / id_rsa.pub.
  ssh-keygen -q -t ecdsa -b 521 -m PEM -N '' -C trainer -f "$secret/id_rsa"
  launcher_args=(--ssh-secret "$secret")
fi
# The pod list the launcher would see: addresses from the cluster itself.
python3 "$(dirname "$0")/../initcontainer/make_pods.py" "${#nodes[@]}" --jobset "$sub" --gpus 0 |
  jq --argjson ips "$("$CIB" pods | awk '{ print $2 }' | jq -R . | jq -s .)" \
     '.items |= [to_entries[] | .value.status.podIP = $ips[.key] | .value]' > "$CIB_DIR/pods.json"
in_pod "$launcher" "$init" --pods "$CIB_DIR/pods.json" --out "$CIB_DIR/etc-mpi" "${launcher_args[@]}"
launcher_ssh="$CIB_DIR/pods/$launcher/home/.ssh"
if [[ $mode == generated ]]; then
  cp "$launcher_ssh/id_ed25519" "$secret/ssh-privatekey"; cp "$launcher_ssh/id_ed25519.pub" "$secret/ssh-publickey"
fi
chmod 444 "$secret"/*; chmod 555 "$secret"
for node in "${nodes[@]}"; do
  in_pod "$node" "$init" --role node --ssh-server openssh --ssh-secret "$secret"
  "$CIB" sshd "$node" "$CIB_DIR/pods/$node/home/.ssh/sshd_config"
done
for node in "${nodes[@]}"; do
  for name in "$node.$sub" "$node" "$("$CIB" ip "$node")"; do
    got=$(in_pod "$launcher" ssh "$name" hostname) || fail "ssh $name was refused"
    expect_eq "$got" "$node" "ssh $name"
  done
done
pass "$mode: the launcher reaches ${#nodes[@]} nodes with strict host key checking"

# A session's environment is not a client's to choose, but its locale: sshd_config accepts
# LANG and LC_* only, so an LD_PRELOAD sent with the session never reaches it.
got=$(in_pod "$launcher" ssh -o SetEnv="LD_PRELOAD=/tmp/x.so LC_TIME=C.UTF-8" "${nodes[0]}" \
  'echo "${LD_PRELOAD:-none} ${LC_TIME:-none}"') || fail "ssh with SetEnv was refused"
expect_eq "$got" "none C.UTF-8" "the variables a session was sent (LD_PRELOAD refused, LC_TIME taken)"
pass "$mode: sshd takes a session's locale and nothing else of its environment"

# A person's file copies: scp (SFTP, OpenSSH 9's default) and sftp through sshd's subsystem.
head -c 100000 /dev/urandom > "$CIB_DIR/payload"
in_pod "$launcher" scp -q "$CIB_DIR/payload" "${nodes[0]}:copied" || fail "scp (SFTP) to sshd failed"
in_pod "$launcher" sftp -q -b - "${nodes[0]}" <<<"get copied $CIB_DIR/back" >/dev/null || fail "sftp from sshd failed"
cmp -s "$CIB_DIR/payload" "$CIB_DIR/back" || fail "the file copied with scp and back with sftp differs"
pass "$mode: scp and sftp through sshd's sftp subsystem"

# A node whose sshd presents another host key must be refused, not trusted.
impostor=${nodes[0]}
ip netns pids "$("$CIB" ns "$impostor")" | xargs -r ps -o pid=,comm= -p | awk '$2 == "sshd" { print $1 }' | xargs -r kill
sleep 0.2
"$CIB" sshd "$impostor"   # the harness's own key, not the job's
if out=$(in_pod "$launcher" ssh "$impostor.$sub" hostname 2>&1); then fail "an impostor host key was accepted: $out"; fi
expect_contains "$out" "Host key verification failed" "impostor"
pass "$mode: an sshd with another host key is refused"
