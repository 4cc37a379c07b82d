#!/usr/bin/env python3
"""Splits Nsight Compute's warp-state samples of one kernel by how often each instruction ran.

Reads the SASS source page that `scripts/gpu-run.sh ncu-source` exports
(`ncu -i REPORT --page source --csv --print-source sass`): one row an instruction, with its
address, text, samples and execution count. Instructions that ran equally often belong to one
phase: the key loop runs tiles x consumer warps x iterations times, a tile's own code (the
peeled first and last key blocks, the epilogue, the tile index) tiles x consumer warps times,
the producer's per-block code tiles x key blocks, the prologue once a warp. Backward branches
do not delimit these in a persistent kernel (ptxas interleaves the loops' bodies), counts do.

  python3 scripts/ncu-source-phases.py ncu-source-tilefuse.csv [--top 12] [--show COUNT]

Prints the execution counts holding the most samples (count, instructions, samples, share, the
opcodes holding most of them) and, with --show COUNT, that group's instructions with their
samples and main stall reasons: where a tile's fixed cost (tile-cost-fit.py) goes.
"""
import argparse
import collections
import csv
import sys


def number(text):
    try:
        return int(float((text or "0").replace(",", "")))
    except ValueError:
        return 0


def read_rows(path):
    with open(path, newline="") as f:
        lines = [line for line in f if line.strip()]
    # The page starts with the kernel's name; the header is the line that begins "Address".
    start = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))
    rows = []
    for r in csv.DictReader(lines[start:]):
        try:
            r["addr"] = int(r["Address"], 16)
        except (KeyError, ValueError):
            continue
        r["samples"] = number(r.get("Warp Stall Sampling (All Samples)"))
        r["executed"] = number(r.get("Instructions Executed"))
        rows.append(r)
    return rows


def opcode(text):
    parts = [p for p in text.split() if not p.startswith("@")]
    return parts[0].split(".")[0] if parts else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--show", type=int, help="list the instructions executed this many times")
    args = ap.parse_args()
    rows = read_rows(args.csv)
    if not rows:
        sys.exit(f"{args.csv}: no instruction rows")
    total = sum(r["samples"] for r in rows) or 1
    groups = collections.defaultdict(list)
    for r in rows:
        groups[r["executed"]].append(r)
    print(f"{args.csv}: {len(rows)} instructions, {total} samples")
    ranked = sorted(groups.items(), key=lambda g: -sum(r["samples"] for r in g[1]))
    for executed, members in ranked[:args.top]:
        samples = sum(r["samples"] for r in members)
        ops = collections.Counter()
        for r in members:
            ops[opcode(r["Source"])] += r["samples"]
        top = ", ".join(f"{o} {s}" for o, s in ops.most_common(4))
        print(f"  executed {executed:10d}: {len(members):5d} instructions {samples:8d} samples "
              f"({100 * samples / total:5.1f}%)  {top}")
    if args.show is None:
        return
    for r in groups.get(args.show, []):
        reasons = sorted(((number(v), k) for k, v in r.items()
                          if k.startswith("stall_") and "Not Issued" not in k), reverse=True)
        why = ", ".join(f"{k[6:]} {v}" for v, k in reasons[:2] if v)
        print(f"  {r['addr']:#x} {r['samples']:6d}  {r['Source'][:64]:64s} {why}")


if __name__ == "__main__":
    main()
