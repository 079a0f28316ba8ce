//! A `DataStore` keeps answering, without SIGBUS, while another process cuts the torn tail of
//! the data file it reads: it reads (never maps) the bytes of whole indexed batches.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use formats::{DataMarker, FileKind, FrameKey};
use framelog::{DataBatch, DataStore, LogWriter, segments};
use framelog_tests::expected_data;

/// The sizes of this process's mappings of `path`, from /proc/self/maps.
fn mapped_sizes(path: &std::path::Path) -> Vec<u64> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let name = path.to_str().unwrap();
    maps.lines()
        .filter(|l| l.ends_with(name))
        .map(|l| {
            let range = l.split_whitespace().next().unwrap();
            let (a, b) = range.split_once('-').unwrap();
            u64::from_str_radix(b, 16).unwrap() - u64::from_str_radix(a, 16).unwrap()
        })
        .collect()
}

#[test]
fn lookups_survive_another_process_cutting_a_torn_data_tail() {
    let dir = tempfile::tempdir().unwrap();
    let data_path = segments::segment_path(dir.path(), FileKind::FrameData, 1);
    let mut keys = Vec::new();
    {
        let w = LogWriter::open(dir.path()).unwrap();
        let mut batch = DataBatch::new();
        let first = w.reserve_ids(400).unwrap();
        for id in first..first + 400 {
            let key = FrameKey::new(w.worker(), id);
            batch.push(key, &formats::to_document(&expected_data(key)).unwrap());
            keys.push(key);
        }
        w.append_data(&batch).unwrap();
    }
    let whole = std::fs::metadata(&data_path).unwrap().len();
    // A writer died 600 KiB into a 1 MiB data batch: a torn tail spanning many pages.
    let marker = DataMarker {
        worker: 9,
        len: 1 << 20,
        count: 1,
        data_crc: 0,
        index_crc: 0,
    };
    let mut torn = marker.encode().to_vec();
    torn.resize(600 << 10, 0x5A);
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&data_path)
            .unwrap();
        f.write_all(&torn).unwrap();
    }

    let mut store = DataStore::open(dir.path()).unwrap();
    for &key in &keys {
        assert!(store.get(key).unwrap().is_some());
    }
    // A framed data file is read, not mapped: a cut can never take a page from under it,
    // and an export that reads every frame's data does not keep the file resident.
    let sizes = mapped_sizes(&data_path);
    assert!(sizes.is_empty(), "the data file is mapped: {sizes:?}");

    // Another process opens the log: it cuts the torn tail and appends more data while this
    // one keeps looking frames up.
    let mut child = Command::new(env!("CARGO_BIN_EXE_log_writer_child"))
        .args(["--dir", dir.path().to_str().unwrap()])
        .args(["--frames", "100000", "--batch", "500", "--data-every", "3"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut lookups = 0u64;
    let status = loop {
        store.refresh().unwrap();
        for &key in &keys {
            let doc = store.get(key).unwrap().expect("data present");
            assert_eq!(
                bson::Bson::Document(doc).into_relaxed_extjson(),
                expected_data(key)
            );
            lookups += 1;
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the child did not finish");
    };
    assert!(status.success());
    assert!(lookups >= keys.len() as u64);
    eprintln!("{lookups} lookups while the other process wrote");
    // The tail was cut (the file now continues with the child's batches) and the child's
    // data reads back through the same store.
    let bytes = std::fs::read(&data_path).unwrap();
    assert_ne!(&bytes[whole as usize..whole as usize + 42], &torn[..42]);
    store.refresh().unwrap();
    let mut child_keys = 0;
    for id in 1..100_000u32 {
        let key = FrameKey::new(0, id);
        if let Some(doc) = store.get(key).unwrap()
            && !keys.contains(&key)
        {
            assert_eq!(
                bson::Bson::Document(doc).into_relaxed_extjson(),
                expected_data(key)
            );
            child_keys += 1;
        }
    }
    assert!(child_keys > 0);
    let report = framelog::check::check_log(dir.path()).unwrap();
    assert!(!report.has_errors(), "{:?}", report.problems);
}
