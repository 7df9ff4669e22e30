#!/usr/bin/python3
"""Compares two folders of .npy outputs (reference: onnxruntime's; test:
kiln's) and prints one table row per reference output:

    compare_npy.py REF_DIR TEST_DIR [--rel 1e-4] [--cos 0.9999] [--quiet]

A float output passes when
    max |test - ref| <= rel * max(1, max |ref|)   and   cosine(test, ref) >= cos
(NaN where the reference has NaN and infinities of the same sign where it has
them count as equal and are left out of both measures). Integer and bool
outputs must be equal. Every .npy in REF_DIR must exist in TEST_DIR with the
same shape and element type; extra files in TEST_DIR are listed, not judged.
Exit status: 0 when every output passes, 1 otherwise, 2 on bad arguments.
"""
import argparse
import math
import os
import sys

import numpy as np


def compare(ref, test, rel, cos_min):
    """Returns (ok, max_abs_ref, max_diff, tolerance, cosine, note)."""
    if ref.shape != test.shape:
        return False, None, None, None, None, f"shape {list(test.shape)} != {list(ref.shape)}"
    if ref.dtype != test.dtype:
        return False, None, None, None, None, f"dtype {test.dtype} != {ref.dtype}"
    if ref.size == 0:
        return True, 0.0, 0.0, 0.0, 1.0, "empty"
    if not np.issubdtype(ref.dtype, np.floating):
        diff = int(np.count_nonzero(ref != test))
        return diff == 0, None, None, None, None, "equal" if diff == 0 else f"{diff} elements differ"

    r = ref.astype(np.float64).ravel()
    t = test.astype(np.float64).ravel()
    # Non-finite values must sit in the same places with the same values.
    ref_nonfinite = ~np.isfinite(r)
    same_nonfinite = (np.isnan(r) & np.isnan(t)) | (np.isinf(r) & (r == t))
    if np.any(ref_nonfinite != same_nonfinite) or np.any(~np.isfinite(t) & ~ref_nonfinite):
        bad = int(np.count_nonzero((ref_nonfinite != same_nonfinite) | (~np.isfinite(t) & ~ref_nonfinite)))
        return False, None, None, None, None, f"{bad} non-finite values differ"
    finite = ~ref_nonfinite
    r, t = r[finite], t[finite]
    if r.size == 0:
        return True, 0.0, 0.0, 0.0, 1.0, "all non-finite, equal"
    max_ref = float(np.abs(r).max())
    max_diff = float(np.abs(t - r).max())
    tolerance = rel * max(1.0, max_ref)
    nr, nt = float(np.linalg.norm(r)), float(np.linalg.norm(t))
    if nr == 0.0 and nt == 0.0:
        cosine = 1.0
    elif nr == 0.0 or nt == 0.0:
        cosine = 0.0
    else:
        cosine = float(np.dot(r, t) / (nr * nt))
    ok = max_diff <= tolerance and cosine >= cos_min
    return ok, max_ref, max_diff, tolerance, cosine, ""


def fmt(x, width, spec):
    return f"{'-':>{width}}" if x is None else format(x, f"{width}{spec}")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ref_dir")
    parser.add_argument("test_dir")
    parser.add_argument("--rel", type=float, default=1e-4, help="relative tolerance (default 1e-4)")
    parser.add_argument("--cos", type=float, default=0.9999, help="minimum cosine (default 0.9999)")
    parser.add_argument("--quiet", action="store_true", help="print failing rows and the summary only")
    args = parser.parse_args(argv[1:])
    for d in (args.ref_dir, args.test_dir):
        if not os.path.isdir(d):
            print(f"compare_npy: {d} is not a folder", file=sys.stderr)
            return 2
    names = sorted(f for f in os.listdir(args.ref_dir) if f.endswith(".npy"))
    if not names:
        print(f"compare_npy: no .npy files in {args.ref_dir}", file=sys.stderr)
        return 2

    header = f"{'output':<40} {'shape':<18} {'max|ref|':>10} {'max|diff|':>10} {'tol':>9} {'cosine':>12}  result"
    print(header)
    failures = 0
    for name in names:
        test_path = os.path.join(args.test_dir, name)
        ref = np.load(os.path.join(args.ref_dir, name))
        if not os.path.exists(test_path):
            ok, row = False, (None, None, None, None, "missing in " + args.test_dir)
        else:
            ok, *row = compare(ref, np.load(test_path), args.rel, args.cos)
        failures += 0 if ok else 1
        if ok and args.quiet:
            continue
        max_ref, max_diff, tol, cosine, note = row
        cosine_text = "-" if cosine is None else ("%.8f" % cosine if math.isfinite(cosine) else str(cosine))
        print(f"{name[:-4]:<40} {str(list(ref.shape)):<18} {fmt(max_ref, 10, '.4g')} {fmt(max_diff, 10, '.3g')} "
              f"{fmt(tol, 9, '.2g')} {cosine_text:>12}  {'ok' if ok else 'FAIL'}{'  ' + note if note else ''}")
    extra = sorted(set(f for f in os.listdir(args.test_dir) if f.endswith(".npy")) - set(names))
    if extra:
        print(f"not in the reference (not judged): {', '.join(extra)}")
    print(f"{len(names) - failures} of {len(names)} outputs within max|diff| <= {args.rel:g} * max(1, max|ref|) "
          f"and cosine >= {args.cos:g}")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
