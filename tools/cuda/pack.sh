#!/usr/bin/env bash
# Pack the CUDA build for a GPU machine that has no Rust toolchain and no network, in two
# folders that each travel within one device call's size limit (64 MiB with the working tree).
#
#   tools/cuda/pack.sh [PACK]        (default .gpu; PACK and PACK-b are git-ignored)
#
# PACK holds `rlvmr` and the policy crate's test binaries (which take their device from
# $RLVMR_DEVICE) without debug information, as one xz archive (the binaries share most of
# their bytes), a slice of ALFWorld's game files (the test games of valid_seen and
# valid_unseen, and one training game in GAME_STRIDE, default 32), the main job's cold start
# (sft.jsonl.xz: configs/smollm2-gpu-main.toml's, made here by the CPU build, since the GPU
# machine gets too few training games to make it), and the first part of the embedded
# SmolLM2 GGUF, xz-compressed; PACK-b holds the rest of the GGUF. A first call carries PACK
# and runs `tools/cuda/check.sh tests PACK OUT`; the next, while that machine is still warm,
# carries PACK-b and runs `tools/cuda/check.sh train PACK OUT` or `learn`.
set -euo pipefail
cd "$(dirname "$0")/../.."
pack=${1:-.gpu}
stride=${GAME_STRIDE:-32}
limit=$(( 63 * 1024 * 1024 ))   # below the 64 MiB a call carries, for a margin
rm -rf "$pack" "$pack-b"
mkdir -p "$pack/alfworld" "$pack-b"
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT

tools/cuda/build.sh build --release -p rlvmr
strip --strip-debug -o "$staging/rlvmr" target-cuda/release/rlvmr
# The test binaries, by name (their file names carry a hash).
tools/cuda/build.sh test --release -p policy --no-run --message-format=json \
    | python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["profile"]["test"]:
        print(msg["target"]["name"], msg["executable"])
' | while read -r name exe; do
    strip --strip-debug -o "$staging/$name" "$exe"
done
tar -C "$staging" -cf - . | xz -T2 -6 --lzma2=dict=512MiB > "$pack/bins.tar.xz"
pwd > "$pack/built-in"   # where the test binaries look for their fixtures

zip_in=${ALFWORLD_ZIP:-../shared/alfworld/json_2.1.1.zip}
python3 - "$zip_in" "$pack/alfworld/json_2.1.1.zip" "$stride" <<'PY'
import sys, zipfile
src, dst, stride = sys.argv[1], sys.argv[2], int(sys.argv[3])
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
    games = sorted({n.rsplit("/", 1)[0] for n in zin.namelist() if n.endswith("game.tw-pddl")})
    train = [g for g in games if g.split("/")[1] == "train"]
    keep = {g for g in games if g.split("/")[1] in ("valid_seen", "valid_unseen")} | set(train[::stride])
    for name in zin.namelist():
        if name.endswith("/") or name.rsplit("/", 1)[0] in keep:
            zout.writestr(zin.getinfo(name), zin.read(name))
    print(f"{len(keep)} games ({len(train[::stride])} of {len(train)} training games)", file=sys.stderr)
PY

ALFWORLD_DATA=$(dirname "$zip_in") cargo run --quiet --release -p rlvmr -- coldstart \
    --config configs/smollm2-gpu-main.toml --out "$staging/coldstart" >&2
xz -T2 -6 -c "$staging/coldstart/sft.jsonl" > "$pack/sft.jsonl.xz"

gguf=${RLVMR_CACHE:-$HOME/.cache/rlvmr}/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$gguf" ] || { echo "$gguf is missing: run a command that uses the embedded model once" >&2; exit 1; }
xz -T2 -6 -c "$gguf" > "$staging/model.xz"
tree=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
first=$(( limit - tree - $(du -sb "$pack" | cut -f1) ))
second=$(( $(stat -c %s "$staging/model.xz") - first ))
if (( first < 0 || second + tree > limit )); then
    echo "the pack does not fit two calls: $first and $second bytes of model beside a $tree-byte tree" >&2
    exit 1
fi
head -c "$first" "$staging/model.xz" > "$pack/model.xz.part-a"
tail -c +"$(( first + 1 ))" "$staging/model.xz" > "$pack-b/model.xz.part-b"
du -sb "$pack" "$pack-b"
