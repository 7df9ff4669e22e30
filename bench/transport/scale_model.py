"""The distributed modes on paper: the tables of docs/distributed.md.

Communication volume per token of tensor parallelism, pipeline parallelism
and the prefill/decode split for three published shapes, and an alpha-beta
model of decoding latency and throughput at 8, 64 and 512 nodes on two
stated networks. With the JSON lines of bench/transport.sh, it also fits
alpha and beta to this machine's ping-pongs and sets the model's all-reduce
against the measured one at 2 ranks.

usage: scale_model.py [TRANSPORT_RESULTS.jsonl]
"""
import json
import math
import sys

# The shapes `kiln inspect --preset NAME` prints (the published configs).
MODELS = {
    "Qwen2.5-0.5B": dict(layers=24, hidden=896, heads=14, kv_heads=2, head_dim=64, vocab=151936,
                         params=494_032_768, active=494_032_768, tied=True, experts=0, top_k=0, expert_params=0),
    "Llama-3-8B": dict(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, vocab=128256,
                       params=8_030_261_248, active=8_030_261_248, tied=False, experts=0, top_k=0, expert_params=0),
    # 128 experts of 3 x 2048 x 768 weights a layer, 8 chosen per token.
    "Qwen3-30B-A3B": dict(layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, vocab=151936,
                          params=30_532_122_624, active=3_353_032_704, tied=False, experts=128, top_k=8,
                          expert_params=3 * 2048 * 768),
}

# The node: one socket of a 64-core Zen 4 EPYC (the family of the machine
# measured here). Weights stream at 80% of 12 channels of DDR5-4800
# (460.8 GB/s); matrix products reach half of the bf16 dot-product peak
# `kiln bench roofline` measures on one core here (228 GFLOP/s) on each of
# 64 cores.
NODE_BANDWIDTH = 0.8 * 460.8e9
NODE_FLOPS = 64 * 228e9 / 2

NETWORKS = {
    "100 Gb/s Ethernet": dict(alpha=5e-6, beta=12.5e9),
    "400 Gb/s InfiniBand": dict(alpha=2e-6, beta=50e9),
}
NODE_COUNTS = [8, 64, 512]
ACTIVATION_BYTES = 4  # kiln's matmul outputs and residual stream are fp32
KV_BYTES = 2          # bf16 KV cache
WEIGHT_BYTES = 2      # bf16 weights
CONTEXT = 1024        # tokens each decoding sequence attends to
BATCH_PER_NODE = 64   # sequences each node decodes at once in the throughput figures


def kv_bytes_per_token(m):
    return 2 * m["layers"] * m["kv_heads"] * m["head_dim"] * KV_BYTES


def tp_bytes_per_token(m):
    """Two all-reduces of the hidden state per layer."""
    return 2 * m["layers"] * m["hidden"] * ACTIVATION_BYTES


def pp_bytes_per_token(m):
    """One activation per token across each stage boundary."""
    return m["hidden"] * ACTIVATION_BYTES


def weight_bytes_per_step(m, batch):
    """Weights a decoding step of `batch` sequences reads: all but the
    embedding table (one row each), and for a mixture only the experts some
    sequence chose (expected distinct experts of batch x top_k uniform draws)."""
    total = m["params"] - (0 if m["tied"] else m["vocab"] * m["hidden"])
    if m["experts"]:
        all_experts = m["layers"] * m["experts"] * m["expert_params"]
        touched = m["experts"] * (1 - (1 - m["top_k"] / m["experts"]) ** batch)
        total = total - all_experts + m["layers"] * touched * m["expert_params"]
    return total * WEIGHT_BYTES


def flops_per_token(m, context):
    """2 x the parameters a token multiplies (not the embedding lookup), and
    attention's QK and PV over `context` keys."""
    dense = m["active"] - (0 if m["tied"] else m["vocab"] * m["hidden"])
    return 2 * dense + 4 * m["layers"] * m["heads"] * m["head_dim"] * context


def compute_time(m, batch, share):
    """One decoding step of `batch` sequences on `share` of the model (a
    node's slice), at the node's roofline: weights and KV read, or the
    arithmetic, whichever takes longer."""
    read = (weight_bytes_per_step(m, batch) + batch * CONTEXT * kv_bytes_per_token(m)) * share
    return max(read / NODE_BANDWIDTH, batch * flops_per_token(m, CONTEXT) * share / NODE_FLOPS)


def allreduce_time(n_bytes, nodes, net):
    """The cheaper of a ring (2(N-1) steps of n/N bytes) and recursive
    doubling (log2 N steps of all n bytes), which MPI picks between by size."""
    if nodes == 1:
        return 0.0
    a, b = net["alpha"], net["beta"]
    ring = 2 * (nodes - 1) * a + 2 * (nodes - 1) / nodes * n_bytes / b
    doubling = math.ceil(math.log2(nodes)) * (a + n_bytes / b)
    return min(ring, doubling)


def ring_allreduce_time(n_bytes, nodes, net):
    a, b = net["alpha"], net["beta"]
    return 2 * (nodes - 1) * a + 2 * (nodes - 1) / nodes * n_bytes / b


def send_time(n_bytes, net):
    return net["alpha"] + n_bytes / net["beta"]


def tensor_parallel(m, degree, batch, net, ring_only=False):
    """A decoding step over `degree` nodes: each holds 1/degree of every
    layer, and two all-reduces of batch x hidden fp32 values a layer."""
    reduce = ring_allreduce_time if ring_only else allreduce_time
    comm = 2 * m["layers"] * reduce(batch * m["hidden"] * ACTIVATION_BYTES, degree, net)
    return compute_time(m, batch, 1 / degree) + comm


def pipeline_stage_time(m, stages, batch, net):
    """One micro-batch of `batch` sequences through one of `stages` stages,
    and its activations sent to the next."""
    return compute_time(m, batch, 1 / stages) + send_time(batch * m["hidden"] * ACTIVATION_BYTES, net)


def best(options):
    return min(options, key=lambda o: o[0])


def layouts(m, nodes, net):
    """Per mode, at `nodes` nodes: (per-token latency at one sequence, the
    layout that gives it, cluster tokens/s with BATCH_PER_NODE sequences a
    node, its layout). Each mode is used as far as the shape allows (tensor
    parallelism up to the head count, a pipeline up to the layer count) and
    the nodes left over are replicas (data parallelism: `kiln router`)."""
    rows = {}
    one = compute_time(m, 1, 1.0)
    dp_step = compute_time(m, BATCH_PER_NODE, 1.0)
    rows["replicas (router)"] = (one, "1 node each", nodes * BATCH_PER_NODE / dp_step, f"{nodes} x 1")
    # Tensor parallel degrees: powers of two up to the heads.
    degrees = [d for d in (2 ** i for i in range(0, 12)) if d <= min(nodes, m["heads"])]
    lat = best([(tensor_parallel(m, d, 1, net), d) for d in degrees])
    thr = max(((nodes // d) * d * BATCH_PER_NODE / tensor_parallel(m, d, d * BATCH_PER_NODE, net), d)
              for d in degrees if d > 1)
    rows["tensor parallel"] = (lat[0], f"TP {lat[1]}", thr[0], f"{nodes // thr[1]} x TP {thr[1]}")
    stage_counts = [s for s in (2 ** i for i in range(1, 12)) if s <= min(nodes, m["layers"])]
    # A sequence's tokens pass every stage in turn: latency is the whole
    # model's compute plus a send per boundary. Throughput: `stages`
    # micro-batches in flight, one leaving per stage time.
    lat = best([(s * compute_time(m, 1, 1 / s) + (s - 1) * send_time(m["hidden"] * ACTIVATION_BYTES, net), s)
                for s in stage_counts])
    thr = max(((nodes // s) * BATCH_PER_NODE / pipeline_stage_time(m, s, BATCH_PER_NODE, net), s)
              for s in stage_counts)
    rows["pipeline"] = (lat[0], f"PP {lat[1]}", thr[0], f"{nodes // thr[1]} x PP {thr[1]}")
    return rows


def kib(n):
    return f"{n / 1024:,.1f} KiB"


def volume_table():
    print("| model | TP: all-reduced per token (2 x layers x hidden x 4 B) | PP: sent per token per stage boundary"
          " (hidden x 4 B) | P/D: KV per prompt token (2 x layers x kv_heads x head_dim x 2 B) | KV of a 16-token block |")
    print("|---|---|---|---|---|")
    for name, m in MODELS.items():
        print(f"| {name} | {kib(tp_bytes_per_token(m))} | {kib(pp_bytes_per_token(m))} | "
              f"{kib(kv_bytes_per_token(m))} | {kib(16 * kv_bytes_per_token(m))} |")


def scale_tables():
    for net_name, net in NETWORKS.items():
        print(f"\n#### {net_name} (alpha {net['alpha'] * 1e6:g} us, beta {net['beta'] / 1e9:g} GB/s)\n")
        print("| model | mode | " + " | ".join(f"{n} nodes: ms/token (layout); tokens/s (layout)" for n in NODE_COUNTS)
              + " |")
        print("|---|---|" + "---|" * len(NODE_COUNTS))
        for name, m in MODELS.items():
            per_node = {n: layouts(m, n, net) for n in NODE_COUNTS}
            for mode in per_node[NODE_COUNTS[0]]:
                cells = []
                for n in NODE_COUNTS:
                    lat, lat_layout, thr, thr_layout = per_node[n][mode]
                    cells.append(f"{lat * 1e3:.2f} ({lat_layout}); {thr:,.0f} ({thr_layout})")
                print(f"| {name} | {mode} | " + " | ".join(cells) + " |")


def tp_breakdown():
    """Where tensor parallelism stops cutting latency: one sequence's step
    at each degree, its communication, and that communication were every
    all-reduce a ring."""
    print("| model | network | " + " | ".join(f"TP {d}" for d in (1, 2, 4, 8, 16, 32)) + " |")
    print("|---|---|" + "---|" * 6)
    for name, m in MODELS.items():
        for net_name, net in NETWORKS.items():
            cells = []
            for d in (1, 2, 4, 8, 16, 32):
                if d > m["heads"]:
                    cells.append("-")
                    continue
                comp = compute_time(m, 1, 1 / d)
                comm = 2 * m["layers"] * allreduce_time(m["hidden"] * ACTIVATION_BYTES, d, net)
                ring = 2 * m["layers"] * ring_allreduce_time(m["hidden"] * ACTIVATION_BYTES, d, net) if d > 1 else 0
                cells.append(f"{(comp + comm) * 1e3:.2f} ({comm * 1e3:.2f}; ring {ring * 1e3:.2f})")
            print(f"| {name} | {net_name} | " + " | ".join(cells) + " |")


def pd_table():
    """A 1,024-token prompt's KV cache shipped from a prefill node to a
    decoding node, against the prefill's own compute time."""
    prompt = 1024
    print("| model | KV of a 1,024-token prompt | prefill compute (node roofline) | "
          + " | ".join(f"shipped over {n}" for n in NETWORKS) + " | node FLOP/s where 100 GbE stops keeping up |")
    print("|---|---|---|" + "---|" * len(NETWORKS) + "---|")
    for name, m in MODELS.items():
        kv = prompt * kv_bytes_per_token(m)
        # Prefill's attention is over half the prompt on average.
        prefill = prompt * flops_per_token(m, prompt // 2) / NODE_FLOPS
        # Its 64 blocks streamed back to back: one latency, then the link's rate.
        ship = [send_time(kv, net) for net in NETWORKS.values()]
        e100 = NETWORKS["100 Gb/s Ethernet"]
        breakeven = flops_per_token(m, prompt // 2) * e100["beta"] / kv_bytes_per_token(m)
        print(f"| {name} | {kv / 2**20:,.1f} MiB | {prefill * 1e3:,.0f} ms | "
              + " | ".join(f"{s * 1e3:.2f} ms ({100 * s / prefill:.2f}%)" for s in ship)
              + f" | {breakeven / 1e15:.1f} PFLOP/s |")


def measured_tables(path):
    records = [json.loads(line) for line in open(path) if line.strip()]
    labels = list(dict.fromkeys(r["label"] for r in records if r["kind"] == "run"))
    print("| transport | alpha (1 KiB one-way) | beta (best of >= 1 MiB) | "
          "all-reduce 8192 x 1 measured / modelled | 8192 x 64 | 896 x 512 |")
    print("|---|---|---|---|---|---|")
    for label in labels:
        pings = {r["bytes"]: r["one_way_us"]["median"] * 1e-6 for r in records
                 if r["kind"] == "ping_pong" and r["label"] == label}
        alpha = pings[1024]
        beta = max(b / (t - alpha) for b, t in pings.items() if b >= 2**20)
        net = dict(alpha=alpha, beta=beta)
        cells = []
        for hidden, rows in ((8192, 1), (8192, 64), (896, 512)):
            (r,) = [r for r in records if r["kind"] == "allreduce" and r["label"] == label
                    and r["hidden"] == hidden and r["rows"] == rows]
            measured = r["time_us"]["median"]
            modelled = allreduce_time(r["bytes"], r["ranks"], net) * 1e6
            cells.append(f"{measured:,.0f} / {modelled:,.0f} us")
        print(f"| {label} | {alpha * 1e6:.2f} us | {beta / 1e9:.2f} GB/s | " + " | ".join(cells) + " |")
    print("\n| transport | " + " | ".join(f"{n}: 1 block / streamed per block / 1,024-token prompt" for n in MODELS)
          + " |")
    print("|---|" + "---|" * len(MODELS))
    shapes = {"Qwen2.5-0.5B": "qwen2.5-0.5b", "Llama-3-8B": "llama-3-8b", "Qwen3-30B-A3B": "qwen3-30b-a3b"}
    for label in labels:
        cells = []
        for name in MODELS:
            found = [r for r in records if r["kind"] == "kv_block" and r["label"] == label
                     and r["shape"] == shapes[name]]
            if not found:
                cells.append("-")
                continue
            r = found[0]
            per_block = r["stream_us_per_block"]["median"]
            cells.append(f"{r['one_block_us']['median']:,.0f} us / {per_block:,.0f} us / "
                         f"{per_block * 1024 / r['block_tokens'] / 1e3:,.1f} ms")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    print(f"node: {NODE_BANDWIDTH / 1e9:.0f} GB/s, {NODE_FLOPS / 1e12:.1f} TFLOP/s; context {CONTEXT}, "
          f"{BATCH_PER_NODE} sequences a node for throughput\n")
    print("### Bytes per token\n")
    volume_table()
    print("\n### Tensor parallelism, one sequence: ms per token (of which communication)\n")
    tp_breakdown()
    print("\n### Decoding at 8, 64 and 512 nodes")
    scale_tables()
    print("\n### Prefill/decode split\n")
    pd_table()
    if len(sys.argv) > 1:
        print("\n### Measured here against the model (2 ranks)\n")
        measured_tables(sys.argv[1])
