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
  deaf    like idle, but Enter is ignored (the text stays on the prompt line)
  deaf1   like idle, but the next Enter is ignored
  limit WHEN  the turn ends at a usage limit: Claude Code's notice ("You've hit your session
          limit · resets WHEN") and its limit menu; StopFailure(rate_limit) fires. A digit picks
          a menu option, an Enter picks the highlighted one; both close the menu and are
          recorded as submits "[menu] 1" / "[menu] enter"; other keys are ignored meanwhile
  resumed Claude Code's own auto-continue: a reply line, Notification(quota_auto_resume_fired)

A submitted "/clear" is Claude Code's: no UserPromptSubmit, the screen is emptied, and the
session goes on under a new id (a fresh uuid): SessionEnd with reason "clear" for the old id,
then SessionStart with source "clear" for the new one;
the hooks it fires from then on carry the new id. The new id is appended to RECORD.ids.

With FAKE_AGENT_HOOK set (a shell command) it fires Claude Code's hooks the way Claude Code
does, with a JSON payload on stdin for session FAKE_AGENT_SESSION: UserPromptSubmit when a line
is submitted, Stop when a turn ends (the mode leaves "busy"); each call is logged to RECORD.hooks. A Stop answered with
{"decision":"block","reason":...} goes on like Claude Code: the reason is recorded as a submit
(prefixed "[stop hook] ") and the next Stop says stop_hook_active.

Usage: fake_agent.py RECORD CONTROL [TYPED]   (TYPED: text already on the prompt line)
"""

import json
import os
import uuid
import select
import subprocess
import sys
import termios
import time
import tty

SPINNER = ["◐", "◑"]
RULE = "─" * 40


def fire(log_path, event, **fields):
    """Runs the hook command like Claude Code: payload on stdin, stdout read back. What it was
    given and what it answered (and said on stderr) is appended to log_path."""
    command = os.environ.get("FAKE_AGENT_HOOK")
    if not command:
        return ""
    payload = {"session_id": os.environ.get("FAKE_AGENT_SESSION", ""), "cwd": os.getcwd(),
               "transcript_path": "", "hook_event_name": event}
    payload.update(fields)
    done = subprocess.run(command, shell=True, input=json.dumps(payload).encode(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
    with open(log_path, "a") as log:
        log.write("%.3f\t%s\t%r\t%r\n" % (time.time(), json.dumps(payload), done.stdout, done.stderr))
    return done.stdout.decode("utf-8", "replace")


def main():
    record_path, control_path = sys.argv[1], sys.argv[2]
    out = sys.stdout
    history = ["fake agent ready"]
    typed = sys.argv[3] if len(sys.argv) > 3 else ""
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
        if mode == "menu":
            lines += ["What do you want to do?", "❯ 1. Stop and wait for limit to reset",
                      "  2. Upgrade your plan"]
        lines += ["", RULE, "❯\u00a0" + typed, RULE, "  ? for shortcuts"]
        out.write("\r\n".join(lines))
        title(("%s Fake Agent" % SPINNER[frame % 2]) if mode == "busy" else "✳ Fake Agent")
        out.flush()

    try:
        # The first frame already shows the starting mode (no idle title for a moment).
        try:
            with open(control_path) as f:
                first = f.read().strip()
            if first in ("idle", "busy", "dialog", "deaf", "deaf1"):
                mode = last_control = first
        except OSError:
            pass
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
                    was = mode
                    hit_limit = control.startswith("limit ")
                    if control == "work":
                        history.append("did some work at %.3f" % time.time())
                        mode = "idle"
                    elif hit_limit:
                        notice = "You\u2019ve hit your session limit \u00b7 resets " + control[6:]
                        history.append("  \u23bf  " + notice)
                        mode = "menu"
                        draw()
                        fire(record_path + ".hooks", "StopFailure", error="rate_limit",
                             last_assistant_message=notice)
                    elif control == "resumed":
                        history.append("\u25cf Resumed on my own at %.3f" % time.time())
                        mode = "idle"
                        draw()
                        fire(record_path + ".hooks", "Notification",
                             notification_type="quota_auto_resume_fired",
                             message="Resumed at usage limit reset")
                    elif control in ("idle", "busy", "dialog", "deaf", "deaf1"):
                        mode = control
                    draw()
                    active = False
                    while was == "busy" and mode != "busy" and not hit_limit:
                        answer = fire(record_path + ".hooks", "Stop", stop_hook_active=active)
                        try:
                            reason = json.loads(answer).get("reason") if answer.strip() else None
                        except ValueError:
                            reason = None
                        if not reason:
                            break
                        with open(record_path + ".submits", "a") as s:
                            s.write("%.3f\t[stop hook] %s\n" % (time.time(), reason))
                        history.append("[stop hook] " + reason)
                        draw()
                        active = True
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
                    if mode == "menu":
                        picked = ch if ch.isdigit() else "enter" if ch in "\r\n" else None
                        if picked:
                            with open(record_path + ".submits", "a") as s:
                                s.write("%.3f\t[menu] %s\n" % (time.time(), picked))
                            mode = "idle"
                        continue
                    if ch in "\r\n":
                        if mode in ("deaf", "deaf1"):
                            if mode == "deaf1":
                                mode = "idle"
                            continue
                        with open(record_path + ".submits", "a") as s:
                            s.write("%.3f\t%s\n" % (time.time(), typed))
                        if typed.strip() == "/clear":
                            typed = ""
                            history = ["fake agent ready"]
                            draw()
                            new_id = str(uuid.uuid4())
                            with open(record_path + ".ids", "a") as ids:
                                ids.write(new_id + "\n")
                            fire(record_path + ".hooks", "SessionEnd", reason="clear")
                            os.environ["FAKE_AGENT_SESSION"] = new_id
                            fire(record_path + ".hooks", "SessionStart", source="clear")
                            continue
                        history.append("> " + typed)
                        fire(record_path + ".hooks", "UserPromptSubmit", prompt=typed)
                        typed = ""
                    elif ch.isprintable():
                        typed += ch
                draw()
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


if __name__ == "__main__":
    main()
