#!/usr/bin/python3
# defines: cpu_per_line.py — runs a command and passes its output through, adding to every line that matches REGEX
# the CPU time (user + system, all threads, from /proc/<pid>/stat) the command used since the previous such line:
# the CPU cost of each logged training iteration of a program that only logs wall time (`lmforge train`).
#   usage: cpu_per_line.py REGEX COMMAND [ARG...]    (appends " | cpu-s since the previous line: X |")
import os
import re
import subprocess
import sys


def cpu_seconds(pid):
    # /proc/<pid>/stat: fields 14 and 15 (utime, stime) in clock ticks, after the ")" that ends the command name
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: cpu_per_line.py REGEX COMMAND [ARG...]")
    pattern = re.compile(sys.argv[1])
    proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, text=True, bufsize=1)
    last = 0.0
    for line in proc.stdout:
        line = line.rstrip("\n")
        if pattern.search(line):
            try:
                now = cpu_seconds(proc.pid)
            except OSError:  # the command has exited: its CPU time can no longer be read
                now = None
            if now is not None:
                line += f" cpu-s since the previous line: {now - last:.2f} |"
                last = now
        print(line, flush=True)
    sys.exit(proc.wait())


if __name__ == "__main__":
    main()
