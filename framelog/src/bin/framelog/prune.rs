//! `framelog prune`: deletes a log's oldest sealed segments to fit a disk budget and an age;
//! the size and duration arguments shared with `serve`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use framelog::Retention;

/// What `framelog prune` takes.
#[derive(clap::Args)]
pub struct PruneArgs {
    /// The log directory.
    dir: PathBuf,
    #[command(flatten)]
    limits: RetentionArgs,
}

/// A disk budget and an age limit for a log (at least one for `prune`).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct RetentionArgs {
    /// Keep the log within this many bytes (e.g. 10GiB, 500MB, 1048576): the oldest sealed
    /// segments are deleted, whole.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_bytes: Option<u64>,
    /// Delete sealed segments last written longer ago than this (e.g. 24h, 7days).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub max_age: Option<Duration>,
}

impl RetentionArgs {
    /// The limits as the storage engine takes them.
    pub fn retention(&self) -> Retention {
        Retention {
            max_bytes: self.max_bytes,
            max_age: self.max_age,
        }
    }
}

/// Parses a byte count: a number with an optional unit (B, KB, MB, GB, TB in powers of
/// 1000; KiB, MiB, GiB, TiB and K, M, G, T in powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a size (expected e.g. 10GiB, 500MB, 1048576)"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "mb" => 1000_u64.pow(2),
        "gb" => 1000_u64.pow(3),
        "tb" => 1000_u64.pow(4),
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?} (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
            ));
        }
    };
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(bytes as u64)
}

/// Prunes once and says what went.
pub fn run(args: &PruneArgs) -> anyhow::Result<ExitCode> {
    let retention = args.limits.retention();
    if !retention.is_set() {
        anyhow::bail!("give --max-bytes SIZE, --max-age DURATION, or both");
    }
    if !framelog::segments::is_log(&args.dir) {
        return Err(framelog::Error::NotALog(args.dir.clone()).into());
    }
    let pruned = framelog::retention::prune(&args.dir, &retention)
        .with_context(|| format!("pruning {}", args.dir.display()))?;
    println!("{}", describe(&pruned));
    Ok(ExitCode::SUCCESS)
}

/// One line on what a prune did.
pub fn describe(p: &framelog::Pruned) -> String {
    let start = p.oldest_frames_segment.map_or(String::new(), |n| {
        format!("; the log now starts at frames-{n:06}")
    });
    format!("deleted {} files ({} bytes){start}", p.files.len(), p.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_decimal_and_binary_units() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("10GiB"), Ok(10 << 30));
        assert_eq!(parse_size("500MB"), Ok(500_000_000));
        assert_eq!(parse_size("1.5 KiB"), Ok(1536));
        assert_eq!(parse_size("2m"), Ok(2 << 20));
        assert!(parse_size("ten").is_err());
        assert!(
            parse_size("5 parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_size("99999999999TiB").is_err());
    }
}
