#!/usr/bin/env python3
"""Ratios of per-configuration medians against a reference, with 90 % bootstrap intervals.

Reads lines `NAME: v1 v2 ...` (per-run values in repetition order, as scripts/bench-capture.sh prints
them) and prints, for every NAME but the reference (`idle`, else the first), the ratio of its median to
the reference's, the 5th-95th percentile of that ratio over 4,000 resamples of both sets, and the
median of the per-repetition ratios (repetitions ran interleaved, so a pair shares the machine's state).

    scripts/bench-capture.sh ... | scripts/ratio-interval.py
"""
import random
import statistics
import sys


def main() -> None:
    runs = {}
    for line in sys.stdin:
        name, sep, rest = line.strip().partition(":")
        if not sep or not rest.strip():
            continue
        try:
            values = [float(v) for v in rest.split()]
        except ValueError:
            continue
        runs[name.strip()] = values
    if len(runs) < 2:
        sys.exit("ratio-interval: need per-run values of two configurations or more")
    ref = "idle" if "idle" in runs else next(iter(runs))
    base = runs[ref]
    rng = random.Random(1)
    for name, values in runs.items():
        if name == ref:
            continue
        ratio = statistics.median(values) / statistics.median(base)
        boot = sorted(
            statistics.median(rng.choices(values, k=len(values)))
            / statistics.median(rng.choices(base, k=len(base)))
            for _ in range(4000)
        )
        paired = statistics.median(a / b for a, b in zip(values, base))
        print(
            f"{name} / {ref}: {ratio:.4f}x (90 % interval {boot[200]:.4f}-{boot[3799]:.4f}), "
            f"median per-repetition ratio {paired:.4f}x, {len(values)} runs"
        )


if __name__ == "__main__":
    main()
