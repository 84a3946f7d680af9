#!/usr/bin/env python3
"""A stranger against a pod's SSH server, with no job key (nodessh_stranger_test.sh).

Each subcommand is bounded in time and count, and targets only the address it is given:

  churn --target HOST:PORT --sources A,B,.. --loops N --seconds S [--max M]
      N loops per source address, each: connect, read the server's banner (or what comes
      within 1 s), close, at most 200 times a second; for S seconds or M connections in all
      (20000). No SSH beyond the banner. Prints "connections C".
  hold --target HOST:PORT --sources A,B,.. --per N --seconds S
      keeps N connections from each source open and idle (it reads, and sends nothing),
      opening a new one for each that the server closes, for S seconds. Prints "opened O
      closed C".
  methods --target HOST:PORT --method none|gssapi --tries N
      a key exchange (paramiko), then N login requests of that method (the first "none" is
      the one every client sends). Prints "closed after K" with the request after which the
      server closed the connection, or "open after N".
"""
import argparse
import selectors
import socket
import sys
import threading
import time

GSSAPI_KRB5_OID = bytes.fromhex("06092a864886f712010202")


def host_port(text):
    host, _, port = text.rpartition(":")
    return socket.gethostbyname(host), int(port)


def connect_from(source, target, timeout=2.0):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.bind((source, 0))
    sock.connect(target)
    return sock


def churn(args):
    target = host_port(args.target)
    deadline = time.monotonic() + args.seconds
    count = [0]
    lock = threading.Lock()

    def loop(source):
        while time.monotonic() < deadline:
            try:
                sock = connect_from(source, target, timeout=1.0)
                try:
                    sock.recv(256)
                except OSError:
                    pass
                sock.close()
            except OSError:
                time.sleep(0.01)  # refused at accept, or a penalty: the loop goes on
            with lock:
                count[0] += 1
                if count[0] >= args.max:
                    return
            time.sleep(0.005)  # at most 200 a second a loop: bounded, and the box's cores stay the job's

    threads = [threading.Thread(target=loop, args=(source,))
               for source in args.sources.split(",") for _ in range(args.loops)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"connections {count[0]}")


def hold(args):
    target = host_port(args.target)
    sources = args.sources.split(",")
    selector = selectors.DefaultSelector()
    opened = closed = 0
    deadline = time.monotonic() + args.seconds

    def open_one(source):
        nonlocal opened
        try:
            sock = connect_from(source, target)
        except OSError:
            return False
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, source)
        opened += 1
        return True

    for source in sources:
        for _ in range(args.per):
            open_one(source)
    while time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.1):
            try:
                data = key.fileobj.recv(4096)  # the server's banner; the stranger says nothing
            except OSError:
                data = b""
            if data:
                continue
            selector.unregister(key.fileobj)
            key.fileobj.close()
            closed += 1
            # At most 50 reopenings a second a source: the churn must not take the small
            # test machine's cores from what it attacks.
            time.sleep(0.02 / len(sources))
            open_one(key.data)
    print(f"opened {opened} closed {closed}")
    sys.stdout.flush()


def methods(args):
    import paramiko
    from paramiko.common import cMSG_USERAUTH_REQUEST

    def gssapi_request():
        message = paramiko.Message()
        message.add_byte(cMSG_USERAUTH_REQUEST)
        message.add_string("stranger")
        message.add_string("ssh-connection")
        message.add_string("gssapi-with-mic")
        message.add_int(1)
        message.add_string(GSSAPI_KRB5_OID)
        transport._send_message(message)  # no gssapi library is needed to ask

    transport = paramiko.Transport(host_port(args.target))
    transport.start_client(timeout=10)
    for sent in range(1, args.tries + 1):
        try:
            if args.method == "none" or sent == 1:  # the first asks for the ssh-userauth service too
                transport.auth_none("stranger")
            else:
                gssapi_request()
        except Exception:  # noqa: BLE001 - refused, or closed: is_active() below tells which
            pass
        time.sleep(0.3)
        if not transport.is_active():
            print(f"closed after {sent}")
            return
    print(f"open after {args.tries}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("churn")
    one.add_argument("--target", required=True)
    one.add_argument("--sources", required=True)
    one.add_argument("--loops", type=int, default=4)
    one.add_argument("--max", type=int, default=20000)
    one.add_argument("--seconds", type=float, required=True)
    one = commands.add_parser("hold")
    one.add_argument("--target", required=True)
    one.add_argument("--sources", required=True)
    one.add_argument("--per", type=int, required=True)
    one.add_argument("--seconds", type=float, required=True)
    one = commands.add_parser("methods")
    one.add_argument("--target", required=True)
    one.add_argument("--method", choices=["none", "gssapi"], required=True)
    one.add_argument("--tries", type=int, required=True)
    args = parser.parse_args()
    {"churn": churn, "hold": hold, "methods": methods}[args.command](args)


if __name__ == "__main__":
    main()
