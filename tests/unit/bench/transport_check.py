"""Checks kiln_bench_transport under mpirun on small sizes: over shared
memory (Open MPI's default on one machine), over loopback TCP and over UCX
(where the MPI has it) with 2 ranks, and over shared memory with 3 ranks
(the all-reduce only). Every
transfer must arrive intact, the reduced vectors must hold the sums
computed here independently, the byte counts must follow from the shapes,
and the timings must be positive, finite and consistent with the rates
printed beside them. Bad input must end with an error naming it.

usage: transport_check.py MPIEXEC BENCHMARK
"""
import json
import math
import subprocess
import sys

MPIEXEC, BENCH = sys.argv[1], sys.argv[2]
MPIRUN = [MPIEXEC, "--allow-run-as-root", "--oversubscribe"]
SIZES = [1024, 65536]
HIDDEN, ROWS = [8, 896], [1, 3]
KV_SHAPES = {"tiny": (2, 2, 4), "qwen2.5-0.5b": (24, 2, 64)}
BLOCK_TOKENS, STREAM_BLOCKS = 16, 3
# Repetitions of one operation each: on cores shared with other work, ranks
# that poll for messages can wait a scheduler tick per message, and the
# test's time must not grow with the operations a repetition calibrates to.
SMALL = {"--sizes": ",".join(f"{s // 1024}KiB" for s in SIZES),
         "--hidden": ",".join(map(str, HIDDEN)), "--rows": ",".join(map(str, ROWS)),
         "--kv-shapes": ",".join(f"{n}={l}x{h}x{d}" for n, (l, h, d) in KV_SHAPES.items()),
         "--stream-blocks": str(STREAM_BLOCKS), "--repeats": "3", "--min-repetition-ms": "0.001"}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def sane_time(summary, what):
    for key in ("median", "min", "max"):
        v = summary[key]
        assert math.isfinite(v) and 0 < v < 1e6, f"{what}: {key} {v} us is not a plausible time"
    assert summary["min"] <= summary["median"] <= summary["max"], f"{what}: {summary}"


def close(a, b, what):
    assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9), f"{what}: {a} != {b}"


def check(ranks, transport_flags, label, extra, optional=False):
    options = {**SMALL, **extra}
    cmd = MPIRUN + ["-np", str(ranks)] + transport_flags + [BENCH, "--json", "--label", label]
    cmd += [x for item in options.items() for x in item]
    rc, out, err = run(cmd)
    if optional and rc != 0 and "cannot be selected" in err:
        print(f"{label}: not offered by this MPI, skipped")
        return
    assert rc == 0, f"{' '.join(cmd)} failed ({rc}):\n{err}"
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    kinds = {}
    for r in records:
        kinds.setdefault(r["kind"], []).append(r)
    (head,) = kinds["run"]
    assert head["ranks"] == ranks and head["label"] == label, head
    assert "MPI" in head["mpi_library"], head

    pings = kinds.get("ping_pong", [])
    assert [p["bytes"] for p in pings] == (SIZES if options["--sizes"] else []), pings
    for p in pings:
        assert p["verified"], f"{label}: ping-pong of {p['bytes']} bytes arrived wrong"
        sane_time(p["one_way_us"], f"{label} ping-pong {p['bytes']}")
        close(p["bandwidth_gb_s"], p["bytes"] / (p["one_way_us"]["median"] * 1e-6) / 1e9, "ping-pong rate")

    reductions = kinds["allreduce"]
    assert [(a["hidden"], a["rows"]) for a in reductions] == [(h, r) for h in HIDDEN for r in ROWS]
    rank_sum = ranks * (ranks + 1) // 2
    for a in reductions:
        n = a["hidden"] * a["rows"]
        assert a["ranks"] == ranks and a["floats"] == n and a["bytes"] == 4 * n, a
        assert a["verified"], f"{label}: all-reduce {a['hidden']} x {a['rows']} summed wrong"
        # Rank r contributes (r + 1) x ((i mod 251) + 1) / 4 at element i.
        expected = sum((i % 251 + 1) * 0.25 * rank_sum for i in range(n))
        assert a["result_sum"] == expected, f"{label}: reduced sum {a['result_sum']}, expected {expected}"
        assert a["result_first"] == 0.25 * rank_sum, a
        sane_time(a["time_us"], f"{label} all-reduce {n}")
        close(a["algorithm_gb_s"], a["bytes"] / (a["time_us"]["median"] * 1e-6) / 1e9, "all-reduce rate")
        close(a["bus_gb_s"], a["algorithm_gb_s"] * 2 * (ranks - 1) / ranks, "bus rate")

    blocks = kinds.get("kv_block", [])
    assert [b["shape"] for b in blocks] == (list(KV_SHAPES) if options["--kv-shapes"] else []), blocks
    for b in blocks:
        layers, heads, dim = KV_SHAPES[b["shape"]]
        assert (b["layers"], b["kv_heads"], b["head_dim"]) == (layers, heads, dim), b
        assert b["block_bytes"] == 2 * layers * heads * dim * BLOCK_TOKENS * 2, b
        assert b["one_block_verified"] and b["stream_verified"], f"{label}: KV blocks of {b['shape']} arrived wrong"
        assert b["stream_blocks"] == STREAM_BLOCKS, b
        sane_time(b["one_block_us"], f"{label} KV block {b['shape']}")
        sane_time(b["stream_us_per_block"], f"{label} streamed KV blocks {b['shape']}")
        close(b["stream_gb_s"], b["block_bytes"] / (b["stream_us_per_block"]["median"] * 1e-6) / 1e9, "KV rate")
    print(f"{label}, {ranks} ranks: {len(pings)} ping-pongs, {len(reductions)} all-reduces, "
          f"{len(blocks)} KV shapes correct")


def check_refused(cmd, needle):
    rc, out, err = run(cmd)
    assert rc != 0 and needle in err, f"{' '.join(cmd)}: expected an error naming {needle!r}, got {rc}:\n{err}"


check(2, [], "shared memory", {})
check(2, ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"], "loopback TCP", {})
check(3, [], "shared memory", {"--sizes": "", "--kv-shapes": ""})
# UCX where Open MPI has its UCX PML (Debian's does), on UCX's own shared
# memory: Open MPI selects it for InfiniBand/RoCE devices only unless told
# otherwise (bench/transport.sh says more).
check(2, ["--mca", "pml", "ucx", "--mca", "pml_ucx_tls", "any", "--mca", "pml_ucx_devices", "any",
          "-x", "UCX_TLS=sm,self"], "UCX shared memory", {}, optional=True)
# Started without mpirun, the benchmark is a single rank (MPI's singleton
# start): it reads its options as under mpirun, then needs a second rank.
# (Under mpirun, a rank's failure costs seconds of mpirun's clean-up.)
check_refused([BENCH, "--sizes", "1KiB,12X"], "--sizes: '12X'")
check_refused([BENCH, "--kv-shapes", "a=1x2"], "--kv-shapes: 'a=1x2'")
check_refused([BENCH, "--rows", "1,0"], "--rows: '0'")
check_refused([BENCH], "needs at least 2 ranks")
print("transport benchmark: ok")
