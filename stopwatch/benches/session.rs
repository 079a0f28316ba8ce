//! Remote sessions: how fast `framelog serve` (its server code, in this process) takes frames
//! from three programs over loopback, against a floor measured in the same run, and how long
//! a frame takes from its end in a connected program to its arrival in the server's log.
//!
//! - throughput: three client threads, each a program (its own connection, Advertise,
//!   StartSession answered), stream pre-encoded frame records as fast as they can; the
//!   server decodes, rewrites keys, checksums and appends them. Floor: the same bytes over
//!   three loopback connections to threads that only read them.
//! - latency: a connected `Recorder` records frames at a steady rate; a reader tails the
//!   server's log and compares each end record's arrival with its timestamp.
//!
//! `cargo bench -p framelog-stopwatch --bench session`

#![allow(missing_docs)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use formats::protocol::{self, Advertise, Kind, Reply, encode_frames};
use formats::{Category, FrameEnd, FrameStart, Record, ThreadInfo};
use framelog::LogReader;
use framelog::remote::wire::read_message;
use framelog::remote::{Server, ServerOptions};
use stopwatch::Stopwatch;

const PROGRAMS: usize = 3;
/// Frames per message (about 1 MiB, like a writer's batch).
const FRAMES_PER_MESSAGE: u32 = 22_000;
/// Messages each program sends per run.
const MESSAGES: usize = 60;

/// One Frames message of `FRAMES_PER_MESSAGE` frames (header included).
fn message() -> Vec<u8> {
    let mut records = Vec::new();
    Record::ThreadInfo(ThreadInfo {
        worker: 0,
        thread: 1,
        timestamp: 1,
        name: "bench",
    })
    .encode_to_vec(&mut records);
    let t0 = 1_700_000_000_000_000_000u64;
    for id in 1..=FRAMES_PER_MESSAGE {
        Record::Start(FrameStart {
            parent: formats::Parent::NotRecorded,
            id,
            worker: 0,
            timestamp: t0 + u64::from(id) * 100,
            context: id,
            category: Category::HTTP,
            label: "GET /orders",
        })
        .encode_to_vec(&mut records);
        Record::End(FrameEnd {
            id,
            worker: 0,
            timestamp: t0 + u64::from(id) * 100 + 50,
        })
        .encode_to_vec(&mut records);
    }
    let mut out = Vec::new();
    encode_frames(&records, &mut out);
    out
}

/// Connects as a program and waits for the server's StartSession; returns the stream.
fn open_session(addr: &str, instance: u64) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let mut out = Vec::new();
    Advertise {
        protocol: protocol::PROTOCOL_VERSION,
        instance,
        pid: 1000 + instance as u32,
        suspended: false,
        records_locally: false,
        name: format!("bench-{instance}"),
        token: String::new(),
        commands: vec![(protocol::START_SESSION, 2)],
    }
    .encode(&mut out);
    s.write_all(&out).unwrap();
    let mut payload = Vec::new();
    assert_eq!(
        read_message(&mut s, &mut payload, usize::MAX).unwrap(),
        Some(Kind::Command)
    );
    out.clear();
    Reply::ok(protocol::START_SESSION, payload[1]).encode(&mut out);
    s.write_all(&out).unwrap();
    s
}

/// Frames per second the server appended, all programs together.
fn server_run(msg: &Arc<Vec<u8>>, run: u64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = ServerOptions::recorder(dir.path());
    opts.log = Arc::new(|_: &str| {});
    let server = Server::bind("127.0.0.1:0", opts).unwrap();
    let addr = server.local_addr().to_string();
    let streams: Vec<TcpStream> = (0..PROGRAMS)
        .map(|p| open_session(&addr, run * 10 + p as u64))
        .collect();
    let total = (PROGRAMS * MESSAGES) as u64 * u64::from(FRAMES_PER_MESSAGE);
    let t = Instant::now();
    let senders: Vec<_> = streams
        .into_iter()
        .map(|mut s| {
            let msg = msg.clone();
            std::thread::spawn(move || {
                for _ in 0..MESSAGES {
                    s.write_all(&msg).unwrap();
                }
                s
            })
        })
        .collect();
    while server.frames() < total {
        std::thread::sleep(Duration::from_micros(200));
    }
    let secs = t.elapsed().as_secs_f64();
    for s in senders {
        drop(s.join().unwrap());
    }
    total as f64 / secs
}

/// Frames per second (bytes of the same messages) three loopback connections carry to
/// threads that only read them.
fn floor_run(msg: &Arc<Vec<u8>>) -> f64 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let bytes_each = msg.len() * MESSAGES;
    // Connect first, then accept (the listener's backlog holds the connections).
    let clients: Vec<TcpStream> = (0..PROGRAMS)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    let readers: Vec<_> = (0..PROGRAMS)
        .map(|_| {
            let (mut s, _) = listener.accept().unwrap();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 20];
                let mut n = 0;
                while n < bytes_each {
                    n += s.read(&mut buf).unwrap();
                }
            })
        })
        .collect();
    let t = Instant::now();
    let senders: Vec<_> = clients
        .into_iter()
        .map(|mut s| {
            let msg = msg.clone();
            std::thread::spawn(move || {
                for _ in 0..MESSAGES {
                    s.write_all(&msg).unwrap();
                }
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    for s in senders {
        s.join().unwrap();
    }
    (PROGRAMS * MESSAGES) as f64 * f64::from(FRAMES_PER_MESSAGE) / secs
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// (p50, p99, max) in ms of end-of-frame to in-the-log, at `per_second` frames/s for 3 s.
fn latency(per_second: u64) -> (f64, f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = ServerOptions::recorder(dir.path());
    opts.log = Arc::new(|_: &str| {});
    let server = Server::bind("127.0.0.1:0", opts).unwrap();
    let rec = Arc::new(
        Stopwatch::builder()
            .connect(server.local_addr().to_string())
            .suspend(Duration::from_secs(30))
            .build()
            .unwrap(),
    );
    let run = Duration::from_secs(3);
    let r = rec.clone();
    let producer = std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut n = 0u64;
        while t0.elapsed() < run {
            // Keep to the rate: frames due by now.
            let due = (t0.elapsed().as_secs_f64() * per_second as f64) as u64;
            while n < due {
                drop(r.start("latency/frame"));
                n += 1;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        n
    });
    let mut lat = Vec::new();
    let mut reader = None;
    let deadline = Instant::now() + run + Duration::from_secs(2);
    while Instant::now() < deadline {
        if reader.is_none() {
            reader = LogReader::open(dir.path()).ok();
        }
        if let Some(rd) = &mut reader {
            rd.read_available(|_, rec| {
                if let Record::End(e) = rec {
                    lat.push(now_ns().saturating_sub(e.timestamp) as f64 / 1e6);
                }
            })
            .unwrap();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let n = producer.join().unwrap();
    drop(rec);
    assert!(
        lat.len() as u64 >= n * 9 / 10,
        "most frames arrived: {} of {n}",
        lat.len()
    );
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize];
    (q(0.5), q(0.99), *lat.last().unwrap())
}

fn main() {
    let msg = Arc::new(message());
    let mut served = Vec::new();
    let mut floor = Vec::new();
    for run in 0..3 {
        floor.push(floor_run(&msg));
        served.push(server_run(&msg, run));
    }
    served.sort_by(f64::total_cmp);
    floor.sort_by(f64::total_cmp);
    println!(
        "serve: {PROGRAMS} programs over loopback: {:.1} M frames/s appended (median of 3: {:?}); floor (same bytes, read and discarded): {:.1} M frames/s; ratio {:.2}",
        served[1] / 1e6,
        served
            .iter()
            .map(|r| (r / 1e5).round() / 10.0)
            .collect::<Vec<_>>(),
        floor[1] / 1e6,
        served[1] / floor[1]
    );
    for rate in [1_000, 200_000] {
        let (p50, p99, max) = latency(rate);
        println!(
            "latency at {rate} frames/s: frame end to server log p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms"
        );
    }
}
