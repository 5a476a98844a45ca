#!/bin/bash
# One prepared device run (#47 item 5, #48): the plain release build and the same commit built
# with burn's GPU fusion, side by side on one machine; every figure into $OUT.
#
# Run from the repository root on the lent machine, with beside it (docs/speed.md):
#   .gpu/endotwin-plain.xz   xz of the stripped `cargo build --release`
#   .gpu/endotwin-fusion.xz  xz of the stripped `cargo build --release --features gpu-fusion`
#   .gpu/models/             the cards and records `bench parity` compares
#   .gl/*.deb                the Vulkan/GL loader packages (see the device notes)
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
nproc
cd .gpu && python3 -c "import lzma,shutil,sys; [shutil.copyfileobj(lzma.open(f+'.xz'), open(f,'wb')) for f in sys.argv[1:]]" endotwin-plain endotwin-fusion && chmod +x endotwin-plain endotwin-fusion || exit 1
P=./endotwin-plain; F=./endotwin-fusion
export ENDOTWIN_BACKEND=gpu
stamp demo
$P demo --seed 7 --polyps 16 --videos 0 --capsule 0 --background 0 --out mini | tail -1
$P --library mini info | head -8
step() { local name=$1 lim=$2; shift 2; stamp "$name"; timeout "$lim" "$@"; echo "rc=$? ($name)"; }
step encode-plain 80 $P --library mini bench encode --gpu --gpu-only --pytorch python3 --pytorch-cuda \
  --models twin-backbone,twin-small,vit-b32 --batches 1,32 --runs 3 --seconds 0.5 --json "$OUT/encode_plain.json"
step encode-fusion 60 $F --library mini bench encode --gpu --gpu-only \
  --models twin-backbone,twin-small,vit-b32 --batches 1,32 --runs 3 --seconds 0.5 --json "$OUT/encode_fusion.json"
step train-plain 100 $P --library mini bench train --gpu --gpu-only --pytorch python3 --pytorch-cuda \
  --models twin-backbone,twin-small,vit-b32 --batches 32 --runs 2 --seconds 0 --json "$OUT/train_plain.json"
step train-fusion 75 $F --library mini bench train --gpu --gpu-only \
  --models twin-backbone,twin-small,vit-b32 --batches 32 --runs 2 --seconds 0 --json "$OUT/train_fusion.json"
step parity-fusion 60 $F --library mini bench parity --models models --views 32 --json "$OUT/parity_fusion.json"
step parity-plain 50 $P --library mini bench parity --models models --views 32 --json "$OUT/parity_plain.json"
mkdir -p twin && cp models/twin-image.* twin/
step parity-plain-second-process 30 $P --library mini bench parity --models twin --views 32
ls -la ../target/environment 2>/dev/null | head -3; find / -path /proc -prune -o -type d -name '*cubecl*' -print 2>/dev/null | head -5
stamp done
