#!/bin/sh
# gpuarena-topo as a user meets it: the GPUs of a topology file with their
# nearest nodes; a machine with nodes numbered 64 and above says which
# nodes gpuarena leaves alone; a topology file it cannot read is named as
# the user named it, with why; standard output that cannot be written is
# an error (exit 3).
. "${srcdir:-$(dirname "$0")}/man-helpers.sh"
T=$top_builddir/tools/gpuarena-topo
[ -x "$T" ] || { echo "FAIL: $T not built" >&2; exit 1; }
tmp=${TMPDIR:-/tmp}/check-topo-tool.$$
trap 'rm -f "$tmp".*' EXIT
unset GPUARENA_TOPOLOGY HWLOC_XMLFILE HWLOC_SYNTHETIC
"$T" -t "$top_srcdir/tests/data/32em64t-2n8c2t-pci-normalio.xml" > "$tmp.out" ||
    fail "-t FILE did not exit 0"
grep -qF "GPUs: 3" "$tmp.out" || fail "GPUs of the file: $(cat "$tmp.out")"
grep -qF "NUMA nodes: 2 (0-1)" "$tmp.out" || fail "nodes of the file: $(cat "$tmp.out")"
grep -q "places memory on nodes 0-63 only" "$tmp.out" && fail "a 64-node line for two nodes"
# hwloc reads a synthetic topology from the environment as this machine's.
HWLOC_SYNTHETIC="pack:80 numa:1 core:1 pu:1" "$T" > "$tmp.out" || fail "80 nodes: exit $?"
if grep -qF "NUMA nodes: 80" "$tmp.out"; then
    grep -qxF "  gpuarena places memory on nodes 0-63 only: not on nodes 64-79" "$tmp.out" ||
        fail "nodes past 63 not named: $(grep -A1 'NUMA nodes' "$tmp.out")"
else
    echo "hwloc took no synthetic topology from HWLOC_SYNTHETIC: that part not run"
fi
if [ -w /dev/full ]; then
    "$T" > /dev/full 2> "$tmp.err"
    [ $? = 3 ] || fail "> /dev/full did not exit 3"
    grep -qF "cannot write standard output" "$tmp.err" || fail "write error: $(cat "$tmp.err")"
fi
# A closed pipe: exit 3 too (SIGPIPE killed the tool: 141).
rc=$( { { sleep 1; "$T" 2> "$tmp.err"; echo $? >&3; } | true; } 3>&1)
[ "$rc" = 3 ] || fail "into a closed pipe: exit $rc, not 3"
# A file that is not there, or not a topology: exit 1, the option named
# (not GPUARENA_TOPOLOGY, which the option sets inside), and why.
"$T" -t "$tmp.none" > /dev/null 2> "$tmp.err"
[ $? = 1 ] || fail "a missing -t file did not exit 1"
grep -qF -- "--topology: cannot read the hwloc XML topology file '$tmp.none': No such file" \
    "$tmp.err" || fail "missing file: $(cat "$tmp.err")"
echo '<topology>' > "$tmp.xml"
"$T" --topology "$tmp.xml" > /dev/null 2> "$tmp.err"
[ $? = 1 ] || fail "a bad --topology file did not exit 1"
grep -q -- "^gpuarena-topo: --topology: .*'$tmp.xml': not a topology that hwloc reads" "$tmp.err" ||
    fail "bad file: $(cat "$tmp.err")"
GPUARENA_TOPOLOGY=$tmp.none "$T" > /dev/null 2> "$tmp.err"
grep -qF "gpuarena-topo: GPUARENA_TOPOLOGY: cannot read" "$tmp.err" ||
    fail "GPUARENA_TOPOLOGY's file: $(cat "$tmp.err")"
# A configuration gpuarena would refuse: said, the report still made,
# exit 1 (it was 0); a node list the topology lacks names its origin.
X=$top_srcdir/tests/data/32em64t-2n8c2t-pci-normalio.xml
GPUARENA_OPTIONS=pinned.numa=bogus "$T" -t "$X" > "$tmp.out" 2> "$tmp.err"
[ $? = 1 ] || fail "a bad GPUARENA_OPTIONS value did not exit 1"
grep -qF "gpuarena-topo: GPUARENA_OPTIONS: key 'pinned.numa': bad value 'bogus'" "$tmp.err" ||
    fail "bad value: $(cat "$tmp.err")"
grep -qF "GPUs: 3" "$tmp.out" || fail "no report after a bad configuration: $(cat "$tmp.out")"
GPUARENA_OPTIONS=pinned.numa=5 "$T" -t "$X" > "$tmp.out" 2> "$tmp.err"
[ $? = 1 ] || fail "a missing node did not exit 1"
grep -qF "pinned arena:  error: GPUARENA_OPTIONS: key 'pinned.numa': NUMA node 5 does not exist" \
    "$tmp.out" || fail "missing node: $(grep pinned "$tmp.out")"
# A per-device list names its own section's key (it named 'pinned.numa',
# which was valid); the host arena's list is checked too (exit 0 before).
GPUARENA_OPTIONS=pinned.numa=0,pinned.1.numa=5 "$T" -t "$X" > "$tmp.out" 2> "$tmp.err"
[ $? = 1 ] || fail "a missing node of pinned.1.numa did not exit 1"
grep -qF "error: GPUARENA_OPTIONS: key 'pinned.1.numa': NUMA node 5 does not exist" "$tmp.out" ||
    fail "per-device key: $(grep pinned "$tmp.out")"
GPUARENA_OPTIONS=host.numa=5 "$T" -t "$X" > "$tmp.out" 2> "$tmp.err"
[ $? = 1 ] || fail "a missing node of host.numa did not exit 1"
grep -qF "gpuarena-topo: GPUARENA_OPTIONS: key 'host.numa': NUMA node 5 does not exist" \
    "$tmp.err" || fail "host.numa: $(cat "$tmp.err")"
# This machine (as hwloc is told to take the file) with a node of no
# memory: the line under the pinned arena's says the library binds to the
# others only (the arena counts such segments in numa_unbound).
sed 's/gp_index="83" local_memory="[0-9]*"/gp_index="83" local_memory="0"/' "$X" > "$tmp.xml"
HWLOC_XMLFILE=$tmp.xml HWLOC_THISSYSTEM=1 GPUARENA_OPTIONS=pinned.numa=0-1 "$T" > "$tmp.out" \
    2> "$tmp.err" || fail "a node of no memory: exit $?: $(cat "$tmp.err")"
grep -qF "binds to node 0 only: node 1 has no memory" "$tmp.out" ||
    fail "a node of no memory: $(grep -A1 pinned "$tmp.out")"
HWLOC_XMLFILE=$tmp.xml HWLOC_THISSYSTEM=1 GPUARENA_OPTIONS=pinned.numa=1 "$T" > "$tmp.out" \
    2> "$tmp.err" || fail "only a node of no memory: exit $?"
grep -qF "binds nowhere: node 1 has no memory" "$tmp.out" ||
    fail "only a node of no memory: $(grep -A1 pinned "$tmp.out")"
GPUARENA_CONF=$tmp.none "$T" -t "$X" > /dev/null 2> "$tmp.err"
[ $? = 1 ] || fail "a missing GPUARENA_CONF file did not exit 1"
"$T" -t '' > /dev/null 2> "$tmp.err"
[ $? = 2 ] || fail "an empty --topology did not exit 2"
"$T" --bogus > /dev/null 2> "$tmp.err"
[ $? = 2 ] || fail "a bad option did not exit 2"
[ $ga_fail = 0 ] && echo "gpuarena-topo behaves"
exit $ga_fail
