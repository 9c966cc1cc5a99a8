#!/usr/bin/env python3
"""A scripted stand-in for the Claude Code TUI, for the nudger's real-tmux tests.

It draws a transcript area, a prompt box with a "❯ " input line, and sets the pane title the
way Claude Code does ("✳ ..." idle, "◐"/"◑" busy). Every byte it receives is appended to the
record file; every submitted line (Enter) is appended with a timestamp to "<record>.submits".

The mode is read from the control file (polled every 50 ms), one word per line:
  idle    quiet prompt, idle title, no output at all (the default)
  busy    a spinner line and a busy title, redrawn every 300 ms
  dialog  a permission dialog with a numbered option list, idle title, no further output
  work    print one line of output (activity), then behave as idle

Usage: fake_agent.py RECORD CONTROL
"""

import os
import select
import sys
import termios
import time
import tty

SPINNER = ["◐", "◑"]
RULE = "─" * 40


def main():
    record_path, control_path = sys.argv[1], sys.argv[2]
    out = sys.stdout
    history = ["fake agent ready"]
    typed = ""
    mode = "idle"
    last_control = None
    frame = 0
    next_spin = 0.0
    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    tty.setraw(fd)

    def title(text):
        out.write("\033]2;" + text + "\007")

    def draw():
        out.write("\033[H\033[2J")
        lines = list(history)
        if mode == "busy":
            lines.append("✻ Working… (esc to interrupt)" + "." * (frame % 3))
        if mode == "dialog":
            lines += ["Do you want to proceed?", "❯ 1. Yes", "  2. No"]
        lines += ["", RULE, "❯\u00a0" + typed, RULE, "  ? for shortcuts"]
        out.write("\r\n".join(lines))
        title(("%s Fake Agent" % SPINNER[frame % 2]) if mode == "busy" else "✳ Fake Agent")
        out.flush()

    try:
        draw()
        with open(record_path, "ab", buffering=0) as record:
            while True:
                try:
                    with open(control_path) as f:
                        control = f.read().strip()
                except OSError:
                    control = ""
                if control != last_control:
                    last_control = control
                    if control == "work":
                        history.append("did some work at %.3f" % time.time())
                        mode = "idle"
                    elif control in ("idle", "busy", "dialog"):
                        mode = control
                    draw()
                if mode == "busy" and time.time() >= next_spin:
                    frame += 1
                    next_spin = time.time() + 0.3
                    draw()
                ready, _, _ = select.select([fd], [], [], 0.05)
                if not ready:
                    continue
                data = os.read(fd, 4096)
                if not data:
                    return
                record.write(data)
                for ch in data.decode("utf-8", "replace"):
                    if ch in "\r\n":
                        with open(record_path + ".submits", "a") as s:
                            s.write("%.3f\t%s\n" % (time.time(), typed))
                        history.append("> " + typed)
                        typed = ""
                    elif ch.isprintable():
                        typed += ch
                draw()
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


if __name__ == "__main__":
    main()
