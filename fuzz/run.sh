#!/usr/bin/env bash
# Run fuzz targets with libFuzzer (nightly + cargo-fuzz), at most two at a time.
#   fuzz/run.sh [SECONDS] [TARGET…]      default: 600 s each, every target
# The corpus grows in fuzz/corpus/<target>/ (seeded from fuzz/seeds/<target>/), crashes land in
# fuzz/artifacts/<target>/, logs (with libFuzzer's final stats) in fuzz/logs/<target>.log.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-600}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(json bridge request result redact workspace_path delegation endpoint mcp ledger_flags dns policy)
fi
mkdir -p logs
# cargo-fuzz from crates.io when it is not installed yet (the nightly toolchain must be there).
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked >logs/install.log 2>&1
# A failed build must not fall back to stale binaries from an earlier one.
if ! cargo +nightly fuzz build -O >logs/build.log 2>&1; then
  tail -n 30 logs/build.log >&2
  exit 1
fi
bin=target/x86_64-unknown-linux-gnu/release
run_one() {
  local t=$1
  mkdir -p "corpus/$t" "artifacts/$t"
  "$bin/$t" "corpus/$t" "seeds/$t" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=16384 \
    -print_final_stats=1 -artifact_prefix="artifacts/$t/" >"logs/$t.log" 2>&1 || true
  echo "$t: $(grep -E 'stat::number_of_executed_units' "logs/$t.log" | awk '{print $2}') runs; \
$(ls "artifacts/$t" | wc -l) artifacts"
}
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge 2 ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
