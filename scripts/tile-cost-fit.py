#!/usr/bin/env python3
"""A tile's fixed cost, fitted from a bench.py JSON (docs/perf.md, thirty-fourth session).

bench.py keeps B * N and H * D constant, so at a head dim every row of one mask has the same
number of (batch, head, row block) tiles and only their length changes. Fitting

    time = tiles * (a + b * key_blocks)

to two lengths of one implementation gives a / b: what a tile costs beyond its key loop, in key
blocks of `--block-n` keys. A kernel whose boundaries cost nothing has a / b near 0. (The fit
cannot tell a per-tile cost from anything else that differs between the two lengths, L2
locality among them.)

    scripts/tile-cost-fit.py docs/bench/FILE.json [--short 4096 --long 16384]
        [--block-n 64=128,96=160,128=176,192=112,256=80] [--causal]
"""
import argparse
import json


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench_json")
    parser.add_argument("--short", type=int, default=4096, help="the shorter N")
    parser.add_argument("--long", type=int, default=16384, help="the longer N")
    parser.add_argument("--block-n", default="64=128,96=160,128=176,192=112,256=80",
                        help="key block per head dim (the defaults' full-mask tiles)")
    parser.add_argument("--causal", action="store_true", help="the causal rows (else full)")
    args = parser.parse_args()
    block_n = {int(k): int(v) for k, v in (item.split("=") for item in args.block_n.split(","))}
    report = json.load(open(args.bench_json))
    rows = {}
    for r in report["results"]:
        if bool(r["causal"]) == args.causal:
            rows[(r["head_dim"], r["N"])] = r["tflops"]
    print(f"{report.get('device', '?')}, {report.get('date', '?')}: "
          f"{'causal' if args.causal else 'full'} rows, N = {args.short} against {args.long}")
    print(f"{'head dim':>8} {'impl':>14} {'short/long':>10} {'a / b (key blocks a tile)':>26}")
    for head_dim in sorted({d for d, _ in rows}):
        short, long_ = rows.get((head_dim, args.short)), rows.get((head_dim, args.long))
        if not short or not long_ or head_dim not in block_n:
            continue
        # Under a causal mask a tile averages half the key blocks; the ratio of lengths is kept.
        n_short = args.short / block_n[head_dim]
        n_long = args.long / block_n[head_dim]
        for impl in short:
            if impl not in long_ or not short[impl] or not long_[impl]:
                continue
            # Throughput ~ n / (a + b n) per tile: R = short / long = n_s (a + b n_l) / (n_l (a + b n_s)).
            ratio = short[impl] / long_[impl]
            denominator = ratio * n_long - n_short
            fixed = (n_long * n_short * (1 - ratio)) / denominator if denominator else float("nan")
            print(f"{head_dim:>8} {impl:>14} {ratio:>10.3f} {fixed:>26.2f}")


if __name__ == "__main__":
    main()
