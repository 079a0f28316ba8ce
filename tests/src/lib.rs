//! Helpers shared by the integration tests and their child-process binaries.

use formats::{Category, FrameEnd, FrameKey, FrameStart};

/// The frame data a test child attaches to `key`: derived from the key so a test can
/// recompute and compare it.
pub fn expected_data(key: FrameKey) -> serde_json::Value {
    serde_json::json!({
        "worker": key.worker,
        "id": key.id,
        "sql": format!("SELECT * FROM t WHERE id = {}", key.id),
        "pad": "x".repeat((key.id % 97) as usize),
    })
}

/// Appends `count` start+end frames with ids `first..` of `worker` to `buf`.
pub fn encode_frames(buf: &mut Vec<u8>, worker: u8, first: u32, count: u32, label: &str) {
    let mut tmp = [0u8; 300];
    for i in 0..count {
        let id = first.wrapping_add(i);
        let t = 1_700_000_000_000_000_000 + u64::from(id) * 1000;
        let n = FrameStart {
            id,
            worker,
            timestamp: t,
            context: id,
            category: Category::JOB,
            label,
        }
        .encode(&mut tmp)
        .expect("fits");
        buf.extend_from_slice(&tmp[..n]);
        let n = FrameEnd {
            id,
            worker,
            timestamp: t + 500,
        }
        .encode(&mut tmp)
        .expect("fits");
        buf.extend_from_slice(&tmp[..n]);
    }
}
