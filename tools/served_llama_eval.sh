#!/usr/bin/env bash
# The same model two ways on the same ALFWorld games: the embedded SmolLM2-135M GGUF in
# process (`--policy smollm2-135m-instruct`) and served by llama.cpp's OpenAI-compatible
# server (`--policy openai:URL`), greedy, both tables printed. Run from the repository root:
#
#   tools/served_llama_eval.sh [--split L0] [--episodes 10] [--max-new-tokens 128] [--out runs/served-llama]
#
# The server's venv comes from tools/llama_server_venv.sh. ALFWORLD_DATA: default
# ../shared/alfworld.
set -euo pipefail
split=L0 episodes=10 max_new_tokens=128 out=runs/served-llama
while [ $# -gt 0 ]; do
    case $1 in
        --split) split=$2; shift 2 ;;
        --episodes) episodes=$2; shift 2 ;;
        --max-new-tokens) max_new_tokens=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
python=$(tools/llama_server_venv.sh | tail -n 1)
cargo build --release -q -p rlvmr
rlvmr=target/release/rlvmr
data=${ALFWORLD_DATA:-../shared/alfworld}
mkdir -p "$out"
common=(--env alfworld --split "$split" --episodes "$episodes" --temperature 0 --max-new-tokens "$max_new_tokens" --data "$data")
# In process first (this also fetches the GGUF into the cache).
/usr/bin/time -f "local wall %e s" "$rlvmr" eval "${common[@]}" --policy smollm2-135m-instruct --out "$out/local"
gguf=${RLVMR_CACHE:-$HOME/.cache/rlvmr}/models/SmolLM2-135M-Instruct.Q4_1.gguf
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$python" -m llama_cpp.server --host 127.0.0.1 --port "$port" --model "$gguf" --n_ctx 4096 \
    --n_threads "$(nproc)" > "$out/server.log" 2>&1 &
server=$!
trap 'kill $server 2> /dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$port/v1/models" > /dev/null; do
    kill -0 $server 2> /dev/null || { echo "the server died; see $out/server.log" >&2; exit 1; }
    sleep 0.5
done
# llama-cpp-python's server applies a repeat penalty of 1.1 unless told otherwise.
printf '[model.server]\nrequest = { repeat_penalty = 1.0 }\nmax_in_flight = 1\n' > "$out/served.toml"
/usr/bin/time -f "served wall %e s" "$rlvmr" eval "${common[@]}" --config "$out/served.toml" \
    --policy "openai:http://127.0.0.1:$port/v1" --model-name smollm2-135m --out "$out/served"
