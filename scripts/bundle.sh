#!/usr/bin/env bash
# The release archive: scripts/bundle.sh OUTDIR [BINARY] writes
# OUTDIR/endotwin-<version>-linux-x86_64.tar.gz holding the stripped binary (BINARY, default
# target/release/endotwin; a stripped copy, the original is left as it is), models/ and
# sample_db/ as committed (HEAD: never a file the app wrote into the checkout at run time,
# never an untracked one), the licence files, and a README. Unpacked anywhere, ./endotwin
# finds models/ and sample_db/ beside itself. Needs git, GNU tar, gzip and strip (binutils).
set -euo pipefail

die() {
  echo "bundle.sh: $*" >&2
  exit 1
}

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: scripts/bundle.sh OUTDIR [BINARY]"
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$1"
binary="${2:-$root/target/release/endotwin}"
[ -f "$binary" ] && [ -x "$binary" ] ||
  die "no binary at $binary: build it first (cargo build --release) or name one"
level="${BUNDLE_GZIP_LEVEL:-9}"
case "$level" in
  [1-9]) ;;
  *) die "BUNDLE_GZIP_LEVEL must be 1 to 9, not '$level'" ;;
esac
git -C "$root" rev-parse --verify -q HEAD >/dev/null ||
  die "$root is not a git checkout with a commit: the archive takes models/ and sample_db/ from HEAD"

version="$(awk -F'"' '/^\[/ { pkg = ($0 == "[package]") } pkg && /^version *=/ { print $2; exit }' "$root/Cargo.toml")"
[ -n "$version" ] || die "no version in $root/Cargo.toml"
case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=macos ;;
  *) os="$(uname -s | tr '[:upper:]' '[:lower:]')" ;;
esac
name="endotwin-$version-$os-$(uname -m)"

mkdir -p "$out"
out="$(cd "$out" && pwd)"
stage="$(mktemp -d "$out/.bundle.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
dir="$stage/$name"
mkdir "$dir"

# The committed models and sample library (and licence files, when the repository has any).
mapfile -t licences < <(git -C "$root" ls-files -- 'LICENSE*' 'LICENCE*' 'COPYING*')
git -C "$root" archive --format=tar HEAD -- models sample_db "${licences[@]}" | tar -x -C "$dir"
[ -f "$dir/sample_db/library.sqlite" ] || die "HEAD has no sample_db/library.sqlite"
[ "${#licences[@]}" -gt 0 ] ||
  echo "bundle.sh: note: the repository has no LICENSE file; the archive holds none" >&2
for part in models sample_db; do
  if [ -n "$(git -C "$root" status --porcelain --untracked-files=no -- "$part")" ]; then
    echo "bundle.sh: note: $part/ differs from HEAD in the checkout; the archive holds HEAD's" >&2
  fi
done

# A stripped copy of the binary.
if command -v strip >/dev/null; then
  strip -o "$dir/endotwin" "$binary"
else
  echo "bundle.sh: note: no strip on PATH; the binary goes in unstripped" >&2
  cp "$binary" "$dir/endotwin"
fi
chmod 755 "$dir/endotwin"

licence="$(awk -F'"' '/^license *=/ { print $2; exit }' "$root/Cargo.toml")"
cat >"$dir/README.txt" <<EOF
EndoTwin $version ($os, $(uname -m))

A desktop review tool for colonoscopy: digital-twin polyp retrieval, zero-shot text prompts,
capsule captions, tracklet re-identification and in-app fine-tuning. Nothing is downloaded.

Run
  ./endotwin                  opens the window on the sample library (sample_db/ here)
  ./endotwin --help           every command; \`./endotwin COMMAND --help\` for one

A few commands (any working directory: models/ and sample_db/ are found beside the binary)
  ./endotwin info                                  version, compute device, library contents
  ./endotwin twins view1.jpg view2.jpg             the digital twins of a polyp from its views
  ./endotwin gui --tab tracklets --video S7-V01    the window on a video's tracklet timeline
  ./endotwin captions refine "Mild erosions, no bleeding."
  ./endotwin library check                         the database and every image's hash
  ./endotwin --library ~/my-library import images ~/frames    your own library

Requirements
  Linux x86_64 with a Vulkan driver (\`sudo apt-get install mesa-vulkan-drivers\`, or the GPU
  vendor's) or OpenGL (\`sudo apt-get install libgl1-mesa-dri libegl1\`): the window tries
  Vulkan first, then OpenGL (ENDOTWIN_RENDERER=wgpu|gl forces one). Models run on the GPU
  through wgpu when there is a hardware adapter, else on the CPU (--backend cpu|gpu).

Where the data goes
  Labels, imports, indexes and their audit rows go into the library: sample_db/ here unless
  --library or ENDOTWIN_LIBRARY names another. Trained models go into models/ here unless
  --out or ENDOTWIN_MODELS names another folder. Besides these, only the GPU kernels' tuning
  cache is kept (~/.cache/cubecl).

Licence: ${licence:-see the repository} (as declared by the project).
EOF

# A reproducible archive: names sorted, no owner, the commit's time on every file, no time
# in the gzip header. BUNDLE_GZIP_LEVEL (default 9) trades size for time (the test uses 1).
mtime="@$(git -C "$root" log -1 --format=%ct)"
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" \
  -cf - "$name" | gzip -n "-$level" >"$stage/$name.tar.gz"
mv "$stage/$name.tar.gz" "$out/$name.tar.gz"
echo "$out/$name.tar.gz ($(du -h "$out/$name.tar.gz" | cut -f1))"
