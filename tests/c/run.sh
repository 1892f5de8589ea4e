#!/usr/bin/env bash
# Builds and runs everything on the C side; exits non-zero on any failure.
#
#   tests/c/run.sh                    after `cargo build --release`, from the repo root
#   tests/c/run.sh --snapshot-header  before the build, outside a git checkout (see below)
#   tests/c/run.sh --header-only      only the header checks
#
# Steps (each PASS or FAIL; logs in build/c/logs/):
#   header   the committed include/horecon.h equals a freshly generated one:
#            - generated again from the current src/ with the crate's own build
#              script, run on a copy of the sources in a temporary directory;
#            - in a git checkout: `git diff --exit-code include/horecon.h` (the
#              build rewrites the header, so a stale committed one shows up here);
#              outside git: compared with the copy `--snapshot-header` took before
#              the build (build/c/horecon.h.before-build), when there is one;
#            - exported symbols of libhorecon.so == functions declared in the header;
#            - the header alone compiles as C99 and C++11 (-Wall -Wextra -pedantic
#              -Werror) and a C++ program naming every function links (extern "C").
#   compile  examples/quickstart.c (C99); tests/c/error_handling.c (every status
#            code), tests/c/model.c (MODEL.md against float64 sums in C) and
#            tests/c/threads.c (concurrency), tests/c/oom.c (OUT_OF_MEMORY under
#            RLIMIT_AS instead of aborts), tests/c/nufft.c (the standalone NUFFT
#            against direct sums, its error codes), each as C99 and C++11, -Werror;
#            tests/c/adversarial.c (every function, edge and random arguments,
#            forked per call under RLIMIT_AS and a time limit; C99).
#   run      each program natively, then under valgrind (--error-exitcode=1
#            --leak-check=full --errors-for-leak-kinds=definite: "possibly lost"
#            and "still reachable" blocks of Rust's thread pools are not failures).
#
# Environment: CC, CXX (gcc, g++); CARGO_TARGET_DIR (target); HORECON_TEST_SEED replays a seed;
# HORECON_C_TEST_TIMEOUT limits each run (900 s); HORECON_ADVERSARIAL_CASES (25 per function);
# HORECON_C_TESTS_NO_VALGRIND=1 skips the valgrind runs (reported, not passed).
set -u

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root" || exit 2
out="$root/build/c"
logs="$out/logs"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
lib="$target/release"
snapshot="$out/horecon.h.before-build"
CC="${CC:-gcc}"
CXX="${CXX:-g++}"

header_only=0
[ "${1:-}" = "--header-only" ] && header_only=1

if [ "${1:-}" = "--snapshot-header" ]; then
    mkdir -p "$out" && cp include/horecon.h "$snapshot" && echo "saved $snapshot"
    exit $?
fi

mkdir -p "$logs"
passed=0
failed=0
failures=()

# step NAME COMMAND...: runs COMMAND with output in $logs/NAME.log.
step() {
    local name="$1"
    shift
    if "$@" >"$logs/$name.log" 2>&1; then
        passed=$((passed + 1))
        printf 'PASS %s\n' "$name"
        grep -h -E '(^ok: |^note: |checks passed|differing results|relative reconstruction error|skipped|seed |model: .*(forward|cg)|oom: .*limits|inputs tried|^statuses)' \
            "$logs/$name.log" | sed 's/^/     /'
    else
        failed=$((failed + 1))
        failures+=("$name")
        printf 'FAIL %s (log: %s)\n' "$name" "$logs/$name.log"
        tail -n 40 "$logs/$name.log" | sed 's/^/     /'
    fi
}

if [ ! -f "$lib/libhorecon.so" ]; then
    echo "$lib/libhorecon.so is missing: run 'cargo build --release' first"
    echo "C tests: 0 passed, 1 failed"
    exit 1
fi

# ---- header -------------------------------------------------------------

# Generates the header from the current sources into $1 (a directory) with
# the crate's build script, leaving the tree alone.
generate_header() {
    local dir="$1" script version
    script="$(ls -t "$lib"/build/horecon-*/build-script-build 2>/dev/null | head -n 1)"
    if [ -z "$script" ]; then
        echo "no build script binary under $lib/build: run 'cargo build --release'"
        return 1
    fi
    version="$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)"
    # the whole source tree (build.rs may read more than src/), without outputs
    tar --exclude=./target --exclude=./build --exclude=./.git --exclude='./.venv*' \
        --exclude='./venv*' --exclude='*/__pycache__' -cf - . | tar -xf - -C "$dir" || return 1
    rm -f "$dir/include/horecon.h" # so that it is generated, not kept
    mkdir -p "$dir/include"
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" CARGO_PKG_VERSION="$version" "$script") || return 1
    [ -f "$dir/include/horecon.h" ]
}

header_is_fresh() {
    local tmp
    tmp="$(mktemp -d)"
    generate_header "$tmp" || { rm -rf "$tmp"; return 1; }
    if ! diff -u include/horecon.h "$tmp/include/horecon.h"; then
        echo "include/horecon.h differs from the header generated from src/ (diff above):"
        echo "run 'cargo build --release' and commit include/horecon.h"
        rm -rf "$tmp"
        return 1
    fi
    rm -rf "$tmp"
    echo "ok: include/horecon.h equals the header generated from the current src/"
}

# The freshness check itself can fail: a changed doc comment in src/ffi must
# give a different header.
header_check_detects_changes() {
    local tmp
    tmp="$(mktemp -d)"
    generate_header "$tmp" || { rm -rf "$tmp"; return 1; }
    cp "$tmp/include/horecon.h" "$tmp/before.h"
    sed -i 's|^/// Destroys a plan; NULL is a no-op.|/// Destroys a plan; NULL is a no-op (changed).|' "$tmp/src/ffi/mod.rs"
    (cd "$tmp" && CARGO_MANIFEST_DIR="$tmp" CARGO_PKG_VERSION=0.0.0 \
        "$(ls -t "$lib"/build/horecon-*/build-script-build | head -n 1)") || { rm -rf "$tmp"; return 1; }
    if cmp -s "$tmp/before.h" "$tmp/include/horecon.h"; then
        echo "changing a doc comment in src/ffi did not change the generated header"
        rm -rf "$tmp"
        return 1
    fi
    rm -rf "$tmp"
    echo "ok: a changed doc comment changes the generated header: the check can fail"
}

header_matches_committed() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
        git ls-files --error-unmatch include/horecon.h >/dev/null 2>&1; then
        if ! git diff --exit-code -- include/horecon.h; then
            echo "the build rewrote include/horecon.h: the committed header is stale (diff above)."
            echo "commit the regenerated include/horecon.h"
            return 1
        fi
        echo "ok: include/horecon.h equals the committed one (git)"
    elif [ -f "$snapshot" ]; then
        if ! diff -u "$snapshot" include/horecon.h; then
            echo "the build rewrote include/horecon.h: the shipped header is stale (diff above)"
            return 1
        fi
        echo "ok: include/horecon.h equals the copy taken before the build ($snapshot)"
    else
        echo "note: not a git checkout and no $snapshot: run 'tests/c/run.sh --snapshot-header'"
        echo "note: before 'cargo build --release' to compare with the shipped header;"
        echo "note: only the comparison with a freshly generated header was made (header-fresh)"
    fi
}

# Functions declared in the header (cbindgen writes one declaration per line).
header_functions() {
    grep -oE '^[A-Za-z_][A-Za-z0-9_ *]*[ *](horecon_[a-z0-9_]+)\(' include/horecon.h |
        grep -oE 'horecon_[a-z0-9_]+\($' | tr -d '(' | sort -u
}

symbols_match_header() {
    local exported declared
    exported="$(nm -D --defined-only "$lib/libhorecon.so" | awk '$2 == "T" {print $3}' |
        grep '^horecon_' | sort -u)"
    declared="$(header_functions)"
    if [ -z "$declared" ]; then
        echo "found no function declarations in include/horecon.h"
        return 1
    fi
    if [ "$exported" != "$declared" ]; then
        echo "exported by libhorecon.so but not declared (<) / declared but not exported (>):"
        diff <(echo "$exported") <(echo "$declared")
        return 1
    fi
    echo "ok: $(echo "$declared" | wc -l) functions, all exported and declared"
}

header_compiles() {
    local src="$out/header_only"
    printf '#include "horecon.h"\n#include "horecon.h"\nint main(void) { return HORECON_OK; }\n' >"$src.c"
    "$CC" -std=c99 -Wall -Wextra -pedantic -Werror -Iinclude "$src.c" -o "$src.c99" || return 1
    "$CXX" -x c++ -std=c++11 -Wall -Wextra -pedantic -Werror -Iinclude "$src.c" -o "$src.cxx11" || return 1
    "$CXX" -x c++ -std=c++17 -Wall -Wextra -pedantic -Werror -Iinclude "$src.c" -o "$src.cxx17" || return 1
    echo "ok: the header compiles alone (twice included) as C99, C++11 and C++17"
}

# A C++ program that takes the address of every declared function: it links
# only if the header declares them extern "C".
header_links_from_cxx() {
    local src="$out/header_linkage.cpp" f
    {
        echo '#include "horecon.h"'
        echo 'typedef void (*any_function)(void);'
        echo 'static any_function volatile sink;'
        echo 'int main() {'
        for f in $(header_functions); do
            echo "    sink = reinterpret_cast<any_function>(&$f);"
        done
        echo '    return sink == 0;'
        echo '}'
    } >"$src"
    "$CXX" -std=c++11 -Wall -Wextra -pedantic -Werror -Iinclude "$src" -o "$out/header_linkage" \
        -L"$lib" -lhorecon -Wl,-rpath,"$lib" || return 1
    "$out/header_linkage" || return 1
    echo "ok: a C++ program naming all $(header_functions | wc -l) functions links: extern \"C\" works"
}

step header-fresh header_is_fresh
step header-check-can-fail header_check_detects_changes
step header-committed header_matches_committed
step header-symbols symbols_match_header
step header-compiles header_compiles
step header-cxx-linkage header_links_from_cxx

if [ "$header_only" = "1" ]; then
    echo "C tests: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
fi

# ---- compile ------------------------------------------------------------

cflags=(-std=c99 -Wall -Wextra -pedantic -Werror -g -O1 -Iinclude -Itests/c)
cxxflags=(-x c++ -std=c++11 -Wall -Wextra -pedantic -Werror -g -O1 -Iinclude -Itests/c)
link=(-L"$lib" -lhorecon -Wl,-rpath,"$lib" -lm -pthread)

# exactly the documented command line (no -lm, no test headers)
step compile-quickstart-c99 "$CC" -std=c99 -Wall -Wextra -pedantic -Werror -Iinclude examples/quickstart.c \
    -L"$lib" -lhorecon -Wl,-rpath,"$lib" -o "$out/quickstart"
step compile-error_handling-c99 "$CC" "${cflags[@]}" tests/c/error_handling.c -o "$out/error_handling" "${link[@]}"
step compile-error_handling-c++11 "$CXX" "${cxxflags[@]}" tests/c/error_handling.c -o "$out/error_handling_cxx" "${link[@]}"
step compile-model-c99 "$CC" "${cflags[@]}" tests/c/model.c -o "$out/model" "${link[@]}"
step compile-model-c++11 "$CXX" "${cxxflags[@]}" tests/c/model.c -o "$out/model_cxx" "${link[@]}"
step compile-oom-c99 "$CC" "${cflags[@]}" tests/c/oom.c -o "$out/oom" "${link[@]}"
step compile-oom-c++11 "$CXX" "${cxxflags[@]}" tests/c/oom.c -o "$out/oom_cxx" "${link[@]}"
step compile-adversarial-c99 "$CC" "${cflags[@]}" tests/c/adversarial.c -o "$out/adversarial" "${link[@]}"
step compile-threads-c99 "$CC" "${cflags[@]}" tests/c/threads.c -o "$out/threads" "${link[@]}"
step compile-threads-c++11 "$CXX" "${cxxflags[@]}" tests/c/threads.c -o "$out/threads_cxx" "${link[@]}"
step compile-nufft-c99 "$CC" "${cflags[@]}" tests/c/nufft.c -o "$out/nufft" "${link[@]}"
step compile-nufft-c++11 "$CXX" "${cxxflags[@]}" tests/c/nufft.c -o "$out/nufft_cxx" "${link[@]}"

# ---- run ----------------------------------------------------------------

vg=(valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite)

# A hang (a deadlock, say) is a failure, not a stuck CI job.
limit="${HORECON_C_TEST_TIMEOUT:-900}"

# run NAME PROGRAM ARGS...: natively, if it was built; vgrun: under valgrind.
run() {
    local name="$1" program="$2"
    shift 2
    if [ -x "$program" ]; then
        step "$name" timeout "$limit" "$program" "$@"
    else
        step "$name" sh -c "echo '$program was not built'; exit 1"
    fi
}
vgrun() {
    local name="$1" program="$2"
    shift 2
    if [ -x "$program" ]; then
        step "$name" timeout "$limit" "${vg[@]}" "$program" "$@"
    else
        step "$name" sh -c "echo '$program was not built'; exit 1"
    fi
}

run run-quickstart "$out/quickstart"
run run-error_handling-c99 "$out/error_handling"
run run-error_handling-c++11 "$out/error_handling_cxx"
run run-model-c99 "$out/model"
run run-model-c++11 "$out/model_cxx"
# OUT_OF_MEMORY, never an abort, under address-space limits (natively only:
# valgrind brings its own allocator)
run run-oom "$out/oom"
# every exported function with edge and random arguments, each call in a forked
# child under RLIMIT_AS = 4 GiB and a time limit (issue 11); cases per function:
run run-adversarial "$out/adversarial" "${HORECON_ADVERSARIAL_CASES:-25}"
# ... and its table names every function of the header, no more, no fewer
adversarial_covers_header() {
    local listed declared
    listed="$("$out/adversarial" --list | sort -u)" || return 1
    declared="$(header_functions)"
    if [ "$listed" != "$declared" ]; then
        echo "tests/c/adversarial.c's FUNCTIONS table (<) differs from include/horecon.h (>):"
        echo "add a line for every new function"
        diff <(echo "$listed") <(echo "$declared")
        return 1
    fi
    echo "ok: the adversarial table covers all $(echo "$declared" | wc -l) functions of the header"
}
step adversarial-covers-header adversarial_covers_header
run run-threads-c99 "$out/threads"
run run-threads-c++11 "$out/threads_cxx"
# all cores in the plan's pool, and the double and fast precision modes
run run-threads-all-cores "$out/threads" 4 32 32 1000 0
step run-threads-double env HORECON_TEST_PRECISION=2 timeout "$limit" "$out/threads" 4 20 20 500 5
step run-threads-fast env HORECON_TEST_PRECISION=1 timeout "$limit" "$out/threads" 4 20 20 500 5
run run-nufft-c99 "$out/nufft"
run run-nufft-c++11 "$out/nufft_cxx"

if [ "${HORECON_C_TESTS_NO_VALGRIND:-0}" = "1" ]; then
    echo "SKIP valgrind runs (HORECON_C_TESTS_NO_VALGRIND=1)"
elif ! command -v valgrind >/dev/null 2>&1; then
    step valgrind-present sh -c 'echo "valgrind is not installed (set HORECON_C_TESTS_NO_VALGRIND=1 to skip)"; exit 1'
else
    vgrun valgrind-quickstart "$out/quickstart"
    vgrun valgrind-error_handling-c99 "$out/error_handling"
    vgrun valgrind-error_handling-c++11 "$out/error_handling_cxx"
    vgrun valgrind-model-c99 "$out/model"
    vgrun valgrind-model-c++11 "$out/model_cxx"
    # tiny sizes: valgrind runs the 8 threads one at a time, ~50x slower
    vgrun valgrind-threads-c99 "$out/threads" 2 6 5 40
    vgrun valgrind-threads-c++11 "$out/threads_cxx" 2 6 5 40
    vgrun valgrind-nufft-c99 "$out/nufft"
fi

echo
if [ "$failed" -gt 0 ]; then
    echo "failed: ${failures[*]}"
fi
echo "C tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
