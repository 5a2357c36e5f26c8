#!/usr/bin/env bash
# Builds the toolgate image with buildah from a static release binary, runs
# `/toolgate --version` inside it, and prints the image size.
#   deploy/image/build.sh [TAG]        (default toolgate:dev)
# Needs root (buildah with chroot isolation and the vfs driver; no container engine).
set -euo pipefail
cd "$(dirname "$0")/../.."
tag="${1:-toolgate:dev}"
target=x86_64-unknown-linux-gnu
RUSTFLAGS="-C target-feature=+crt-static" cargo build --locked --release --target "$target" --bin toolgate
bin="target/$target/release/toolgate"
# A static binary has no program interpreter to load it; a scratch image has none to offer.
if readelf -l "$bin" | grep -q "program interpreter"; then
  echo "$bin is not statically linked" >&2
  exit 1
fi

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$bin" "$stage/toolgate"
strip "$stage/toolgate" 2>/dev/null || true
printf 'nonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' > "$stage/passwd"
printf 'nonroot:x:65532:\n' > "$stage/group"
cp deploy/Dockerfile "$stage/Dockerfile"

b() { buildah --storage-driver vfs "$@"; }
b bud --quiet --isolation chroot -t "$tag" -f "$stage/Dockerfile" "$stage"
ctr="$(b from "localhost/$tag")"
trap 'b rm "$ctr" >/dev/null 2>&1 || true; rm -rf "$stage"' EXIT
echo "== /toolgate --version inside the image"
b run --isolation chroot --user 65532:65532 "$ctr" -- /toolgate --version
echo "== the injector and the validator start too"
b run --isolation chroot --user 65532:65532 "$ctr" -- /toolgate webhook --help >/dev/null
b run --isolation chroot --user 65532:65532 "$ctr" -- /toolgate rules >/dev/null
echo "== image localhost/$tag: binary $(stat -c %s "$stage/toolgate") bytes"
b images --format '{{.Name}}:{{.Tag}} {{.Size}}' | grep "/${tag%%:*}:" || true
