#!/usr/bin/env python3
"""pty_session.py: a person at a terminal, for the cluster tests: runs a program on a pty of a
given size, types into it, waits for what it should print, and changes the window's size, as a
terminal emulator does (TIOCSWINSZ on the master: the kernel sends SIGWINCH to the program in
the foreground).

Design: a short script of steps, each one argument, run in order; the first that fails ends
the run with exit 1 and prints the whole transcript (escaped), so a failure shows what the
person would have seen. Every wait is bounded (--timeout, per step); the program is killed at
the end whatever happened, and its exit status is printed last as "pty_session: exit N".

usage: pty_session.py [--rows R --cols C] [--timeout S] STEP... -- PROGRAM ARGS...
  send:TEXT      type TEXT (\\n, \\r and \\x03 as escapes: a Ctrl-C is \\x03)
  expect:REGEX   wait until the transcript since the last expect matches REGEX
  resize:RxC     set the window to R rows and C columns
  pause:S        wait S seconds, reading what comes
  eof            wait for the program to end
"""
import argparse
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import fcntl
import time


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Session:
    def __init__(self, argv, rows, cols):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.execvp(argv[0], argv)
            finally:
                os._exit(127)
        set_size(self.fd, rows, cols)
        self.transcript = b""
        self.mark = 0  # where the next expect starts looking

    def read_for(self, seconds):
        """Reads what comes within `seconds`; False once the program's side is closed."""
        ready, _, _ = select.select([self.fd], [], [], seconds)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: every holder of the pty's other side has closed it
            return False
        self.transcript += data
        return bool(data)

    def drain(self):
        """Reads what the pty still holds, until nothing more comes within 50 ms (1 s at most)."""
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline and select.select([self.fd], [], [], 0.05)[0]:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            self.transcript += data

    def expect(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern.encode())
        while True:
            found = regex.search(self.transcript, self.mark)
            if found:
                self.mark = found.end()
                return True
            left = deadline - time.monotonic()
            if left <= 0 or not self.read_for(min(left, 0.2)):
                return bool(regex.search(self.transcript, self.mark))

    def wait_end(self, timeout):
        """The program's exit status once it has ended, reading what it printed meanwhile (a
        process it left behind may hold the pty open: its end is the program's, not the pty's)."""
        deadline = time.monotonic() + timeout
        open_ = True
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.pid = None
                self.drain()
                return os.waitstatus_to_exitcode(status)
            if open_:
                open_ = self.read_for(0.05)
            else:
                time.sleep(0.05)
        return None

    def end(self):
        if self.pid:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


def unescape(text):
    return text.encode().decode("unicode_escape")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=24)
    parser.add_argument("--cols", type=int, default=80)
    parser.add_argument("--timeout", type=float, default=20)
    parser.add_argument("steps", nargs="*")
    args, program = parser.parse_args(sys.argv[1:sys.argv.index("--")]), sys.argv[sys.argv.index("--") + 1:]
    session = Session(program, args.rows, args.cols)
    failed, status = None, None
    try:
        for step in args.steps:
            kind, _, value = step.partition(":")
            if kind == "send":
                os.write(session.fd, unescape(value).encode())
            elif kind == "expect":
                if not session.expect(value, args.timeout):
                    failed = f"no {value!r} within {args.timeout} s"
                    break
            elif kind == "resize":
                rows, cols = (int(n) for n in value.split("x"))
                set_size(session.fd, rows, cols)
            elif kind == "pause":
                deadline = time.monotonic() + float(value)
                while time.monotonic() < deadline and session.read_for(0.05):
                    pass
            elif kind == "eof":
                status = session.wait_end(args.timeout)
                if status is None:
                    failed = f"the program did not end within {args.timeout} s"
                    break
            else:
                failed = f"unknown step {step!r}"
                break
    finally:
        session.end()
    print(session.transcript.decode(errors="backslashreplace"))
    if failed:
        print(f"pty_session: {failed}", file=sys.stderr)
        return 1
    print(f"pty_session: exit {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
