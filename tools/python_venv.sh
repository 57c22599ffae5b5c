# Sourced by tools/test_python.sh, tools/test_python_torch.sh and tools/bench_python.sh: a venv of pinned PyPI packages
# with the rlvmr wheel built into it. Run from the repository root.

# pinned_venv VENV PINS: makes VENV with PINS (space-separated `name==version`) unless it
# was made with exactly those pins.
pinned_venv() {
    local venv=$1 pins=$2 python=${PYTHON:-python3}
    [ "$(cat "$venv/pins" 2>/dev/null)" = "$pins" ] && return
    command -v "$python" > /dev/null || { echo "no $python to make $venv with" >&2; exit 2; }
    rm -rf "$venv"
    "$python" -m venv "$venv"
    # shellcheck disable=SC2086 # one argument per pin
    "$venv/bin/pip" install --quiet --disable-pip-version-check $pins
    echo "$pins" > "$venv/pins"
}

# install_rlvmr_wheel VENV: builds crates/python with VENV's maturin and installs the wheel.
install_rlvmr_wheel() {
    local venv=$1 wheels
    wheels=$(mktemp -d)
    (cd crates/python && "$venv/bin/maturin" build --release --quiet -o "$wheels" -i "$venv/bin/python")
    "$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheels"/rlvmr-*.whl
    rm -rf "$wheels"
}

# run_python_tests VENV [PYTEST ARGS...]: builds the wheel into VENV and runs the package's
# pytest suite against the release CLI (RLVMR_BIN, built when unset) and the ALFWorld data
# (ALFWORLD_DATA, default ../shared/alfworld).
run_python_tests() {
    local venv=$1
    shift
    if [ -z "${RLVMR_BIN:-}" ]; then
        cargo build --release -q -p rlvmr
        export RLVMR_BIN=$PWD/target/release/rlvmr
    fi
    export ALFWORLD_DATA=${ALFWORLD_DATA:-$PWD/../shared/alfworld}
    install_rlvmr_wheel "$venv"
    "$venv/bin/python" -m pytest -q -p no:cacheprovider crates/python/tests "$@"
}
