#!/usr/bin/env bash
# Runs `coordinator eval` on splits 0-9 of UCI datasets and prints per-split test RMSE, NLL,
# 95% coverage and train time, then per dataset the mean and standard deviation of the RMSE
# and the means of the NLL and the coverage.
#
#   scripts/uci-table.sh "challenger servo yacht" --method grief --inference type1
#
# The datasets are read from ../shared/data/uci (or $GPREDUCE_DATA/uci). Not part of CI: the
# larger datasets take minutes per split.
set -euo pipefail
cd "$(dirname "$0")/.."
datasets=$1; shift
data=${GPREDUCE_DATA:-../shared/data}
splits=${SPLITS:-0 1 2 3 4 5 6 7 8 9}
bin=$(mktemp -d)/coordinator
go build -o "$bin" ./cmd/coordinator
field() { grep -o "\"$1\":[-0-9.eE+]*" <<<"$2" | head -1 | cut -d: -f2; }
word() { grep -o "\"$1\":\"[^\"]*\"" <<<"$2" | head -1 | cut -d'"' -f4; }
printf '%-12s %5s %8s %4s %-7s %10s %9s %9s %9s  %s\n' dataset split n_train d method rmse nll cover95 train_s warnings
for ds in $datasets; do
  rows=()
  for k in $splits; do
    out=$("$bin" eval --uci "$data/uci/$ds" --split "$k" --json "$@")
    r=$(field rmse "$out"); l=$(field nll "$out"); c=$(field coverage95 "$out")
    rows+=("$r $l $c")
    warns=$( { grep -o '"code":"[a-z_]*"' <<<"$out" || true; } | cut -d'"' -f4 | sort | uniq -c | awk '{printf "%s%s", sep, $2 ($1 > 1 ? "x" $1 : ""); sep=","}')
    printf '%-12s %5s %8s %4s %-7s %10.5g %9.4g %9.3g %9.3g  %s\n' "$ds" "$k" "$(field n_train "$out")" "$(field d "$out")" "$(word method "$out")" "$r" "$l" "$c" "$(field train_seconds "$out")" "${warns:--}"
  done
  printf '%s\n' "${rows[@]}" | awk -v ds="$ds" '{s+=$1; q+=$1*$1; l+=$2; c+=$3; n++} END {m=s/n; v=(n>1)?(q-n*m*m)/(n-1):0; if (v<0) v=0; printf "%-12s  mean RMSE %.5g +/- %.3g, mean NLL %.4g, mean coverage95 %.3f over %d splits\n", ds, m, sqrt(v), l/n, c/n, n}'
done
