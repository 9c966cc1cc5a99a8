#!/usr/bin/env python3
"""A scripted stand-in for Claude Code's first-run TUI, for the launcher's tests.

It draws the screens a fresh Claude Code shows (theme picker, security notes, folder-trust
dialog in one of its wordings, then the idle prompt), reads keys in raw mode, and behaves like
the real one where it matters to a launcher: keys within 150 ms of a screen's first render are
ignored (anti-typeahead guard), Enter on "No, exit" or Esc exits, digits do nothing on the
current wording. Every byte received is appended to --record; what happened (screens, keys
acted on, prompts submitted) is appended to --events, one line each.
"""

import argparse
import json
import os
import select
import sys
import termios
import time
import tty

GUARD_SECONDS = 0.15
RULE = "\u2500" * 80
CURSOR = "\u276f"
NBSP = "\u00a0"

WORDINGS = {
    # 2.1.332: unnumbered, "No" first and focused.
    "current": (["No, exit", "Yes, I trust this folder"], 0, 1),
    # about 2.1.69 to 2.1.2xx: numbered, "Yes" first and focused.
    "numbered-trust": (["1. Yes, I trust this folder", "2. No, exit"], 0, 0),
    # 2.0.x and older.
    "numbered-proceed": (["1. Yes, proceed", "2. No, exit"], 0, 0),
}


def write(text):
    """UTF-8 whatever the pane's locale says."""
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.flush()


class Tui:
    def __init__(self, args):
        self.args = args
        self.record = open(args.record, "ab", buffering=0)
        self.events = open(args.events, "a", buffering=1) if args.events else None
        self.rendered_at = 0.0
        self.pending = b""

    def event(self, text):
        if self.events:
            self.events.write(text + "\n")

    def render(self, lines, fresh=True):
        out = "\x1b[2J\x1b[H" + "\r\n".join(lines)
        write(out)
        if fresh:
            self.rendered_at = time.monotonic()

    def keys(self, timeout=None):
        """Yield keys (ENTER, UP, DOWN, ESC, or a character) as they arrive."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([0], [], [], wait)
            if not ready:
                return
            chunk = os.read(0, 4096)
            if not chunk:
                sys.exit(0)
            self.record.write(chunk)
            self.pending += chunk
            while self.pending:
                key, self.pending = self.split_key(self.pending)
                if key is None:
                    break
                if time.monotonic() - self.rendered_at < GUARD_SECONDS:
                    self.event("ignored %s" % key)
                    continue
                yield key

    @staticmethod
    def split_key(buf):
        for seq, name in ((b"\x1b[A", "UP"), (b"\x1b[B", "DOWN"), (b"\x1bOA", "UP"), (b"\x1bOB", "DOWN")):
            if buf.startswith(seq):
                return name, buf[len(seq):]
        if buf.startswith(b"\x1b"):
            if len(buf) >= 2 and buf[1:2] in (b"[", b"O"):
                if len(buf) < 3:
                    return None, buf
                return "ESCSEQ", buf[3:]
            return "ESC", buf[1:]
        if buf[:1] in (b"\r", b"\n"):
            return "ENTER", buf[1:]
        text = buf.decode("utf-8", "ignore")
        if not text:
            return None, buf
        ch = text[0]
        return ch, buf[len(ch.encode("utf-8")):]


def header():
    return ["Welcome to Fake Claude Code v0.0.0", "." * 58, ""]


def menu(options, selected):
    return [" %s %s" % (CURSOR if i == selected else " ", opt) for i, opt in enumerate(options)]


def enter_only(tui, name, lines):
    tui.event("screen %s" % name)
    tui.render(lines)
    for key in tui.keys():
        if key == "ENTER":
            tui.event("passed %s" % name)
            return


def trusted_in_config(path):
    if not path:
        return False
    try:
        with open(path) as f:
            config = json.load(f)
        return config["projects"][os.getcwd()]["hasTrustDialogAccepted"] is True
    except (OSError, ValueError, KeyError, TypeError):
        return False


def declined(tui, rc):
    tui.event("declined")
    write(
        "\r\n\r\nClaude Code didn't start because this folder isn't trusted.\r\n"
        "Run claude again and choose Yes, or run it in another folder.\r\n"
    )
    sys.exit(rc)


def trust_dialog(tui, wording):
    options, selected, yes = WORDINGS[wording]
    if wording == "numbered-proceed":
        body = [" Do you trust the files in this folder?", "", " " + os.getcwd(), "",
                " Claude Code may read, write, or execute files contained in this directory.", ""]
    else:
        body = [RULE, " Accessing workspace:", "", " " + os.getcwd(), "",
                " Quick safety check: Is this a project you created or one you trust?", "",
                " Claude Code'll be able to read, edit, and execute files here.", "", " Security guide", ""]
    footer = ["", " Enter to confirm \u00b7 Esc to cancel"]
    tui.event("screen trust %s" % wording)
    tui.render(body + menu(options, selected) + footer)
    for key in tui.keys():
        if key == "DOWN":
            selected = min(selected + 1, len(options) - 1)
        elif key == "UP":
            selected = max(selected - 1, 0)
        elif key == "ENTER":
            if selected == yes:
                tui.event("trusted")
                return
            declined(tui, 1)
        elif key == "ESC":
            declined(tui, 0)
        else:
            tui.event("inert %r" % key)
            continue
        tui.event("selected %s" % options[selected])
        tui.render(body + menu(options, selected) + footer, fresh=False)


def ready(tui):
    history = []
    draft = ""

    def draw(fresh):
        lines = [" \u2590\u259b\u2588\u2588\u2588\u259c\u258c   Fake Claude Code v0.0.0", " " + os.getcwd(), ""]
        lines += history
        lines += [RULE, CURSOR + NBSP + draft, RULE, "  ? for shortcuts"]
        tui.render(lines, fresh)

    tui.event("screen ready")
    draw(True)
    for key in tui.keys():
        if key == "ENTER":
            if draft:
                tui.event("submitted %s" % draft)
                history.append(CURSOR + " " + draft)
                history.append("")
            draft = ""
        elif len(key) == 1 and key.isprintable():
            draft += key
        draw(False)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", required=True)
    parser.add_argument("--events")
    parser.add_argument("--wording", choices=sorted(WORDINGS), default="current")
    parser.add_argument("--api-key", action="store_true")
    parser.add_argument("--connect-fail", action="store_true")
    parser.add_argument("--never-ready", action="store_true")
    parser.add_argument("--blank", type=float, default=0.5)
    parser.add_argument("--config")
    parser.add_argument("--sessions-dir")
    parser.add_argument("--session-id", default="00000000-fake-4000-8000-000000000000")
    args = parser.parse_args()

    old = termios.tcgetattr(0)
    tty.setraw(0)
    registry = None
    try:
        tui = Tui(args)
        if args.sessions_dir:
            registry = os.path.join(args.sessions_dir, "%d.json" % os.getpid())
            with open(registry, "w") as f:
                json.dump({"pid": os.getpid(), "sessionId": args.session_id, "cwd": os.getcwd(),
                           "status": "idle"}, f)
        if args.connect_fail:
            tui.render(header() + [" Unable to connect to Anthropic services", "",
                                   " Failed to connect to api.anthropic.com: ENOTFOUND"])
            time.sleep(0.3)
            sys.exit(1)
        if args.api_key:
            tui.event("screen api-key")
            tui.render(header() + [" Detected a custom API key in your environment", "",
                                   " Do you want to use this API key?", ""] + menu(["Yes", "No (recommended)"], 1))
            for key in tui.keys():
                tui.event("key on api-key screen %r" % key)
            return
        enter_only(tui, "theme", header() + [" Let's get started.", "",
                                             " Choose the text style that looks best with your terminal", ""]
                   + menu(["\u2714 Auto (match terminal)", "Dark mode", "Light mode"], 0))
        enter_only(tui, "security", header() + [" Security notes:", "", " 1. Claude can make mistakes.", "",
                                                " Press Enter to continue"])
        if trusted_in_config(args.config):
            tui.event("pre-trusted")
        else:
            trust_dialog(tui, args.wording)
        tui.render([""])
        for _ in tui.keys(timeout=args.blank):
            pass
        if args.never_ready:
            tui.event("screen never-ready")
            for _ in tui.keys():
                pass
        ready(tui)
    finally:
        if registry:
            try:
                os.unlink(registry)
            except OSError:
                pass
        termios.tcsetattr(0, termios.TCSADRAIN, old)


if __name__ == "__main__":
    main()
