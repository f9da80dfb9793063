#!/bin/sh
# replay-device.sh REPLAY TRACE... - replay each trace through the sim
# arena and through the real device arena of GPU 0 (gpuarena-replay -a
# device: every trace stream other than 0 is a real CUDA stream) and print
# their fragmentation figures side by side.  The two must agree: the sim
# provider stands for the device one.
#
# The replay queues no GPU work, so an event recorded on one of its
# streams has completed by the time it is asked about; the sim replay is
# made with sim_event_delay = 0, which simulates that.  With the default
# delay (4 provider operations, a GPU still busy with the work before the
# free) cross-stream reuse comes later, and multistream_resnet18 reserves
# more (1.046 times its peak against 1.038 on growable segments, since the
# size classes of 84711dc), which is the sim modelling another GPU, not
# the sim and the device disagreeing.
#
# Exit 0 when both replays ran and every trace gave the same peak reserved
# bytes and provider maps in both (or there is no GPU: said so), 1 when a
# replay failed, 2 when a trace's figures differ.
replay=$1
shift
runs=${GA_REPLAY_RUNS:-3}
tmp=${TMPDIR:-/tmp}/ga-replay-device.$$
trap 'rm -f "$tmp".sim "$tmp".dev "$tmp".err' EXIT
"$replay" --json -n "$runs" -a sim -o sim_event_delay=0 "$@" > "$tmp".sim || {
    echo "replay-device: the sim replay failed (exit $?)"
    exit 1
}
"$replay" --json -n "$runs" -a device "$@" > "$tmp".dev 2> "$tmp".err
rc=$?
if [ $rc -ne 0 ]; then
    cat "$tmp".err
    if grep -q -e "no CUDA driver" -e "no GPU" -e "no CUDA-capable" "$tmp".err; then
        echo "replay-device: skipped: no GPU here"
        exit 0
    fi
    [ -s "$tmp".dev ] || {
        echo "replay-device: the device replay failed (exit $rc)"
        exit 1
    }
    echo "replay-device: the device replay failed (exit $rc); what it finished:"
fi
echo "traces replayed through the sim arena and the device arena of GPU 0 ($runs timed runs)"
awk '
function get(key,   m) {
    if (!match($0, "\"" key "\":(\"[^\"]*\"|[^,}]*)")) return "-"
    m = substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
    gsub(/"/, "", m)
    return m
}
function gib(v) { return v == "-" ? "-" : sprintf("%.3f", v / 1073741824) }
FNR == 1 { kind = (FILENAME ~ /\.sim$/) ? "sim" : "dev" }
/^ \{"trace":/ {
    t = get("trace"); sub(/.*\//, "", t)
    if (!(t in seen)) { seen[t] = 1; order[++n] = t }
    ok[t, kind] = get("ok")
    req[t, kind] = get("peak_requested"); res[t, kind] = get("peak_reserved")
    ratio[t, kind] = get("ratio"); maps[t, kind] = get("provider_maps")
    waits[t, kind] = get("cross_stream_waits"); ns[t, kind] = get("ns_per_event")
}
END {
    printf "%-28s | %9s | %19s | %15s | %13s | %11s | %15s | %s\n", "trace", "requested",
        "reserved GiB sim/dev", "ratio sim/dev", "maps sim/dev", "waits s/d", "ns/event sim/dev",
        "same?"
    differ = 0
    for (i = 1; i <= n; i++) {
        t = order[i]
        if (ok[t, "dev"] != "true") {
            printf "%-28s | %9s | device replay failed\n", t, gib(req[t, "sim"]); differ++; continue
        }
        same = (res[t, "sim"] == res[t, "dev"] && maps[t, "sim"] == maps[t, "dev"]) ? "yes" : "NO"
        if (same == "NO") differ++
        printf "%-28s | %9s | %9s/%-9s | %7.3f/%-7.3f | %6s/%-6s | %5s/%-5s | %7.1f/%-7.1f | %s\n",
            t, gib(req[t, "sim"]), gib(res[t, "sim"]), gib(res[t, "dev"]), ratio[t, "sim"],
            ratio[t, "dev"], maps[t, "sim"], maps[t, "dev"], waits[t, "sim"], waits[t, "dev"],
            ns[t, "sim"], ns[t, "dev"], same
    }
    printf "(requested and reserved: peaks in GiB; same: equal peak reserved bytes and provider maps)\n"
    if (differ) printf "%d trace(s) differ between the sim and the device arena\n", differ
    else printf "every trace gives the same figures in both arenas\n"
    exit differ ? 2 : 0
}' "$tmp".sim "$tmp".dev
same=$?
[ $rc -eq 0 ] || exit 1
exit $same
