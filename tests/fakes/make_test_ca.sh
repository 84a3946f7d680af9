#!/usr/bin/env bash
# make_test_ca.sh DIR: a CA made for one test run, and a certificate that it signs for
# 127.0.0.1 (and localhost), for the fake HTTPS servers in this folder: DIR/ca.crt,
# ca.key, server.crt, server.key. P-256 keys, valid one day. With a second argument NAME,
# also DIR/NAME.crt and NAME.key: another CA that signs nothing (an untrusted server's).
set -euo pipefail
dir=$1
mkdir -p "$dir"
new_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/$1.key" -out "$dir/$1.crt" \
    -days 1 -subj "/CN=fake-$1" 2>/dev/null
}
new_ca ca
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/server.key" -out "$dir/server.csr" \
  -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$dir/san"
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -out "$dir/server.crt" -days 1 -extfile "$dir/san" 2>/dev/null
if [[ -n ${2:-} ]]; then new_ca "$2"; fi
