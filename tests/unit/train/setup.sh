# setup.sh GCXRUN GCX_TRAIN - sourced by the gcx-train end-to-end scripts
# (ranks.sh, resume.sh): names the launcher and the program, skips (77)
# without Fashion-MNIST, makes $tmp (removed at exit), one BLAS thread per
# rank, fail=0.
set -u
gcxrun=$1
train=$2
dir=${GCX_DATA_DIR:-/usr/share/datasets/fashion-mnist}
if [ ! -r "$dir/train-images-idx3-ubyte.gz" ]; then
    echo "SKIP: no Fashion-MNIST in $dir"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1
fail=0
