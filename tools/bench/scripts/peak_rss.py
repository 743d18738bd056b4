#!/usr/bin/python3
"""Run a command and report its peak resident memory (getrusage of the waited-for child: ru_maxrss, the largest
RSS it reached), its wall time and the machine's load average before and after (for the large-corpus measurements; GNU time is
not installed here). Standard library only.

Usage: peak_rss.py [--json OUT.json] -- COMMAND [ARGS...]
Prints one line on stderr: "peak_rss_mib=... wall_s=... load_before=... load_after=... rc=..."; exits with the
command's exit code.
"""
import json
import os
import resource
import subprocess
import sys
import time


def main():
    args = sys.argv[1:]
    out = None
    if args[:1] == ["--json"]:
        out, args = args[1], args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit(__doc__)
    load_before = os.getloadavg()
    t0 = time.monotonic()
    rc = subprocess.call(args)
    wall = time.monotonic() - t0
    load_after = os.getloadavg()
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    rec = {"command": args, "rc": rc, "peak_rss_mib": round(peak_mib, 1), "wall_s": round(wall, 1),
           "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
           "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    print(f"peak_rss_mib={peak_mib:.1f} wall_s={wall:.1f} load_before={load_before[0]:.2f} "
          f"load_after={load_after[0]:.2f} rc={rc}", file=sys.stderr)
    if out:
        with open(out, "w") as f:
            json.dump(rec, f, indent=1)
    sys.exit(rc)


if __name__ == "__main__":
    main()
