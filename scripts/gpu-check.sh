#!/bin/bash
# One prepared device run (#47 item 5, #48), every figure into $OUT. Third lease: the GPU's
# first use (cubecl compiles and autotunes every kernel shape on first use) with cubecl's
# autotune at its default level ("balanced") and at "minimal", in a fresh process each and with
# a fresh kernel cache each; a second process on the same cache; the training steps the
# earlier leases could not finish within their limits; the shipped encoder's forward at both
# autotune levels beside PyTorch CUDA.
#
# Run from the repository root on the lent machine, with beside it (docs/speed.md):
#   .gpu/endotwin.xz   xz of the stripped `cargo build --release`
#   .gpu/models/       the cards and records `bench parity` compares
#   .gl/*.deb          the Vulkan/GL loader packages (see the device notes)
# Each step has its own time limit, so one slow step leaves the others their figures.
set -u
exec > >(tee "$OUT/log.txt") 2>&1
t0=$(date +%s)
stamp() { echo "== $(( $(date +%s) - t0 )) s: $*"; }
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
if ! ldconfig -p | grep -q libvulkan; then echo "no libvulkan"; fi
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name(0))'
nproc; lscpu | grep 'Model name'
root=$(pwd)
python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('.gpu/endotwin.xz'), open('/tmp/endotwin','wb'))" \
  && chmod +x /tmp/endotwin || exit 1
P=/tmp/endotwin
export ENDOTWIN_BACKEND=gpu
# A working folder per configuration, outside any Cargo checkout, with its own user cache
# folder: cubecl keeps its autotune results (and nothing compiled) there.
fresh() { rm -rf "/tmp/run-$1"; mkdir -p "/tmp/run-$1/cache"; }
# (`env -C`, not a shell function, so that `timeout` can run it.)
in_bal="env -C /tmp/run-bal XDG_CACHE_HOME=/tmp/run-bal/cache HOME=/tmp/run-bal"
in_min="env -C /tmp/run-min XDG_CACHE_HOME=/tmp/run-min/cache HOME=/tmp/run-min CUBECL_AUTOTUNE_LEVEL=minimal"
in_trn="env -C /tmp/run-trn XDG_CACHE_HOME=/tmp/run-trn/cache HOME=/tmp/run-trn CUBECL_AUTOTUNE_LEVEL=minimal"
step() { local name=$1 lim=$2; shift 2; stamp "$name"; timeout "$lim" "$@"; echo "rc=$? ($name)"; }
stamp demo
$P demo --seed 7 --polyps 16 --videos 0 --capsule 0 --background 0 --out /tmp/mini | tail -1
$P --library /tmp/mini info 2>&1 | head -8
mkdir -p /tmp/twin && cp "$root"/.gpu/models/twin-image.* /tmp/twin/
# 1. First use, both autotune levels, each in a fresh process and cache; then a second
#    process on the balanced cache.
fresh bal; fresh min
step parity-balanced 60 $in_bal $P --library /tmp/mini bench parity --models /tmp/twin --views 32 --json "$OUT/parity_balanced.json"
step parity-minimal 60 $in_min $P --library /tmp/mini bench parity --models /tmp/twin --views 32 --json "$OUT/parity_minimal.json"
step parity-balanced-second-process 35 $in_bal $P --library /tmp/mini bench parity --models /tmp/twin --views 32
ls -laR /tmp/run-bal/cache 2>/dev/null | head -12
# 2. Training steps (minimal autotune, so the first step's compilation fits the limit),
#    each model its own process and limit; then the PyTorch CUDA reference of the same steps.
fresh trn
step train-twin-backbone 110 $in_trn $P --library /tmp/mini bench train --gpu --gpu-only \
  --models twin-backbone --batches 32 --runs 3 --seconds 0 --json "$OUT/train_backbone.json"
step train-twin-small 50 $in_trn $P --library /tmp/mini bench train --gpu --gpu-only \
  --models twin-small --batches 32 --runs 3 --seconds 0 --json "$OUT/train_small.json"
step train-vit-b32 70 $in_trn $P --library /tmp/mini bench train --gpu --gpu-only \
  --models vit-b32 --batches 32 --runs 2 --seconds 0 --json "$OUT/train_vit.json"
step train-pytorch-cuda 50 python3 "$root/tests/fixtures/bench_pytorch.py" --mode train --device cuda \
  --models twin-backbone,twin-small,vit-b32 --batches 32 --runs 3 --seconds 1
# 3. The shipped encoder's steady forward at both levels (the cost of minimal autotune, if
#    any), beside PyTorch CUDA.
step encode-minimal 40 $in_trn $P --library /tmp/mini bench encode --gpu --gpu-only \
  --pytorch python3 --pytorch-cuda --models twin-backbone --batches 1,32 --runs 5 --seconds 0.5 --json "$OUT/encode_minimal.json"
step encode-balanced 40 $in_bal $P --library /tmp/mini bench encode --gpu --gpu-only \
  --models twin-backbone --batches 1,32 --runs 5 --seconds 0.5 --json "$OUT/encode_balanced.json"
stamp done
