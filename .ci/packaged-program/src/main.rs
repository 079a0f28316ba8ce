//! A user's program built from the packaged crates: records a request and a query nested in
//! it into `DIR`, then reads the log back with the packaged storage engine.
//!
//!     packaged-program DIR

use stopwatch::{BufferingMode, Category, Stopwatch};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: packaged-program DIR")?;
    {
        // Declared first, dropped last: the frames end, then the log is flushed.
        let _sw = Stopwatch::builder()
            .dir(&dir)
            .mode(BufferingMode::Block)
            .install()?;
        let _request = Stopwatch::start("GET /users/:id");
        let _query = Stopwatch::start_with("User: Select", Category::DATABASE);
    }
    let mut starts = Vec::new();
    let mut ends = 0;
    framelog::LogReader::open(&dir)?.read_available(|_, rec| match rec {
        formats::Record::Start(s) => starts.push((s.label.to_owned(), s.parent)),
        formats::Record::End(_) => ends += 1,
        _ => {}
    })?;
    let labels: Vec<&str> = starts.iter().map(|(l, _)| l.as_str()).collect();
    if labels != ["GET /users/:id", "User: Select"] || ends != 2 {
        return Err(format!("read back {starts:?} and {ends} ends").into());
    }
    if !matches!(starts[1].1, formats::Parent::Frame(_)) {
        return Err(format!("the query's parent is {:?}", starts[1].1).into());
    }
    println!("recorded and read back 2 frames, the query under the request");
    Ok(())
}
