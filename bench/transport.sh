#!/bin/sh
# Transport costs on this machine (docs/distributed.md): kiln_bench_transport
# between 2 ranks over each transport Open MPI offers on one machine, one
# after the other: shared memory (the vader BTL, its default), loopback TCP
# (the ob1 PML over the tcp BTL), and UCX over shared memory and over TCP.
# Open MPI 4.1 selects its UCX PML only on InfiniBand/RoCE devices (mlx*) by
# default, so the UCX runs widen pml_ucx_tls and pml_ucx_devices and let
# UCX_TLS pick UCX's own transport. Tables go to stdout, one JSON object per
# measurement to $OUT (default BUILD_DIR/transport-results.jsonl). Arguments
# go to the benchmark (e.g. --repeats 5 for a quick run).
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bin=$build/bench/kiln_bench_transport
out=${OUT:-$build/transport-results.jsonl}
if [ ! -x "$bin" ]; then
  cmake --build "$build" --target kiln_bench_transport
fi
: > "$out"
for transport in shm tcp ucx-shm ucx-tcp; do
  case $transport in
    shm) mca="--mca pml ob1 --mca btl vader,self" label="shared memory" ;;
    tcp) mca="--mca pml ob1 --mca btl tcp,self" label="loopback TCP" ;;
    ucx-shm) mca="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS=sm,self"
             label="UCX shared memory" ;;
    ucx-tcp) mca="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS=tcp,self"
             label="UCX TCP" ;;
  esac
  # shellcheck disable=SC2086
  mpirun --allow-run-as-root --oversubscribe -np 2 $mca "$bin" --label "$label" --append-json "$out" "$@"
  echo
done
echo "JSON lines: $out"
