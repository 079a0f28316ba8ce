//! `framelog data`: one frame's merged data as pretty JSON.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, bail};
use formats::FrameKey;
use framelog::DataStore;

pub fn run(dir: &Path, frame: FrameKey) -> Result<ExitCode> {
    if !framelog::segments::is_log(dir) {
        return Err(framelog::Error::NotALog(dir.to_owned()).into());
    }
    let mut store = DataStore::open(dir)?;
    let Some(doc) = store.get(frame)? else {
        let damage: Vec<String> = store.take_damage().iter().map(|d| d.to_string()).collect();
        if damage.is_empty() {
            bail!("frame {frame} has no data in {}", dir.display());
        }
        bail!(
            "frame {frame} has no data that could be read; damaged index bytes were skipped:\n  {}",
            damage.join("\n  ")
        );
    };
    let json = bson::Bson::Document(doc).into_relaxed_extjson();
    println!("{}", serde_json::to_string_pretty(&json)?);
    Ok(ExitCode::SUCCESS)
}
