#!/usr/bin/env python3
"""What ptxas made of each kernel: one row per PTX file.

    scripts/sass-summary.py [--keep DIR] FILE.ptx...

Columns: registers, spill bytes (ptxas -v), HGMMA, HMMA, LDL, STL, BAR, instructions, and
"exp||pv": for each rotated key-loop body (a `WARPGROUP.DEPBAR.LE gsb0, 0x1`, the wait for S_j
alone, up to the next `DEPBAR.LE gsb0, 0x0`, the wait for the pending P·V), how many MUFU.EX2
ptxas left between the two waits: the softmax exponentials that run while the tensor cores
compute the pending P·V (tgpu-overlap-softmax's intent). "0" means ptxas hoisted the P·V wait
above every exp2 and the overlap covers only the row max; "-" means no rotated body. "kloop":
the instructions of the consumers' key loop (every body of it; see key_loop), which compares
two forms of one kernel where the whole-kernel count does not (LLVM may merge the bodies' tails).

ptxas and cuobjdump come from $PTXAS / $CUOBJDUMP, else PATH, else /usr/local/cuda/bin. The
development machine's CUDA toolkit may lack cuobjdump; the one in a Triton wheel
(triton/backends/nvidia/bin) or in NVIDIA's `nvidia-cuda-cuobjdump` wheel (`pip download
--no-deps nvidia-cuda-cuobjdump`, unzip, nvidia/cu13/bin/cuobjdump) works without a GPU.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


def tool(name):
    env = os.environ.get(name.upper())
    if env:
        return env
    found = shutil.which(name)
    if found:
        return found
    fallback = os.path.join("/usr/local/cuda/bin", name)
    if os.path.exists(fallback):
        return fallback
    sys.exit(f"sass-summary: no {name} (set ${name.upper()} or put it on PATH)")


INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BACKWARD = re.compile(r"BRA\s+0x([0-9a-f]+)")


def key_loop(addresses, code):
    """The consumers' key loop: the largest range [target, branch] of a backward branch that
    holds HGMMA and MUFU.EX2 but no global store, TMA load or shared store (those put the range
    into the tile loop, or into a barrier retry placed after the code it returns to). Its
    instruction count covers every body of the loop (rotated and first, each way through the
    mask), so it compares forms of one kernel, not time a block."""
    best = 0
    for i, c in enumerate(code):
        m = BACKWARD.search(c)
        if not m or int(m.group(1), 16) >= addresses[i]:
            continue
        start = int(m.group(1), 16)
        body = [code[j] for j in range(len(code)) if start <= addresses[j] <= addresses[i]]
        has = lambda k: any(k in b for b in body)
        if has("HGMMA") and has("MUFU.EX2") and not (has("STG") or has("UTMALDG") or has("STS")):
            best = max(best, len(body))
    return best or "-"


def summarize(ptx, ptxas, cuobjdump, keep):
    target = re.search(r"^\.target\s+(sm_\w+)", open(ptx).read(), re.M)
    arch = target.group(1) if target else "sm_90a"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        info = subprocess.run([ptxas, f"-arch={arch}", "-v", ptx, "-o", cubin],
                              capture_output=True, text=True)
        if info.returncode != 0:
            return None, info.stderr.strip().splitlines()[-1:]
        listing = subprocess.run([cuobjdump, "--dump-sass", cubin], capture_output=True,
                                 text=True).stdout
    if keep:
        name = os.path.splitext(os.path.basename(ptx))[0]
        with open(os.path.join(keep, name + ".sass"), "w") as out:
            out.write(listing)
    regs = re.search(r"Used (\d+) registers", info.stderr)
    spills = re.search(r"(\d+) bytes spill stores", info.stderr)
    matches = [m for m in map(INSTRUCTION.match, listing.splitlines()) if m]
    addresses = [int(m.group(1), 16) for m in matches]
    code = [m.group(2) for m in matches]
    opcode = [re.sub(r"^@!?U?P\w+\s+", "", c).split()[0] if c else "" for c in code]

    def count(prefix):
        return sum(op.startswith(prefix) for op in opcode)

    overlapped = []
    for i, c in enumerate(code):
        if c.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x1"):
            for j in range(i + 1, len(code)):
                if code[j].startswith("WARPGROUP.DEPBAR.LE gsb0, 0x0"):
                    overlapped.append(sum(op == "MUFU.EX2" for op in opcode[i:j]))
                    break
    row = {
        "regs": regs.group(1) if regs else "?",
        "spill": spills.group(1) if spills else "?",
        "HGMMA": count("HGMMA"), "HMMA": count("HMMA"), "LDL": count("LDL"),
        "STL": count("STL"), "BAR": count("BAR"), "insts": len(code),
        "exp||pv": ",".join(map(str, overlapped)) if overlapped else "-",
        "kloop": key_loop(addresses, code),
    }
    return row, info.stderr.strip().splitlines()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ptx", nargs="+")
    parser.add_argument("--keep", metavar="DIR", help="write each listing to DIR/NAME.sass")
    args = parser.parse_args()
    ptxas, cuobjdump = tool("ptxas"), tool("cuobjdump")
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    columns = ["regs", "spill", "HGMMA", "HMMA", "LDL", "STL", "BAR", "insts", "exp||pv", "kloop"]
    print(f"{'kernel':40} " + " ".join(f"{c:>7}" for c in columns))
    failed = 0
    for ptx in args.ptx:
        row, notes = summarize(ptx, ptxas, cuobjdump, args.keep)
        name = os.path.splitext(ptx)[0]
        if row is None:
            failed += 1
            print(f"{name:40} ptxas failed: {' '.join(notes)}")
            continue
        print(f"{name:40} " + " ".join(f"{row[c]!s:>7}" for c in columns))
        for note in notes:
            if "Performance Loss" in note:
                print(f"{'':40} {note.strip()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
