"""Writes the least a Perfetto TrackEvent trace can carry for a stress log's slices.

    python3 tests/web/perfetto_bare_trace.py N OUT.pftrace [--points]

Two thread tracks, on each N times a frame holding a child holding a leaf (3 N slices a
track, 6 N in all), names interned once per sequence, no categories, flows, annotations
and, unless `--points`, no sorter points (with it, the tracing service's flushed/read-buffers
points every 65,536 packets, as `framelog export --format perfetto` plans them). Loaded with `perfetto_load.mjs` beside `framelog export --format
perfetto` of a log with as many slices, it shows what the Perfetto UI's own per-slice work
costs whatever the file holds (docs/PERFORMANCE.md, *Export*). Development use; no test
runs it. Field numbers are those of Perfetto's published trace_packet.proto,
track_event.proto and track_descriptor.proto.
"""
import sys
def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f; v >>= 7
        if v: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
def key(f, wt): return varint((f << 3) | wt)
def vi(f, v): return key(f, 0) + varint(v)
def ld(f, b): return key(f, 2) + varint(len(b)) + b
if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ['--points']):
    sys.exit('usage: perfetto_bare_trace.py N OUT.pftrace [--points]')
points = sys.argv[3:] == ['--points']
n = int(sys.argv[1]); tracks = 2; out = open(sys.argv[2], 'wb')
written = 0
def packet(body):
    global written
    out.write(ld(1, body))
    written += 1
    # Packets are in time order here, so any boundary is a safe point.
    if points and written % 65536 == 0:
        for flag in (3, 3, 4):  # all_data_sources_flushed twice, read_tracing_buffers_completed
            out.write(ld(1, ld(69, vi(flag, 1))))
for t in range(tracks):
    thread = vi(1, 1) + vi(2, 100 + t)
    packet(ld(60, vi(1, 1000 + t) + ld(4, thread)))
names = [b"frame", b"child", b"leaf"]
for t in range(tracks):
    seq = 10 + t
    interned = b"".join(ld(2, vi(1, i + 1) + ld(2, nm)) for i, nm in enumerate(names))
    packet(vi(10, seq) + vi(13, 1) + ld(12, interned))
buf = []
for i in range(n):
    ts = 1_000_000 + i * 300
    for t in range(tracks):
        seq = 10 + t
        b = vi(10, seq) + vi(13, 2)
        ev = lambda typ, nm=None: ld(11, vi(9, typ) + vi(11, 1000 + t) + (vi(10, nm) if nm else b""))
        # frame > child > leaf, nested.
        packet(vi(8, ts) + b + ev(1, 1))
        packet(vi(8, ts + 50) + b + ev(1, 2))
        packet(vi(8, ts + 100) + b + ev(1, 3))
        packet(vi(8, ts + 150) + b + ev(2))
        packet(vi(8, ts + 200) + b + ev(2))
        packet(vi(8, ts + 250) + b + ev(2))
out.close()
