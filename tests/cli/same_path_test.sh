#!/usr/bin/env bash
# No command writes over one of its inputs or writes two outputs to one file: such a command line is a usage error
# (exit 2) before anything is read or written, naming both options and paths; the input is left as it was.
# Usage: same_path_test.sh BRAID_BINARY SOURCE_DIR SHARED_DIR
source "$(dirname "$0")/lib.sh" "$@"

cp "$src/topologies/pcie-2s4g.yaml" "$tmp/T.yaml"
cp "$tmp/T.yaml" "$tmp/T.orig"
# unchanged FILE: the input still holds its original bytes.
unchanged() { cmp -s "$1" "$tmp/T.orig" && ok || fail "$1 was changed"; }
# names WHAT TEXT...: every TEXT is in the error.
names() {
  local what=$1
  shift
  for t in "$@"; do grep -qF -- "$t" "$tmp/err" || { fail "$what: '$t' not in: $(head -2 "$tmp/err")"; return; }; done
  ok
}

# ---- an output over an input -----------------------------------------------------------------------------------
expect_rc 2 "topo import FILE -o FILE" -- "$braid" topo import "$tmp/T.yaml" -o "$tmp/T.yaml"
names "topo import" "braid topo import: -o $tmp/T.yaml and FILE $tmp/T.yaml are the same file"
unchanged "$tmp/T.yaml"
expect_rc 2 "topo draw FILE -o FILE" -- "$braid" topo draw "$tmp/T.yaml" -o "$tmp/T.yaml"
names "topo draw" "braid topo draw: -o $tmp/T.yaml and FILE $tmp/T.yaml are the same file"
unchanged "$tmp/T.yaml"
# Other spellings of the same file: a relative path, "..", a symbolic link, a hard link.
mkdir "$tmp/sub"
(cd "$tmp" && "$braid" topo draw T.yaml -o sub/../T.yaml) >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && ok || fail "topo draw T.yaml -o sub/../T.yaml: not refused"
names "relative spelling" "-o sub/../T.yaml and FILE T.yaml"
ln -s "$tmp/T.yaml" "$tmp/link.yaml"
expect_rc 2 "topo import -o a link to FILE" -- "$braid" topo import "$tmp/T.yaml" -o "$tmp/link.yaml"
unchanged "$tmp/T.yaml"
[ -L "$tmp/link.yaml" ] && ok || fail "the link was replaced"
ln "$tmp/T.yaml" "$tmp/hard.yaml"
expect_rc 2 "topo draw -o a hard link to FILE" -- "$braid" topo draw "$tmp/hard.yaml" -o "$tmp/T.yaml"
unchanged "$tmp/T.yaml"
printf '{}\n' >"$tmp/sk.json"
expect_rc 2 "topo import -o the sketch" -- "$braid" topo import "$tmp/T.yaml" --sketch "$tmp/sk.json" -o "$tmp/sk.json"
names "topo import --sketch" "-o $tmp/sk.json and --sketch $tmp/sk.json"
[ "$(cat "$tmp/sk.json")" = "{}" ] && ok || fail "the sketch was changed"

expect_rc 2 "algo -o the topology" -- "$braid" algo ring --coll allgather -t "$tmp/T.yaml" -o "$tmp/T.yaml"
names "algo" "braid algo: -o $tmp/T.yaml and --topology $tmp/T.yaml are the same file"
unchanged "$tmp/T.yaml"
expect_rc 2 "synth -o the topology" -- "$braid" synth -t "$tmp/T.yaml" -c allgather -o "$tmp/T.yaml"
names "synth -o" "braid synth: -o $tmp/T.yaml and --topology $tmp/T.yaml are the same file"
expect_rc 2 "synth --json the topology" -- "$braid" synth -t "$tmp/T.yaml" -c allgather --json "$tmp/T.yaml"
names "synth --json" "--json $tmp/T.yaml and --topology $tmp/T.yaml"
unchanged "$tmp/T.yaml"
printf 'name: sk\n' >"$tmp/sk.yaml"
expect_rc 2 "synth -o the sketch" -- "$braid" synth -t pcie-2s4g -c allgather --sketch "$tmp/sk.yaml" -o "$tmp/sk.yaml"
names "synth --sketch" "-o $tmp/sk.yaml and --sketch $tmp/sk.yaml"
expect_rc 0 "algo ring for simulate" -- "$braid" algo ring --coll allgather -n 8 -o "$tmp/ring.xml"
cp "$tmp/ring.xml" "$tmp/ring.orig"
expect_rc 2 "simulate --html the algorithm" -- "$braid" simulate "$tmp/ring.xml" -t pcie-2s4g --html "$tmp/ring.xml"
names "simulate" "braid simulate: --html $tmp/ring.xml and ALGO $tmp/ring.xml are the same file"
cmp -s "$tmp/ring.xml" "$tmp/ring.orig" && ok || fail "simulate --html replaced the algorithm"
expect_rc 2 "simulate --html the topology" -- "$braid" simulate ring -t "$tmp/T.yaml" --html "$tmp/T.yaml"
unchanged "$tmp/T.yaml"
expect_rc 2 "tune -o the topology" -- "$braid" tune -t "$tmp/T.yaml" -o "$tmp/T.yaml"
names "tune" "braid tune: -o $tmp/T.yaml and --topology $tmp/T.yaml are the same file"
unchanged "$tmp/T.yaml"
printf 'not read: the paths are checked first\n' >"$tmp/ar.txt"
expect_rc 2 "tune -o a log" -- "$braid" tune --nccl-tests-log "$tmp/ar.txt=Ring/LL" -o "$tmp/ar.txt"
names "tune log" "-o $tmp/ar.txt and --nccl-tests-log $tmp/ar.txt"
# demo writes DIR/<topology name>_<collective>_braid.xml and .json: a topology file with one of those names.
mkdir "$tmp/demo"
sed 's/^name: pcie-2s4g/name: t/' "$tmp/T.yaml" >"$tmp/demo/t_allreduce_braid.json"
cp "$tmp/demo/t_allreduce_braid.json" "$tmp/demo.orig"
expect_rc 2 "demo over its topology" -- "$braid" demo --topology "$tmp/demo/t_allreduce_braid.json" -o "$tmp/demo"
names "demo" "-o $tmp/demo/t_allreduce_braid.json and --topology $tmp/demo/t_allreduce_braid.json"
cmp -s "$tmp/demo/t_allreduce_braid.json" "$tmp/demo.orig" && ok || fail "demo replaced its topology"

# ---- two outputs in one file (neither exists yet) ----------------------------------------------------------------
expect_rc 2 "synth -o X --json X" -- "$braid" synth -t pcie-2s4g -c allgather -o "$tmp/x.out" --json "$tmp/x.out"
names "synth -o X --json X" "braid synth: -o $tmp/x.out and --json $tmp/x.out are the same file"
[ ! -e "$tmp/x.out" ] && ok || fail "synth -o X --json X wrote X"
expect_rc 2 "synth -o X --json sub/../X" -- "$braid" synth -t pcie-2s4g -c allgather -o "$tmp/x.out" \
  --json "$tmp/sub/../x.out"
expect_rc 2 "synth --sizes -o DIR --json DIR" -- "$braid" synth -t pcie-2s4g -c allgather --sizes 1K:1M \
  -o "$tmp/set" --json "$tmp/set"
[ ! -e "$tmp/set" ] && ok || fail "synth --sizes -o DIR --json DIR created DIR"

# A dangling symbolic link names the file a write through it creates: the link to X and X are one output.
ln -s "$tmp/y.out" "$tmp/y.link"
ln -s y.link "$tmp/y.link2"  # relative, to another link
expect_rc 2 "synth -o X --json LINK-to-X (X missing)" -- "$braid" synth -t pcie-2s4g -c allgather -o "$tmp/y.out" \
  --json "$tmp/y.link"
names "dangling link" "-o $tmp/y.out and --json $tmp/y.link are the same file"
expect_rc 2 "synth -o X --json LINK-to-LINK-to-X" -- "$braid" synth -t pcie-2s4g -c allgather -o "$tmp/y.out" \
  --json "$tmp/y.link2"
[ ! -e "$tmp/y.out" ] && ok || fail "a refused synth wrote X through a link"
ln -s loop.b "$tmp/loop.a"
ln -s loop.a "$tmp/loop.b"
expect_rc 1 "algo -o a link loop" -- "$braid" algo ring --coll allgather -n 4 -o "$tmp/loop.a"

# ---- a shipped topology name stands for its file -------------------------------------------------------------------
mkdir "$tmp/shipped"
cp "$src/topologies/pcie-2s4g.yaml" "$tmp/shipped/pcie-2s4g.yaml"
shipped_unchanged() { cmp -s "$tmp/shipped/pcie-2s4g.yaml" "$tmp/T.orig" && ok || fail "$1 replaced the shipped file"; }
expect_rc 2 "topo draw NAME -o the shipped file" -- env BRAID_TOPOLOGY_DIR="$tmp/shipped" "$braid" topo draw \
  pcie-2s4g -o "$tmp/shipped/pcie-2s4g.yaml"
names "topo draw shipped" "-o $tmp/shipped/pcie-2s4g.yaml and FILE pcie-2s4g (the shipped file" \
  "are the same file"
shipped_unchanged "topo draw"
expect_rc 2 "algo -t NAME -o the shipped file" -- env BRAID_TOPOLOGY_DIR="$tmp/shipped" "$braid" algo ring \
  --coll allgather -t pcie-2s4g -o "$tmp/shipped/../shipped/pcie-2s4g.yaml"
names "algo shipped" "--topology pcie-2s4g (the shipped file"
shipped_unchanged "algo"
expect_rc 2 "synth -t NAME --json the shipped file" -- env BRAID_TOPOLOGY_DIR="$tmp/shipped" "$braid" synth \
  -t pcie-2s4g -c allgather --json "$tmp/shipped/pcie-2s4g.yaml"
shipped_unchanged "synth"
expect_rc 2 "tune -t NAME -o the shipped file" -- env BRAID_TOPOLOGY_DIR="$tmp/shipped" "$braid" tune \
  -t pcie-2s4g -o "$tmp/shipped/pcie-2s4g.yaml"
shipped_unchanged "tune"

# ---- demo: -o is a directory, checked before anything is printed ---------------------------------------------------
cp "$tmp/T.yaml" "$tmp/d.yaml"
expect_rc 2 "demo --topology F -o F" -- "$braid" demo --topology "$tmp/d.yaml" -o "$tmp/d.yaml"
names "demo -o the topology" "-o $tmp/d.yaml and --topology $tmp/d.yaml are the same file"
[ ! -s "$tmp/out" ] && ok || fail "demo -o the topology printed: $(head -1 "$tmp/out")"
cmp -s "$tmp/d.yaml" "$tmp/T.orig" && ok || fail "demo -o the topology changed it"
printf 'x\n' >"$tmp/ar.xml"
# An existing file where a directory is written into cannot be written: exit 1, in demo as in synth's Pareto set.
expect_rc 1 "demo -o an existing file" -- "$braid" demo --topology "$tmp/T.yaml" -o "$tmp/ar.xml"
names "demo -o a file" "-o $tmp/ar.xml: exists and is not a directory"
[ ! -s "$tmp/out" ] && ok || fail "demo -o a file printed: $(head -1 "$tmp/out")"
expect_rc 1 "synth --sizes -o an existing file" -- "$braid" synth -t "$tmp/T.yaml" -c allgather --sizes 1K:1M \
  -o "$tmp/ar.xml"
names "synth set -o a file" "-o $tmp/ar.xml: a Pareto set is written into a directory, and this is none"
[ ! -s "$tmp/out" ] && ok || fail "synth --sizes -o a file printed: $(head -1 "$tmp/out")"
expect_rc 1 "demo -o below a file" -- "$braid" demo --topology "$tmp/T.yaml" -o "$tmp/ar.xml/sub"
names "demo -o below a file" "cannot create $tmp/ar.xml/sub"

# ---- every output path is checked before any work, in the same words in every command ---------------------------
# An empty path is a usage error naming the option; a missing directory, a directory where the file should be and a
# loop of symbolic links fail (exit 1) before anything is read, simulated or synthesized; stdout stays empty.
ln -s "$tmp/loopB" "$tmp/loopA"
ln -s "$tmp/loopA" "$tmp/loopB"
mkdir "$tmp/adir"
outputs=("topo import $tmp/T.yaml -o" "topo draw $tmp/T.yaml -o" "algo ring --coll allreduce -n 4 -o"
  "simulate ring --topology $tmp/T.yaml -b 1K -e 1G --html" "synth -t $tmp/T.yaml -c allgather --time-limit 30 -o"
  "synth -t $tmp/T.yaml -c allgather --time-limit 30 --json" "tune -t $tmp/T.yaml -o")
for cmd in "${outputs[@]}" "demo --topology $tmp/T.yaml --time-limit 30 -o"; do
  # shellcheck disable=SC2086 # the command words split on purpose
  expect_rc 2 "braid $cmd ''" -- "$braid" $cmd ""
  grep -q -- "^braid [a-z ]*: error: --[a-z-]*: an empty path names no file to write" "$tmp/err" && ok ||
    fail "braid $cmd '': $(head -1 "$tmp/err")"
  [ ! -s "$tmp/out" ] && ok || fail "braid $cmd '': printed $(head -1 "$tmp/out")"
done
for cmd in "${outputs[@]}"; do
  # shellcheck disable=SC2086
  expect_rc 1 "braid $cmd nodir/x" -- "$braid" $cmd "$tmp/nodir/x.out"
  names "braid $cmd nodir/x" "cannot write $tmp/nodir/x.out: directory $tmp/nodir does not exist"
  [ ! -s "$tmp/out" ] && ok || fail "braid $cmd nodir/x: printed $(head -1 "$tmp/out")"
  # shellcheck disable=SC2086
  expect_rc 1 "braid $cmd DIR" -- "$braid" $cmd "$tmp/adir"
  names "braid $cmd DIR" "cannot write $tmp/adir: it is a directory"
  # shellcheck disable=SC2086
  expect_rc 1 "braid $cmd LOOP" -- "$braid" $cmd "$tmp/loopA"
  names "braid $cmd LOOP" "$tmp/loopA: too many levels of symbolic links"
done
# The Pareto set's -o is a directory the run creates: its parent is checked as a file's directory is.
expect_rc 1 "synth --sizes FROM:TO -o nodir/set" -- "$braid" synth -t "$tmp/T.yaml" -c allgather --sizes 1K:1M \
  -o "$tmp/nodir/set"
names "synth set nodir" "cannot write $tmp/nodir/set: directory $tmp/nodir does not exist"

# ---- /dev/stdout and /dev/fd/N are written in place, at the shell's offset ---------------------------------------------
{
  echo HEADER
  "$braid" algo ring --coll allreduce -n 4 -o /dev/stdout
  echo TRAILER
} >"$tmp/comb.txt" 2>"$tmp/err"
[ "$(head -1 "$tmp/comb.txt")" = HEADER ] && ok || fail "-o /dev/stdout lost what came before: $(head -1 "$tmp/comb.txt")"
[ "$(tail -1 "$tmp/comb.txt")" = TRAILER ] && ok || fail "-o /dev/stdout lost what came after"
grep -q "<algo " "$tmp/comb.txt" && ok || fail "-o /dev/stdout: no algorithm in the redirected file"
echo PRE >"$tmp/app.txt"
"$braid" topo import "$tmp/T.yaml" -o /dev/stdout >>"$tmp/app.txt" 2>"$tmp/err"
[ "$(head -1 "$tmp/app.txt")" = PRE ] && ok || fail "-o /dev/stdout >> F replaced F"
grep -q "pcie-2s4g" "$tmp/app.txt" && ok || fail "-o /dev/stdout >> F: no topology appended"
echo PRE >"$tmp/fd3.txt"
"$braid" algo ring --coll allgather -n 4 -o /dev/fd/3 3>>"$tmp/fd3.txt" >"$tmp/out" 2>"$tmp/err"
[ "$(head -1 "$tmp/fd3.txt")" = PRE ] && grep -q "<algo " "$tmp/fd3.txt" && ok || fail "-o /dev/fd/3 3>>F"

# ---- not a clash -------------------------------------------------------------------------------------------------
# A shipped topology name is not a file: an output of that name in the working directory is written.
(cd "$tmp" && "$braid" topo draw pcie-2s4g -o pcie-2s4g) >"$tmp/out" 2>"$tmp/err" && ok ||
  fail "topo draw pcie-2s4g -o pcie-2s4g: $(head -1 "$tmp/err")"
grep -q "<svg" "$tmp/pcie-2s4g" && ok || fail "topo draw pcie-2s4g -o pcie-2s4g wrote no SVG"
# A device is written, never replaced: two outputs may share /dev/null.
expect_rc 0 "synth -o /dev/null --json /dev/null" -- "$braid" synth -t pcie-2s4g -c allgather --method forest \
  --sizes 1M -o /dev/null --json /dev/null

finish
