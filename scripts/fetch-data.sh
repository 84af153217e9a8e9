#!/bin/sh
# fetch-data.sh puts the datasets the long tests and benchmarks read where they look for them:
# ../shared/data beside the checkout, with the Mauna Loa CO2 series (copied from
# internal/cli/testdata) and the UCI regression sets with their fixed train/test splits
# (Trefor Evans's packaging, https://github.com/treforevans/uci_datasets, MIT, kept in Git
# LFS). What is already there is left alone, so it is safe to run again. The UCI clone needs
# the network and git-lfs (Debian: apt-get install git-lfs); about 320 MB.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
shared="$root/../shared"
data="$shared/data"
mkdir -p "$data"
[ -e "$data/maunaloa_co2.csv" ] || cp "$root/internal/cli/testdata/maunaloa_co2.csv" "$data/"
if [ -e "$data/uci" ]; then
	echo "fetch-data: $data/uci is already there"
	exit 0
fi
if ! command -v git-lfs >/dev/null 2>&1; then
	echo "fetch-data: git-lfs is needed to fetch the UCI sets (apt-get install git-lfs)" >&2
	exit 1
fi
git lfs install --skip-repo >/dev/null
[ -d "$shared/uci_datasets" ] || git clone --depth 1 https://github.com/treforevans/uci_datasets "$shared/uci_datasets"
ln -s ../uci_datasets/uci_datasets "$data/uci"
echo "fetch-data: UCI sets in $data/uci"
