//! `stopwatch::Logger`: `log` records become messages in the current frame, read back from a
//! real log directory.

use formats::{Level, Record};
use framelog::LogReader;
use stopwatch::{Logger, Stopwatch};

#[test]
fn log_records_become_messages_in_the_current_frame_up_to_the_max_level() {
    let dir = tempfile::tempdir().unwrap();
    let guard = Stopwatch::builder().dir(dir.path()).install().unwrap();
    Logger::install(log::LevelFilter::Info).unwrap();
    log::info!("starting");
    let key = {
        let f = Stopwatch::start("request");
        log::warn!("slow: {} ms", 250);
        log::debug!("not recorded: above the max level");
        f.key().unwrap()
    };
    log::error!(target: "db", "connection lost");
    guard.finish();
    let mut got = Vec::new();
    LogReader::open(dir.path())
        .unwrap()
        .read_available(|_, r| {
            if let Record::Message(m) = r {
                let fields = bson::Document::from_reader(&mut m.fields.unwrap()).unwrap();
                got.push((
                    m.frame,
                    m.context,
                    m.level,
                    m.text.to_owned(),
                    fields.get_str("target").unwrap().to_owned(),
                    fields.get_i64("line").is_ok() || fields.get_i32("line").is_ok(),
                ));
            }
        })
        .unwrap();
    let here = module_path!().to_owned();
    assert_eq!(
        got,
        vec![
            (0, 0, Level::INFO, "starting".to_owned(), here.clone(), true),
            (
                key.id,
                key.id,
                Level::WARN,
                "slow: 250 ms".to_owned(),
                here,
                true
            ),
            (
                0,
                0,
                Level::ERROR,
                "connection lost".to_owned(),
                "db".to_owned(),
                true
            ),
        ]
    );
}
