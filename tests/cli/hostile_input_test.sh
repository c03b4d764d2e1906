#!/usr/bin/env bash
# Hostile inputs as users paste them: names that are not UTF-8 (from a YAML topology, an nvidia-smi NIC legend, an
# NCCL XML net name), endless and huge files, empty sketches, counts and sizes that would allocate without bound,
# and an allocation failure. Every command answers with well-formed output or an error line, never an abort.
# Usage: hostile_input_test.sh BRAID_BINARY SOURCE_DIR SHARED_DIR
source "$(dirname "$0")/lib.sh" "$@"
# Strict UTF-8 JSON; well-formed XML; the HTML page valid UTF-8 with every inline <svg> well-formed XML.
json_ok() { python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$1" 2>"$tmp/py.err"; }
svg_ok() { python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$1" 2>"$tmp/py.err"; }
html_ok() {
  python3 - "$1" 2>"$tmp/py.err" <<'PY'
import re, sys, xml.dom.minidom as m
text = open(sys.argv[1], "rb").read().decode("utf-8")
svgs = re.findall(r"<svg.*?</svg>", text, re.S)
assert svgs, "no inline svg"
for s in svgs:
    m.parseString(s.encode("utf-8"))
PY
}
fffd=$'\xef\xbf\xbd'
has_fffd() { grep -q "$fffd" "$1"; }
why() { head -c 300 "$tmp/py.err" | tr '\n' ' '; }

# ---- names that are not UTF-8 -------------------------------------------------------------------------------
# A Braid YAML topology whose name, switch name and GPU model hold invalid bytes and a control character.
cat >"$tmp/names.yaml" <<'EOF'
name: "tiny-NAME"
templates:
  box:
    gpus: {count: 2, model: "GPU-MODEL"}
    switches:
      - {name: "sw-NAME", kind: pcie_switch, numa: 0}
    links:
      - {a: [gpu0, gpu1], b: "sw-NAME", kind: pcie, bandwidth: 24, alpha: 1.0}
nodes: {template: box, count: 1}
EOF
sed -i 's/NAME/\xff\xfe\x01/g; s/MODEL/\xc3(/' "$tmp/names.yaml"
# An nvidia-smi matrix whose NIC legend names the NIC with invalid bytes.
printf '        GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity
GPU0     X      NV4     PIX     0-11            0
GPU1    NV4      X      PIX     0-11            0
NIC0    PIX     PIX      X

Legend:

  X    = Self
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_\xff\xc3bad
' >"$tmp/smi.txt"
# An NCCL topology XML whose <net name> holds invalid bytes.
cat >"$tmp/nccl.xml" <<'EOF'
<system version="1">
  <cpu numaid="0" affinity="ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:01:00.0" class="0x030000" vendor="0x10de" device="0x2684" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="89" rank="0" gdr="0"/>
    </pci>
    <pci busid="0000:02:00.0" class="0x030000" vendor="0x10de" device="0x2684" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="89" rank="1" gdr="0"/>
    </pci>
    <pci busid="0000:03:00.0" class="0x020700" vendor="0x15b3" device="0x1013" link_speed="8.0 GT/s PCIe" link_width="16">
      <nic>
        <net name="NETNAME" dev="0" speed="100000" port="1" latency="0.000000" guid="0x1" maxconn="262144" gdr="0"/>
      </nic>
    </pci>
  </cpu>
</system>
EOF
sed -i 's/NETNAME/mlx5_\xff\xfe/' "$tmp/nccl.xml"

for input in names.yaml smi.txt nccl.xml; do
  f=$tmp/$input
  expect_rc 0 "$input: topo show --json" -- "$braid" topo show "$f" --json
  if json_ok "$tmp/out"; then ok; else fail "$input: topo show --json is not UTF-8 JSON: $(why)"; fi
  has_fffd "$tmp/out" && ok || fail "$input: topo show --json: the invalid bytes are not replaced by U+FFFD"

  expect_rc 0 "$input: bound --json" -- "$braid" bound --topology "$f" --coll allgather -b 1K -e 64K --json
  if json_ok "$tmp/out"; then ok; else fail "$input: bound --json is not UTF-8 JSON: $(why)"; fi

  expect_rc 0 "$input: simulate --json" -- "$braid" simulate ring --topology "$f" --coll allgather -b 1K -e 64K \
    --json --html "$tmp/$input.html"
  if json_ok "$tmp/out"; then ok; else fail "$input: simulate --json is not UTF-8 JSON: $(why)"; fi
  if html_ok "$tmp/$input.html"; then ok; else fail "$input: simulate --html: $(why)"; fi

  expect_rc 0 "$input: synth --json -" -- "$braid" synth --topology "$f" --coll allgather --time-limit 20 --json -
  if json_ok "$tmp/out"; then ok; else fail "$input: synth --json - is not UTF-8 JSON: $(why)"; fi
  grep -q "internal error" "$tmp/err" && fail "$input: synth: $(head -1 "$tmp/err")" || ok

  expect_rc 0 "$input: topo draw" -- "$braid" topo draw "$f" -o "$tmp/$input.svg"
  if svg_ok "$tmp/$input.svg"; then ok; else fail "$input: topo draw wrote an SVG that is not well-formed: $(why)"; fi
  has_fffd "$tmp/$input.svg" && ok || fail "$input: topo draw: the invalid bytes are not replaced by U+FFFD"

  # Imported to YAML and read back, the names still come out as well-formed JSON.
  expect_rc 0 "$input: topo import" -- "$braid" topo import "$f" -o "$tmp/$input.out.yaml"
  expect_rc 0 "$input: topo show of the import" -- "$braid" topo show "$tmp/$input.out.yaml" --json
  if json_ok "$tmp/out"; then ok; else fail "$input: the imported YAML shows as invalid JSON: $(why)"; fi
done

# ---- empty sketches -------------------------------------------------------------------------------------------
i=0
for content in '' '\n\n' '# a comment\n# and another\n' 'name: only-a-name\n' '# only a name\nname: x\n'; do
  i=$((i + 1))
  printf "$content" >"$tmp/empty$i.yaml"
  expect_rc 1 "empty sketch $i" -- "$braid" synth --topology pcie-2s4g --coll allgather --sketch "$tmp/empty$i.yaml"
  # Nothing but white space is an empty file, as for every reader; comments alone an empty sketch.
  want="empty sketch"
  [ "$i" -le 2 ] && want="empty file"
  grep -qF "$tmp/empty$i.yaml: $want" "$tmp/err" && ok || fail "empty sketch $i: $(head -1 "$tmp/err")"
done

printf '{}\n' >"$tmp/empty.json"  # a TACCL JSON sketch: its required fields are named
expect_rc 1 "empty JSON sketch" -- "$braid" synth --topology pcie-2s4g --coll allgather --sketch "$tmp/empty.json"
grep -qF "$tmp/empty.json: nnodes: missing" "$tmp/err" && ok || fail "empty JSON sketch: $(head -1 "$tmp/err")"

# ---- empty files, binary files and loops of symbolic links: one message per kind, from every reader ---------------
# peak_kib CMD...: runs CMD (stdout in $tmp/out, stderr in $tmp/err) and prints its peak resident memory in KiB.
peak_kib() {
  python3 -c 'import resource, subprocess, sys
with open(sys.argv[1], "w") as o, open(sys.argv[2], "w") as e:
    subprocess.run(sys.argv[3:], stdout=o, stderr=e)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$tmp/out" "$tmp/err" "$@"
}
: >"$tmp/empty.txt"
printf ' \n\t\r\n' >"$tmp/blank.txt"
ln -s "$tmp/loopB" "$tmp/loopA"
ln -s "$tmp/loopA" "$tmp/loopB"
printf 'name: x\n\0rest\n' >"$tmp/nul.yaml"
printf '<algo name="x"\0/>\n' >"$tmp/nul.xml"
printf '{"format": "braid-algorithm"\0}\n' >"$tmp/nul.json"
printf '        GPU0    GPU1\nGPU0     X      NV4\nGPU1    NV4      X\0\n' >"$tmp/nul.smi"
# readers FILE: the commands that read FILE as a topology, an algorithm or a sketch.
readers() {
  printf '%s\n' "topo show $1" "topo import $1 -o $tmp/imported.yaml" "bound -t $1 -c allgather" "verify $1" \
    "simulate $1 -t pcie-2s4g" "algo ring -c allgather -t $1" "synth -t pcie-2s4g -c allgather --sketch $1"
}
for f in empty.txt blank.txt loopA; do
  want="$tmp/$f: empty file"
  [ "$f" = loopA ] && want="$tmp/$f: too many levels of symbolic links"
  while read -r cmd; do
    # shellcheck disable=SC2086 # the command words split on purpose
    expect_rc 1 "braid $cmd" -- "$braid" $cmd
    grep -qF "$want" "$tmp/err" && ok || fail "braid $cmd: $(head -1 "$tmp/err")"
  done < <(readers "$tmp/$f")
done
for f in nul.yaml:8 nul.xml:14 nul.json:28 nul.smi:59; do
  expect_rc 1 "topo show ${f%%:*}" -- "$braid" topo show "$tmp/${f%%:*}"
  grep -qF "$tmp/${f%%:*}: not a text file (NUL byte at offset ${f#*:})" "$tmp/err" && ok ||
    fail "topo show ${f%%:*}: $(head -1 "$tmp/err")"
  expect_rc 1 "verify ${f%%:*}" -- "$braid" verify "$tmp/${f%%:*}"
  grep -qF "$tmp/${f%%:*}: not a text file (NUL byte at offset ${f#*:})" "$tmp/err" && ok ||
    fail "verify ${f%%:*}: $(head -1 "$tmp/err")"
done
# 256 MiB of NUL bytes is refused after its first block: far less memory than the file.
head -c $((256 << 20)) /dev/zero >"$tmp/zeros.yaml"
kib=$(peak_kib "$braid" topo show "$tmp/zeros.yaml")
grep -qF "$tmp/zeros.yaml: not a text file (NUL byte at offset 0)" "$tmp/err" && ok || fail "zeros: $(head -1 "$tmp/err")"
[ "$kib" -lt $((64 << 10)) ] && ok || fail "256 MiB of NUL bytes: peak RSS $kib KiB, want below 64 MiB"
rm -f "$tmp/zeros.yaml"

# ---- endless and huge files ---------------------------------------------------------------------------------
# A device is refused before it is read (it would take 256 MiB of zeros to reach the limit).
if [ -e /dev/zero ]; then
  expect_rc 1 "topo show /dev/zero" -- "$braid" topo show /dev/zero
  grep -qF "/dev/zero: a device or socket, not a regular file or pipe" "$tmp/err" && ok ||
    fail "/dev/zero: $(head -1 "$tmp/err")"
  expect_rc 1 "verify /dev/zero" -- "$braid" verify /dev/zero
  grep -qF "/dev/zero: a device or socket, not a regular file or pipe" "$tmp/err" && ok ||
    fail "verify /dev/zero: $(head -1 "$tmp/err")"
else
  skip "no /dev/zero"
fi
# A named pipe with no writer is an empty input at once: open(2) must not wait for a writer that never comes.
mkfifo "$tmp/nowriter.yaml"
expect_rc 1 "topo show of a FIFO without a writer" -- timeout 10 "$braid" topo show "$tmp/nowriter.yaml"
grep -qF "$tmp/nowriter.yaml: empty file (a pipe with no writer" "$tmp/err" && ok ||
  fail "FIFO without a writer: $(head -1 "$tmp/err")"
rm -f "$tmp/nowriter.yaml"
truncate -s 300M "$tmp/huge.yaml"
expect_rc 1 "topo show of a 300 MiB file" -- "$braid" topo show "$tmp/huge.yaml"
grep -qF "huge.yaml: larger than 256 MiB" "$tmp/err" && ok || fail "huge file: $(head -1 "$tmp/err")"
expect_rc 1 "synth --sketch of a 300 MiB file" -- "$braid" synth --topology pcie-2s4g --coll allgather \
  --sketch "$tmp/huge.yaml"
grep -qF "huge.yaml: larger than 256 MiB" "$tmp/err" && ok || fail "huge sketch: $(head -1 "$tmp/err")"
rm -f "$tmp/huge.yaml"

# ---- counts and sizes that would allocate without bound ------------------------------------------------------
expect_rc 2 "simulate --instances 1000000000" -- "$braid" simulate ring --topology dgx1-v100 -b 1M -e 1M \
  --instances 1000000000
grep -q -- "--instances: 1000000000 must be between 1 and 32" "$tmp/err" && ok || fail "--instances: $(cat "$tmp/err")"
expect_rc 2 "simulate -e 2^62" -- "$braid" simulate ring --topology dgx1-v100 -b 1M -e 4611686018427387904
grep -q -- "-e/--maxbytes: 4611686018427387904 is more than" "$tmp/err" && ok || fail "-e: $(cat "$tmp/err")"
expect_rc 2 "simulate --timeline-size 1024G" -- "$braid" simulate ring --topology dgx1-v100 -b 1M -e 1M \
  --timeline-size 1024G
expect_rc 2 "synth --sizes 1024G" -- "$braid" synth --topology pcie-2s4g --coll allgather --sizes 1K,1024G
grep -q -- "--sizes: 1024G is more than" "$tmp/err" && ok || fail "--sizes: $(cat "$tmp/err")"
expect_rc 2 "algo -n 1000000000" -- "$braid" algo ring --coll allreduce -n 1000000000
grep -q -- "-n 1000000000: the number of ranks must be in 1..2048" "$tmp/err" && ok || fail "-n: $(cat "$tmp/err")"

# ---- an allocation that fails is an error line naming the input, not an abort -------------------------------
# A 200 MiB file under a 200 MB address-space limit: reading it cannot allocate. Sanitizer builds reserve far more
# address space than that at start and cannot run under the limit at all: skipped there.
if (ulimit -v 200000 && "$braid" --version) >/dev/null 2>&1; then
  truncate -s 200M "$tmp/big.yaml"
  (ulimit -v 200000 && exec "$braid" topo show "$tmp/big.yaml") >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ "$rc" -eq 1 ] && ok || fail "out of memory: exit $rc, want 1 ($(head -1 "$tmp/err"))"
  grep -qF "braid topo show: error: while reading $tmp/big.yaml: out of memory" "$tmp/err" && ok ||
    fail "out of memory: $(head -1 "$tmp/err")"
  rm -f "$tmp/big.yaml"
else
  skip "cannot run braid under a 200 MB address-space limit (a sanitizer build)"
fi

# Standard output on a full device: every command that prints its result fails (exit 1) and says so, never exit 0
# with the result lost.
if [ -c /dev/full ] && [ -w /dev/full ]; then
  for cmd in "topo show dgx1-v100" "topo show dgx1-v100 --json" "bound --topology dgx1-v100 --coll allreduce --json" \
    "algo ring --coll allreduce -n 4 -o /dev/stdout"; do
    # shellcheck disable=SC2086 # the command words split on purpose
    "$braid" $cmd >/dev/full 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 1 ] && ok || fail "braid $cmd > /dev/full: exit $rc, want 1"
    grep -q "standard output\|No space left on device" "$tmp/err" && ok ||
      fail "braid $cmd > /dev/full: $(head -1 "$tmp/err")"
  done
else
  skip "no writable /dev/full"
fi

finish
