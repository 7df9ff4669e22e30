#!/usr/bin/env bash
# only_with_cpu_flag.sh FLAG CMD...: runs CMD where /proc/cpuinfo lists FLAG;
# elsewhere skips (exit 77, CTest's SKIP_RETURN_CODE), saying why.
flag=$1
shift
if ! grep -qw "$flag" /proc/cpuinfo; then
  echo "skipped: this CPU has no $flag"
  exit 77
fi
exec "$@"
