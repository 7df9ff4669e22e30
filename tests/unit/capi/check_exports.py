#!/usr/bin/env python3
"""Checks libkiln.so's dynamic symbols: every function kiln.h declares with
KILN_API is exported, and nothing else is (kiln's C++ internals stay hidden).
Usage: check_exports.py LIBKILN_SO KILN_H"""
import re
import subprocess
import sys


def main() -> int:
    library, header = sys.argv[1], sys.argv[2]
    text = open(header, encoding="utf-8").read()
    declared = set(re.findall(r"KILN_API\s+[^;{]*?\b(kiln_\w+)\s*\(", text))
    nm = subprocess.run(["nm", "-D", "--defined-only", library], check=True, capture_output=True, text=True)
    exported = {line.split()[-1].split("@")[0] for line in nm.stdout.splitlines() if line.strip()}
    problems = []
    if len(declared) < 30:
        problems.append(f"found only {len(declared)} KILN_API declarations in {header}")
    for name in sorted(declared - exported):
        problems.append(f"declared in kiln.h but not exported: {name}")
    for name in sorted(exported - declared):
        problems.append(f"exported but not part of kiln.h: {name}")
    for p in problems:
        print(p)
    if not problems:
        print(f"{len(declared)} C API functions exported, nothing else")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
