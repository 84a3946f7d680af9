#!/usr/bin/env python3
"""A stranger on the pod network, for the fault matrix's attack rows (attacks_test.sh).

It holds no job key (but in `insider`, which plays a key holder on the wrong pod). It does
what anyone who reaches a pod can: open connections, read the packets that pass its
interface, send what it read again, and answer in place of the coordinator when it sits on
the path. Each is a subcommand:

  flood  --target HOST:PORT --sources A,B,.. --per N --seconds S
      holds N idle keep-alive connections from each source address (one GET /healthz each,
      then silence), and opens a new one for each that the server closes (at most
      --reopen-rate a second, so that the churn does not take the small test machine's cores
      from the job it attacks), for S seconds. Prints "opened O closed C" at the end.
  sniff  --iface IF --port P --path PATH --contains TEXT --out FILE [--seconds S]
      reads the TCP segments to port P off IF (a raw packet socket), puts each connection's
      bytes back in order, and writes the first whole HTTP request to PATH whose body holds
      TEXT to FILE (written whole, then renamed), and its sender's address to FILE.from.
      Exits 1 if none came in S seconds.
  replay --target HOST:PORT --request FILE
      sends FILE's bytes as they were captured and prints the answer's status, how long it
      took ("12ms") and its body.
  on-path --port P --to HOST:PORT --forge PATH [--mark M] --log FILE
      sits on a node's path to the coordinator (a NAT rule sends the node's requests to port
      P): it passes every request on to HOST:PORT and its answer back, but answers PATH
      itself, without the key: a 403 first, then a well-formed "start" (every field of the
      real answer) with a proof of its own making. Its own connections carry mark M.
  insider --request FILE --key KEYFILE --out FILE
      a key holder's forgery: a captured rank report made into an exit (code 1) with a fresh
      nonce, signed with the job key (as rendezvous/protocol.h signs), written to FILE, for
      `replay` to send from another host's pod than the rank's.

IPv4 only: the cluster in a box's default family, where these rows run.
"""
import argparse
import hashlib
import hmac
import json
import os
import resource
import selectors
import socket
import struct
import sys
import time




def host_port(text):
    host, _, port = text.rpartition(":")
    return host, int(port)


def flood(args):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    target = (socket.gethostbyname(host_port(args.target)[0]), host_port(args.target)[1])
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"
    sel = selectors.DefaultSelector()
    opened = closed = 0

    def open_one(source):
        nonlocal opened
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((source, 0))
        sock.setblocking(False)
        sock.connect_ex(target)
        sel.register(sock, selectors.EVENT_WRITE, [source, False])
        opened += 1

    for source in args.sources.split(","):
        for _ in range(args.per):
            open_one(source)
    end = time.monotonic() + args.seconds
    to_reopen, last_reopen = [], time.monotonic()
    while time.monotonic() < end:
        for key, _ in sel.select(timeout=0.05):
            sock, (source, asked) = key.fileobj, key.data
            if not asked:  # connected (or refused): one request, then silence
                try:
                    sock.send(request)
                    sel.modify(sock, selectors.EVENT_READ, [source, True])
                    continue
                except OSError:
                    pass
            else:
                try:
                    if sock.recv(65536):
                        continue  # the answer to our one request; the connection stays
                except OSError:
                    pass
            sel.unregister(sock)
            sock.close()
            closed += 1
            to_reopen.append(source)
        budget = int((time.monotonic() - last_reopen) * args.reopen_rate)
        if budget > 0:
            last_reopen = time.monotonic()
            for source in to_reopen[:budget]:
                open_one(source)
            del to_reopen[:budget]
    print(f"opened {opened} closed {closed}", flush=True)


def tcp_segments(raw):
    """(source, source port, destination port, sequence, payload) of an IPv4 TCP frame, or None."""
    if len(raw) < 34 or raw[12:14] != b"\x08\x00":
        return None
    ip = raw[14:]
    header = (ip[0] & 0x0F) * 4
    if ip[9] != 6:
        return None
    total = struct.unpack("!H", ip[2:4])[0]
    tcp = ip[header:total]
    if len(tcp) < 20:
        return None
    sport, dport, seq = struct.unpack("!HHI", tcp[:8])
    return socket.inet_ntoa(ip[12:16]), sport, dport, seq, tcp[(tcp[12] >> 4) * 4 :]


def whole_requests(stream):
    """The complete HTTP messages (requests, or answers with a Content-Length) at the start of
    a connection's bytes."""
    while True:
        end = stream.find(b"\r\n\r\n")
        if end < 0:
            return
        length = 0
        for line in stream[:end].split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        if len(stream) < end + 4 + length:
            return
        yield stream[: end + 4 + length]
        stream = stream[end + 4 + length :]


def sniff(args):
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    sock.bind((args.iface, 0))
    sock.settimeout(0.5)
    flows = {}  # (source, port) -> {sequence: payload}
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        try:
            segment = tcp_segments(sock.recv(65535))
        except socket.timeout:
            continue
        if segment is None or segment[2] != args.port or not segment[4]:
            continue
        source, sport, _, seq, payload = segment
        pieces = flows.setdefault((source, sport), {})
        pieces[seq] = payload
        ordered, stream, next_seq = sorted(pieces), b"", None
        for s in ordered:  # the bytes in order, up to the first gap
            if next_seq is not None and s != next_seq:
                if s < next_seq:
                    continue
                break
            stream += pieces[s]
            next_seq = s + len(pieces[s])
        for request in whole_requests(stream):
            head, _, body = request.partition(b"\r\n\r\n")
            if head.startswith(b"POST " + args.path.encode() + b" ") and args.contains.encode() in body:
                with open(args.out + ".from", "w") as out:
                    out.write(source + "\n")
                with open(args.out + ".part", "wb") as out:
                    out.write(request)
                os.rename(args.out + ".part", args.out)
                return 0
    print(f"sniff: no request to {args.path} holding {args.contains!r} in {args.seconds} s", file=sys.stderr)
    return 1


def replay(args):
    with open(args.request, "rb") as f:
        request = f.read()
    began = time.monotonic()
    with socket.create_connection(host_port(args.target), timeout=5) as sock:
        sock.sendall(request)
        answer = b""
        while not any(whole_requests(answer)):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    took_ms = int((time.monotonic() - began) * 1000)
    print(head.split(b" ")[1].decode(), f"{took_ms}ms", body.decode(errors="replace"))


def insider(args):
    """A key holder's own report, made from a captured one of another host's rank."""
    with open(args.request, "rb") as f:
        head, _, body = f.read().partition(b"\r\n\r\n")
    with open(args.key) as f:
        job_key = "".join(f.read().split())
    key = hmac.new(job_key.encode(), b"trainer-mpi rendezvous v1", hashlib.sha256).digest()
    message = json.loads(body)
    message.pop("proof", None)
    message.update(event="exit", code=1, tail="a failure made up on another pod", nonce=os.urandom(16).hex())
    canonical = json.dumps(message, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    message["proof"] = hmac.new(key, ("rank|" + canonical).encode(), hashlib.sha256).hexdigest()
    body = json.dumps(message, separators=(",", ":")).encode()
    lines = [l for l in head.split(b"\r\n") if not l.lower().startswith(b"content-length:")]
    with open(args.out, "wb") as f:
        f.write(b"\r\n".join(lines) + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def read_request(conn):
    """One whole HTTP request off conn, or b"" if it closed first."""
    data = b""
    while not any(whole_requests(data)):
        chunk = conn.recv(65536)
        if not chunk:
            return b""
        data += chunk
    return next(whole_requests(data))


def forward(request, target, mark):
    """The request sent on to the real server (our own socket marked, so that the NAT rule
    that brought the node's requests here lets ours pass), and its whole answer."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, mark)
        sock.settimeout(5)
        sock.connect(target)
        head, _, body = request.partition(b"\r\n\r\n")
        lines = [l for l in head.split(b"\r\n") if not l.lower().startswith(b"connection:")]
        sock.sendall(b"\r\n".join(lines) + b"\r\nConnection: close\r\n\r\n" + body)
        answer = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return answer
            answer += chunk


def on_path(args):
    target = (socket.gethostbyname(host_port(args.to)[0]), host_port(args.to)[1])
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", args.port))
    server.listen(256)
    forged = 0
    with open(args.log, "a", buffering=1) as log:
        while True:
            conn, peer = server.accept()
            with conn:
                conn.settimeout(5)
                try:
                    request = read_request(conn)
                    if not request:
                        continue
                    path = request.split(b" ")[1].decode(errors="replace")
                    if path != args.forge:
                        conn.sendall(forward(request, target, args.mark))
                        log.write(f"{peer[0]} {path} forwarded\n")
                        continue
                    # The forged answer: a refusal first, then a well-formed "start" whose
                    # proof is the stranger's own (it has no key to make the real one).
                    if forged == 0:
                        status, body = "403 Forbidden", {"error": "bad proof", "proof": "0" * 64}
                    else:
                        status, body = "200 OK", {"decision": "start", "reason": "", "proof": "5eed" * 16}
                    forged += 1
                    text = json.dumps(body).encode()
                    conn.sendall(b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: " + str(len(text)).encode() + b"\r\nConnection: close\r\n\r\n"
                                 + text)
                    log.write(f"{peer[0]} {path} forged {status}\n")
                except OSError as error:
                    log.write(f"{peer[0]} dropped: {error}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("flood")
    p.add_argument("--target", required=True)
    p.add_argument("--sources", required=True)
    p.add_argument("--per", type=int, default=240)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--reopen-rate", type=float, default=200)
    p = sub.add_parser("sniff")
    for name in ("--iface", "--path", "--contains", "--out"):
        p.add_argument(name, required=True)
    p.add_argument("--port", type=int, default=29410)
    p.add_argument("--seconds", type=float, default=30)
    p = sub.add_parser("replay")
    p.add_argument("--target", required=True)
    p.add_argument("--request", required=True)
    p = sub.add_parser("insider")
    for name in ("--request", "--key", "--out"):
        p.add_argument(name, required=True)
    p = sub.add_parser("on-path")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--to", required=True)
    p.add_argument("--forge", default="/v1/may-start")
    p.add_argument("--mark", type=int, default=0x7E57)
    p.add_argument("--log", required=True)
    args = parser.parse_args()
    handler = {"flood": flood, "sniff": sniff, "replay": replay, "on-path": on_path, "insider": insider}
    sys.exit(handler[args.command](args) or 0)


if __name__ == "__main__":
    main()
