#!/usr/bin/env bash
# The job key mpi-init makes, as every SSH implementation at hand reads it. Its private half
# must be in OpenSSH's exact format (PROTOCOL.key; openssh-portable sshkey.c,
# sshkey_private_to_blob2): the private section padded with 1, 2, 3, ... to the 8-byte block
# of cipher "none". libssh 0.10 pads to 16, and asyncssh refuses such a key ("Invalid
# OpenSSH private key"), so asyncssh reading it is the check that catches that; the layout is
# also parsed field by field here, and compared with the same key as ssh-keygen rewrites it.
# A key the user gives (a mounted Secret) is theirs: it is written as it came, byte for byte.
#
# paramiko and asyncssh are Debian's packages (scripts/install-deps.sh), for Debian's python.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
init="$TMPI_BUILD_DIR/bin/mpi-init"
debian_python=/usr/bin/python3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 "$here/make_pods.py" 2 > "$work/pods.json"
"$init" --pods "$work/pods.json" --out "$work/out" --ssh-dir "$work/ssh" --log-level warn
key="$work/ssh/id_ed25519"
public=$(cut -d' ' -f1,2 "$key.pub")

# 1. The layout, field by field: what OpenSSH writes for an unencrypted Ed25519 key.
"$debian_python" - "$key" "$public" <<'PY' || fail "the key's layout is not OpenSSH's"
import base64, struct, sys
text = open(sys.argv[1]).read()
begin, end = "-----BEGIN OPENSSH PRIVATE KEY-----\n", "-----END OPENSSH PRIVATE KEY-----\n"
assert text.startswith(begin) and text.endswith(end), "armour"
lines = text[len(begin):-len(end)].splitlines()
blob = base64.b64decode("".join(lines), validate=True)
at = 0
def take(n):
    global at
    assert at + n <= len(blob), "truncated"
    at += n
    return blob[at - n:at]
def string():
    return take(struct.unpack(">I", take(4))[0])
assert take(15) == b"openssh-key-v1\0", "magic"
assert (string(), string(), string()) == (b"none", b"none", b""), "cipher, kdf, kdf options"
assert struct.unpack(">I", take(4))[0] == 1, "one key"
public = string()
assert b"ssh-ed25519 " + base64.b64encode(public) == sys.argv[2].encode(), "public blob vs .pub"
section = string()
assert at == len(blob), "bytes after the private section"
blob, at = section, 0
check1, check2 = struct.unpack(">II", take(8))
assert check1 == check2, "check ints differ"
assert string() == b"ssh-ed25519", "key type"
pub = string()
assert string()[32:] == pub and len(pub) == 32, "private key is seed then public key"
assert public[-32:] == pub, "the private section's public key is the blob's"
comment, padding = string(), blob[at:]
assert len(section) % 8 == 0, f"private section of {len(section)} bytes, not a multiple of 8"
assert len(padding) < 8, f"{len(padding)} bytes of padding: OpenSSH pads to a block of 8"
assert padding == bytes(range(1, len(padding) + 1)), "padding is 1, 2, 3, ..."
assert comment == b"trainer-mpi", f"comment {comment}"
assert all(len(line) == 70 for line in lines[:-1]) and 0 < len(lines[-1]) <= 70, "base64 lines of 70"
print(f"ok: layout: private section {len(section)} bytes, {len(padding)} of padding")
PY

# 2. ssh-keygen: reads it, and rewriting it (a new passphrase, none) changes nothing but the
# check ints, which it draws anew: the same bytes as OpenSSH's own encoding of this key.
[[ $(ssh-keygen -y -f "$key" | cut -d' ' -f1,2) == "$public" ]] || fail "ssh-keygen -y does not match the .pub"
cp "$key" "$work/rewritten"
ssh-keygen -q -p -P '' -N '' -f "$work/rewritten" >/dev/null
blob_without_checks() {  # the decoded file, its two check ints (at bytes 98 to 105) zeroed
  sed '1d;$d' "$1" | base64 -d | "$debian_python" -c 'import sys; b = bytearray(sys.stdin.buffer.read()); b[98:106] = bytes(8); sys.stdout.buffer.write(b)' | sha256sum
}
[[ $(blob_without_checks "$key") == $(blob_without_checks "$work/rewritten") ]] ||
  fail "ssh-keygen writes this key otherwise: $(cat "$work/rewritten")"
[[ $(wc -c < "$key") == $(wc -c < "$work/rewritten") ]] || fail "ssh-keygen's armour differs"
echo "ok: ssh-keygen reads it, and writes the same bytes but for the check ints"

# 3. paramiko and asyncssh (which refuses a key padded beyond its block).
"$debian_python" -W ignore - "$key" "$public" <<'PY' || fail "paramiko or asyncssh refused the key"
import sys
import asyncssh, paramiko
path, public = sys.argv[1], sys.argv[2]
assert "ssh-ed25519 " + paramiko.Ed25519Key.from_private_key_file(path).get_base64() == public, "paramiko"
key = asyncssh.read_private_key(path)
assert key.export_public_key("openssh").decode().split()[:2] == public.split(), "asyncssh"
print(f"ok: paramiko {paramiko.__version__} and asyncssh {asyncssh.__version__} read it")
PY

# 4. libssh, as the job's programs read it: a re-run finds it in the ssh folder and keeps it.
err=$("$init" --pods "$work/pods.json" --out "$work/out" --ssh-dir "$work/ssh" 2>&1)
grep -q "reusing the job key already in" <<<"$err" || fail "libssh did not read the key back: $err"
[[ $(cut -d' ' -f1,2 "$key.pub") == "$public" ]] || fail "the re-run made another key"
echo "ok: libssh reads it back"

# 5. A key the user gives is theirs: written as it came, whichever tool made it.
mkdir "$work/secret"
ssh-keygen -q -t ed25519 -N '' -C "user's key" -f "$work/secret/ssh-privatekey"
"$init" --role node --ssh-secret "$work/secret" --ssh-dir "$work/node-ssh" --log-level warn
cmp -s "$work/secret/ssh-privatekey" "$work/node-ssh/id_ed25519" || fail "the user's key was rewritten"
echo "ok: a mounted key is written as it came"
echo "mpi-init key format: all passed"
