#!/usr/bin/env bash
# mpi-init as a user runs it: outputs, modes and owners, re-runs that change no byte,
# Trainer's ECDSA P-521 PEM key, the node role, and every bad input: exit 64, 65 or 74, a message that
# names the input and the fix, and no half-written file. Also as a non-root uid.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
init="$TMPI_BUILD_DIR/bin/mpi-init"
work=$(mktemp -d); chmod 755 "$work"; trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mode() { stat -c %a "$1"; }
# expect_fail CODE NEEDLE CMD...: the command exits CODE and says NEEDLE on stderr
expect_fail() {
  local code=$1 needle=$2; shift 2
  local rc=0 err
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  [[ $rc == "$code" ]] || fail "expected exit $code from '$*', got $rc: $err"
  grep -qF -- "$needle" <<<"$err" || fail "expected '$needle' in: $err"
  echo "ok: exit $code: $err"
}

python3 "$here/make_pods.py" 3 --gpus 4 > "$work/pods.json"

# 1. A pod list: every output, with the modes the contracts say.
"$init" --pods "$work/pods.json" --out "$work/out" --ssh-dir "$work/ssh" 2> "$work/log"
grep -q "PRIVATE KEY" "$work/log" && fail "a private key reached the log"
expected=$'train-node-0-0.train slots=4\ntrain-node-0-1.train slots=4\ntrain-node-0-2.train slots=4'
[[ $(cat "$work/out/hostfile") == "$expected" ]] || fail "hostfile: $(cat "$work/out/hostfile")"
[[ $(cat "$work/out/hostfile.hydra") == "train-node-0-0.train:4"* ]] || fail "hydra hostfile"
[[ $(jq -r '.hosts | length' "$work/out/hosts.json") == 3 ]] || fail "hosts.json hosts"
[[ $(jq -r '.launcher.name' "$work/out/hosts.json") == train-launcher-0-0.train ]] || fail "hosts.json launcher"
[[ $(sh "$work/out/discover_hosts.sh" | head -n 1) == train-node-0-0.train:4 ]] || fail "discover_hosts.sh"
[[ $(mode "$work/ssh") == 700 ]] || fail "ssh dir mode $(mode "$work/ssh")"
[[ $(mode "$work/ssh/id_ed25519") == 600 ]] || fail "key mode"
[[ ! -e $work/ssh/authorized_keys && ! -e $work/ssh/sshd_config && ! -e $work/ssh/ssh_host_ed25519_key ]] ||
  fail "OpenSSH's sshd files, written for mpi-sshd"
[[ $(ssh-keygen -y -f "$work/ssh/id_ed25519" | cut -d' ' -f2) == $(cut -d' ' -f2 "$work/ssh/id_ed25519.pub") ]] ||
  fail "ssh-keygen -y does not match the .pub"
for host in train-launcher-0-0 train-node-0-0 train-node-0-2; do
  ssh-keygen -F "[$host.train]:2222" -f "$work/ssh/known_hosts" >/dev/null || fail "known_hosts lacks $host.train"
  ssh-keygen -F "[$host]:2222" -f "$work/ssh/known_hosts" >/dev/null || fail "known_hosts lacks $host"
done
grep -q "StrictHostKeyChecking yes" "$work/ssh/config" || fail "ssh config is not strict"
# Every host is pinned to the host key derived from the job key, which is not the job key.
host_key=$(cut -d' ' -f1,2 "$work/ssh/ssh_host_ed25519_key.pub")
[[ $host_key == "ssh-ed25519 "* && $host_key != "$(cut -d' ' -f1,2 "$work/ssh/id_ed25519.pub")" ]] ||
  fail "the host key is the job key, or not Ed25519: $host_key"
[[ $(cut -d' ' -f2- "$work/ssh/known_hosts" | sort -u) == "$host_key" ]] || fail "known_hosts pins another key than $host_key"
echo "ok: outputs, modes, known_hosts"

# 1b. Fewer slots than the pods' GPUs (Trainer's count from a TrainJob without the GPU in
# its resources): a warning that names both numbers and the fix; none when they agree.
err=$("$init" --pods "$work/pods.json" --slots 1 --out "$work/out-1" --ssh-dir "$work/ssh-1" 2>&1 >/dev/null)
grep -qF "host train-node-0-0.train has 1 slot(s) but its pod gives it 4 GPU(s) (nvidia.com/gpu), as do 2 more host(s)" <<<"$err" ||
  fail "no warning of 1 slot for 4 GPUs: $err"
grep -qF 'resources_per_node={"nvidia.com/gpu": 4}' <<<"$err" && grep -qF -- "--slots 4 (TMPI_SLOTS)" <<<"$err" ||
  fail "the warning does not say the fix: $err"
grep -q "warn" <<<"$err" || fail "not said as a warning: $err"
[[ $(head -n 1 "$work/out-1/hostfile") == "train-node-0-0.train slots=1" ]] || fail "--slots 1: $(cat "$work/out-1/hostfile")"
err=$("$init" --pods "$work/pods.json" --slots 4 --out "$work/out-4" --ssh-dir "$work/ssh-4" 2>&1 >/dev/null)
! grep -q "GPU(s)" <<<"$err" || fail "a warning where slots and GPUs agree: $err"
echo "ok: fewer slots than GPUs is warned of, with the fix"

# 2. A re-run changes no byte (and reuses the key).
sums() { (cd "$work" && sha256sum out/* ssh/*); }
before=$(sums)
"$init" --pods "$work/pods.json" --out "$work/out" --ssh-dir "$work/ssh" 2>/dev/null
[[ $(sums) == "$before" ]] || fail "a re-run changed the outputs"
echo "ok: re-run gives the same bytes"

# 3. Trainer's Secret: an ECDSA P-521 key in PEM form, mounted as id_rsa.
mkdir -p "$work/trainer-secret"
ssh-keygen -q -t ecdsa -b 521 -m PEM -N '' -f "$work/trainer-secret/id_rsa"
"$init" --hostfile <(printf 'train-node-0-0.train slots=1\n') --jobset train --out "$work/out-t" \
  --ssh-dir "$work/ssh-t" --ssh-secret "$work/trainer-secret" 2>/dev/null
[[ -f $work/ssh-t/id_ecdsa ]] || fail "Trainer's key should be installed as id_ecdsa"
[[ $(ssh-keygen -y -f "$work/ssh-t/id_ecdsa" | cut -d' ' -f1-2) == $(cut -d' ' -f1-2 "$work/trainer-secret/id_rsa.pub") ]] ||
  fail "the installed ECDSA key is not Trainer's"
# Its host key is Ed25519 too, derived from it: ssh-audit fails ecdsa-sha2-nistp521 as a host key.
grep -q "^\[train-node-0-0.train\]:2222.* ssh-ed25519 " "$work/ssh-t/known_hosts" || fail "known_hosts type"
echo "ok: Trainer's ECDSA P-521 PEM key"

# 4. The node role: identity from a kubernetes.io/ssh-auth Secret. At the defaults (mpi-sshd)
# the key and the client's config alone; for OpenSSH's sshd, an sshd config sshd accepts.
mkdir -p "$work/secret"
cp "$work/ssh/id_ed25519" "$work/secret/ssh-privatekey"; cp "$work/ssh/id_ed25519.pub" "$work/secret/ssh-publickey"
chmod 444 "$work/secret"/*
"$init" --role node --ssh-secret "$work/secret" --ssh-dir "$work/node-builtin" 2>/dev/null
[[ $(ls "$work/node-builtin" | xargs) == "config id_ed25519 id_ed25519.pub ssh_host_ed25519_key.pub" ]] ||
  fail "node files for mpi-sshd: $(ls "$work/node-builtin")"
cmp -s "$work/node-builtin/ssh_host_ed25519_key.pub" "$work/ssh/ssh_host_ed25519_key.pub" ||
  fail "the node and the launcher derive different host keys from one job key"
cmp -s "$work/node-builtin/id_ed25519" "$work/secret/ssh-privatekey" || fail "the node's key is not the Secret's"
"$init" --role node --ssh-server openssh --ssh-secret "$work/secret" --ssh-dir "$work/node-ssh" 2>/dev/null
[[ $(mode "$work/node-ssh/id_ed25519") == 600 ]] || fail "node key mode"
[[ $(mode "$work/node-ssh/authorized_keys") == 600 ]] || fail "authorized_keys mode"
cmp -s "$work/node-ssh/authorized_keys" "$work/ssh/id_ed25519.pub" || fail "node authorized_keys"
[[ $(mode "$work/node-ssh/ssh_host_ed25519_key") == 600 ]] || fail "host key mode"
[[ $(ssh-keygen -y -f "$work/node-ssh/ssh_host_ed25519_key" | cut -d' ' -f1,2) == "$host_key" ]] ||
  fail "sshd's host key is not the one known_hosts pins"
grep -qx "HostKey $work/node-ssh/ssh_host_ed25519_key" "$work/node-ssh/sshd_config" || fail "sshd's HostKey line"
# sshd -t needs its privilege separation folder, which only a started sshd service makes:
# a fresh machine where sshd never ran has none.
mkdir -p /run/sshd && chmod 755 /run/sshd
/usr/sbin/sshd -t -f "$work/node-ssh/sshd_config" || fail "sshd rejects the written config"
echo "ok: node role"

# 5. As a non-root uid with no passwd entry: for mpi-sshd (the default) no entry is needed
# and none is written; for OpenSSH refused without nss_wrapper (sshd could not run), then
# files owned by that uid, same modes, and nss_wrapper's passwd with its entry.
uid=4242
mkdir -p "$work/home" "$work/home-builtin"; chown "$uid:$uid" "$work/home" "$work/home-builtin"
setpriv --reuid $uid --regid $uid --clear-groups env HOME="$work/home-builtin" "$init" --role node --ssh-secret "$work/secret" 2>/dev/null ||
  fail "mpi-init --role node as uid $uid with no passwd entry, for mpi-sshd"
[[ $(stat -c '%u %a' "$work/home-builtin/.ssh/id_ed25519") == "$uid 600" && ! -e $work/home-builtin/.nss_wrapper ]] ||
  fail "for mpi-sshd as uid $uid: $(ls -la "$work/home-builtin" "$work/home-builtin/.ssh")"
expect_fail 64 "uid $uid has no passwd entry" setpriv --reuid $uid --regid $uid --clear-groups env HOME="$work/home" \
  "$init" --role node --ssh-server openssh --ssh-secret "$work/secret"
nss=(LD_PRELOAD=libnss_wrapper.so NSS_WRAPPER_PASSWD="$work/home/.nss_wrapper/passwd"
     NSS_WRAPPER_GROUP="$work/home/.nss_wrapper/group")
setpriv --reuid $uid --regid $uid --clear-groups env HOME="$work/home" "${nss[@]}" \
  "$init" --role node --ssh-server openssh --ssh-secret "$work/secret" 2>/dev/null
grep -qx "user$uid:x:$uid:$uid:trainer-mpi:$work/home:/bin/sh" "$work/home/.nss_wrapper/passwd" ||
  fail "nss_wrapper passwd: $(tail -n 2 "$work/home/.nss_wrapper/passwd")"
[[ $(env "${nss[@]}" id -un $uid) == "user$uid" ]] || fail "nss_wrapper does not resolve uid $uid"
grep -q "^SetEnv LD_PRELOAD=libnss_wrapper.so NSS_WRAPPER_GROUP=" "$work/home/.ssh/sshd_config" ||
  fail "sshd_config passes no nss_wrapper to its sessions"
[[ $(stat -c '%u %a' "$work/home/.ssh") == "$uid 700" ]] || fail "non-root .ssh: $(stat -c '%u %a' "$work/home/.ssh")"
[[ $(stat -c '%u %a' "$work/home/.ssh/id_ed25519") == "$uid 600" ]] || fail "non-root key owner or mode"
setpriv --reuid $uid --regid $uid --clear-groups env HOME="$work/home" "${nss[@]}" \
  "$init" --pods "$work/pods.json" --out "$work/home/mpi" 2>/dev/null
[[ $(stat -c %u "$work/home/mpi/hosts.json") == "$uid" ]] || fail "non-root hosts.json owner"
echo "ok: as uid $uid"

# 6. Bad input: exit 64 (a flag or variable), 65 (an input's content) or 74 (a file that
# cannot be read or written), the input and the fix named, and nothing written.
printf '{"items": [' > "$work/broken.json"
expect_fail 65 "broken.json: not valid JSON" "$init" --pods "$work/broken.json" --out "$work/bad1" --ssh-dir "$work/bad1"
printf 'a slots=2\nb slots=1\na slots=1\n' > "$work/dup"
expect_fail 65 "line 3: host a was already listed on line 1" "$init" --hostfile "$work/dup" --out "$work/bad2" --ssh-dir "$work/bad2"
printf 'a slots=0\n' > "$work/zero"
expect_fail 65 "slots must be 1 or more" "$init" --hostfile "$work/zero" --out "$work/bad3" --ssh-dir "$work/bad3"
expect_fail 64 "-1 is out of range: 1 to" "$init" --pods "$work/pods.json" --slots -1 --out "$work/bad3" --ssh-dir "$work/bad3"
jq '.items[1].spec.hostname = ""' "$work/pods.json" > "$work/nohost.json"
expect_fail 65 "has no spec.hostname" "$init" --pods "$work/nohost.json" --out "$work/bad4" --ssh-dir "$work/bad4"
mkdir -p "$work/empty-secret"
expect_fail 65 "no ssh-privatekey or id_rsa" "$init" --role node --ssh-secret "$work/empty-secret" --ssh-dir "$work/bad5"
printf 'not a key\n' > "$work/empty-secret/ssh-privatekey"
expect_fail 65 "not a private key" "$init" --role node --ssh-secret "$work/empty-secret" --ssh-dir "$work/bad5"
cp "$work/ssh/id_ed25519" "$work/locked-key"; chmod 000 "$work/locked-key"; mkdir -p "$work/locked"
mv "$work/locked-key" "$work/locked/ssh-privatekey"
expect_fail 74 "cannot read" setpriv --reuid $uid --regid $uid --clear-groups env HOME="$work/home" "${nss[@]}" \
  "$init" --role node --ssh-secret "$work/locked" --ssh-dir "$work/home/bad6"
expect_fail 74 "/proc/mpi" "$init" --pods "$work/pods.json" --out /proc/mpi --ssh-dir "$work/bad7"
expect_fail 64 "TMPI_SSH_PORT" env TMPI_SSH_PORT=twenty "$init" --pods "$work/pods.json" --out "$work/bad8"
expect_fail 65 "--jobset NAME" "$init" --pods <(python3 "$here/make_pods.py" 1 --other-jobset other) --out "$work/bad9" --ssh-dir "$work/bad9"
for dir in bad1 bad2 bad3 bad4 bad5 bad7 bad8 bad9; do
  [[ ! -e $work/$dir ]] || [[ -z $(ls -A "$work/$dir") ]] || fail "bad input left files in $dir: $(ls -A "$work/$dir")"
done
[[ ! -e $work/home/bad6 ]] || fail "unreadable Secret left files"
# An ssh folder this uid cannot own: refused before the first write, so no hostfile either.
mkdir -p "$work/root-owned-ssh"; chmod 0777 "$work/root-owned-ssh"
expect_fail 74 "cannot make it the 0700 folder" setpriv --reuid $uid --regid $uid --clear-groups env HOME="$work/home" \
  "${nss[@]}" "$init" --pods "$work/pods.json" --out "$work/home/bad10" --ssh-dir "$work/root-owned-ssh"
[[ ! -e $work/home/bad10 && -z $(ls -A "$work/root-owned-ssh") ]] || fail "a refused identity left outputs: $(ls -A "$work/home/bad10" "$work/root-owned-ssh" 2>&1)"
echo "ok: bad input"
echo "mpi-init cli: all passed"
