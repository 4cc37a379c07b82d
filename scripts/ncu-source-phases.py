#!/usr/bin/env python3
"""Splits Nsight Compute's warp-state samples of one kernel into the key loop and the rest.

Reads the SASS source page that `scripts/gpu-run.sh ncu-source` exports
(`ncu -i REPORT --page source --csv --print-source sass`): one row an instruction, its address,
its text and its samples. A backward branch closes a loop [target, branch]; the loops holding a
warpgroup MMA (HGMMA) and no other such loop are the key loops (the consumers' mainloop, each
rotated or peeled copy), loops holding bulk tensor copies (UTMALDG) and no HGMMA are the
producer's. Everything else is a tile's fixed cost: the prologue (Q's wait, the first Q·Kᵀ and
softmax), the epilogue (the last P·V, O's normalization and store), the scheduler.

  python3 scripts/ncu-source-phases.py ncu-source-tilefuse.csv [--top 30]

Prints the share of samples in each phase and the instructions outside the key loops that hold
the most samples, with their stall reasons: the per-tile cost that tile-cost-fit.py prices in
key blocks, located.
"""
import argparse
import csv
import re
import sys


def parse_int(text):
    text = (text or "").strip().replace(",", "")
    if not text:
        return 0
    try:
        return int(float(text))
    except ValueError:
        return 0


def read_rows(path):
    """The instruction rows of the page: (address, text, samples, not-issued, reasons)."""
    with open(path, newline="") as f:
        lines = [l for l in f if l.strip()]
    # The page may start with lines naming the kernel; the header is the first with "Address".
    start = next(i for i, l in enumerate(lines) if "Address" in l and "Source" in l)
    reader = csv.DictReader(lines[start:])
    cols = reader.fieldnames
    all_col = next(c for c in cols if "Sampling" in c and "All" in c)
    not_issued_col = next((c for c in cols if "Sampling" in c and "Not" in c), None)
    reason_cols = [c for c in cols if c.startswith("stall_") or c.startswith("smsp__pcsamp")]
    rows = []
    for r in reader:
        addr_text = (r.get("Address") or "").strip()
        try:
            addr = int(addr_text, 16)
        except ValueError:
            continue  # a kernel's title or a summary row
        reasons = {c: parse_int(r.get(c)) for c in reason_cols}
        rows.append((addr, (r.get("Source") or "").strip(), parse_int(r.get(all_col)),
                     parse_int(r.get(not_issued_col)) if not_issued_col else 0, reasons))
    rows.sort()
    return rows


def opcode(text):
    parts = text.split()
    if parts and parts[0].startswith("@"):
        parts = parts[1:]
    return parts[0].split(".")[0] if parts else ""


def loops(rows):
    """[lo, hi] of each backward branch, in addresses of the page."""
    addrs = [a for a, *_ in rows]
    lo_addr, hi_addr = addrs[0], addrs[-1]
    found = []
    for addr, text, *_ in rows:
        if opcode(text) not in ("BRA", "BRX"):
            continue
        for m in re.findall(r"0x[0-9a-fA-F]+", text):
            target = int(m, 16)
            if not lo_addr <= target <= hi_addr:
                target += lo_addr  # printed as an offset from the function's start
            if lo_addr <= target < addr:
                found.append((target, addr))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    rows = read_rows(args.csv)
    if not rows:
        sys.exit(f"{args.csv}: no instruction rows")
    total = sum(r[2] for r in rows) or 1

    def holds(loop, op):
        return any(loop[0] <= a <= loop[1] and opcode(t) == op for a, t, *_ in rows)

    mma_loops = [l for l in loops(rows) if holds(l, "HGMMA")]
    key = [l for l in mma_loops
           if not any(o != l and l[0] <= o[0] and o[1] <= l[1] for o in mma_loops)]
    producer = [l for l in loops(rows) if holds(l, "UTMALDG") and not holds(l, "HGMMA")]
    producer = [l for l in producer
                if not any(o != l and o[0] <= l[0] and l[1] <= o[1] for o in producer)]

    def phase(addr):
        if any(lo <= addr <= hi for lo, hi in key):
            return "key loop"
        if any(lo <= addr <= hi for lo, hi in producer):
            return "producer loop"
        return "rest"

    by_phase = {}
    for addr, text, samples, not_issued, _ in rows:
        p = by_phase.setdefault(phase(addr), [0, 0, 0])
        p[0] += samples
        p[1] += not_issued
        p[2] += 1
    print(f"{args.csv}: {len(rows)} instructions, {total} samples")
    for lo, hi in key:
        n = sum(1 for a, *_ in rows if lo <= a <= hi)
        s = sum(r[2] for r in rows if lo <= r[0] <= hi)
        print(f"  key loop {lo:#x}-{hi:#x}: {n} instructions, {s} samples ({100 * s / total:.1f}%)")
    for name, (s, ni, n) in sorted(by_phase.items()):
        print(f"  {name:14s} {n:6d} instructions {s:9d} samples ({100 * s / total:5.1f}%), "
              f"not issued {ni}")
    print(f"Instructions outside the key and producer loops, by samples (top {args.top}):")
    rest = sorted((r for r in rows if phase(r[0]) == "rest"), key=lambda r: -r[2])
    for addr, text, samples, _, reasons in rest[:args.top]:
        top = sorted(((v, k) for k, v in reasons.items() if v), reverse=True)[:3]
        why = ", ".join(f"{k.replace('stall_', '')} {v}" for v, k in top)
        print(f"  {addr:#8x} {samples:7d} ({100 * samples / total:4.1f}%)  {text[:60]:60s} {why}")


if __name__ == "__main__":
    main()
