"""Alternating runs with and without speculation, for measure.py and
measure_draft.py: each run of one is followed by a run of the other, so
that the machine's slow minutes fall on both alike."""

import statistics


def alternate(run_plain, run_fast, runs):
    """Calls run_plain() and run_fast() alternately, `runs` times each; each
    returns (decode tokens/s, draft tokens accepted per pass, text).
    Returns the medians (plain rate, fast rate, accepted) and whether every
    pair of runs gave the same text."""
    plain, fast, accepted, same = [], [], [], True
    for _ in range(runs):
        rate, _, out_plain = run_plain()
        plain.append(rate)
        rate, acc, out_fast = run_fast()
        fast.append(rate)
        accepted.append(acc)
        same = same and out_plain == out_fast
    return statistics.median(plain), statistics.median(fast), statistics.median(accepted), same
