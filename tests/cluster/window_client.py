#!/usr/bin/python3
"""A client of mpi-sshd that holds the job key and does not keep to the SSH window
(RFC 4254, section 5.2), for nodessh_tools_test.sh; paramiko, driven below its public API.

  window_client.py beyond-window HOST PORT KEY   runs `sleep 60`, then sends 64 MiB to its
      stdin regardless of the window the server grants: prints "closed after N bytes" once
      the server has closed the connection, or "sent N bytes" if it never did.
  window_client.py stalled HOST PORT KEY          grants a window of 2 GiB, runs
      `cat /dev/zero`, prints "reading stopped" and stops itself (SIGSTOP): from then on
      nothing reads the connection, and the window lets the server send 2 GiB.

The server's identity is not what this client tests: it takes any host key.
"""
import os
import signal
import socket
import sys
import time

import paramiko


def connect(host, port, key_path):
    key = None
    for kind in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            key = kind.from_private_key_file(key_path)
            break
        except paramiko.SSHException:
            continue
    if key is None:
        sys.exit(f"window_client: {key_path}: no key paramiko reads")
    transport = paramiko.Transport(socket.create_connection((host, port), timeout=10))
    transport.connect(username="job", pkey=key)
    return transport


def beyond_window(transport):
    channel = transport.open_session()
    channel.exec_command("sleep 60")
    # paramiko's sender waits for the window here; this one takes whatever it asks for.
    channel._wait_for_send_window = lambda size: min(size, channel.out_max_packet_size - 64)
    chunk = b"\0" * 32000
    sent = 0
    deadline = time.monotonic() + 60
    while sent < 64 * 1024 * 1024 and time.monotonic() < deadline:
        if not transport.is_active():
            print(f"closed after {sent} bytes", flush=True)
            return
        try:
            sent += channel.send(chunk)
        except (OSError, EOFError, paramiko.SSHException):
            print(f"closed after {sent} bytes", flush=True)
            return
    for _ in range(100):  # what the server does with the last of it
        if not transport.is_active():
            print(f"closed after {sent} bytes", flush=True)
            return
        time.sleep(0.1)
    print(f"sent {sent} bytes", flush=True)


def stalled(transport):
    channel = transport.open_session(window_size=2**31, max_packet_size=32768)
    channel.exec_command("cat /dev/zero")
    time.sleep(0.5)
    print("reading stopped", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("beyond-window", "stalled"):
        sys.exit(__doc__)
    mode, host, port, key_path = sys.argv[1:]
    transport = connect(host, int(port), key_path)
    if mode == "beyond-window":
        beyond_window(transport)
    else:
        stalled(transport)


if __name__ == "__main__":
    main()
