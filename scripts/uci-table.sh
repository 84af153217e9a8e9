#!/usr/bin/env bash
# Runs `coordinator eval` on splits 0-9 of UCI datasets and prints per-split test RMSE, NLL
# and train time, then the mean and standard deviation of the RMSE per dataset.
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
printf '%-12s %5s %8s %10s %9s %9s\n' dataset split n_train rmse nll train_s
for ds in $datasets; do
  rmses=()
  for k in $splits; do
    out=$("$bin" eval --uci "$data/uci/$ds" --split "$k" --json "$@")
    r=$(field rmse "$out"); rmses+=("$r")
    printf '%-12s %5s %8s %10.5g %9.4g %9.3g\n' "$ds" "$k" "$(field n_train "$out")" "$r" "$(field nll "$out")" "$(field train_seconds "$out")"
  done
  printf '%s\n' "${rmses[@]}" | awk -v ds="$ds" '{s+=$1; q+=$1*$1; n++} END {m=s/n; v=(n>1)?(q-n*m*m)/(n-1):0; if (v<0) v=0; printf "%-12s  mean RMSE %.5g +/- %.3g over %d splits\n", ds, m, sqrt(v), n}'
done
