//! The crate's rooms keep one direction (the rule in the crate docs, `src/lib.rs`).
//!
//! Reads the library's sources, finds every module path they name (`crate::a::b`,
//! `super::x`, `use super::{a, b}`, in code, tests and doc links alike) and checks that
//! - among sibling modules (the crate's top-level modules; `model`'s files; …) the references
//!   form no cycle (a module and its own parent or children are one room: not counted), and
//! - the portable core (`model`, `feed`, `timefmt`) names no module outside the core.
//!
//! Every top-level module must be placed in a layer below, so a new one is placed on purpose.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The portable core: no I/O, no threads, no window; runs in the browser.
const CORE: &[&str] = &["model", "feed", "timefmt"];
/// The native shell (and the browser's entry): files, threads, sockets, processes.
const SHELL: &[&str] = &[
    "apply",
    "ingest",
    "remote",
    "data_loader",
    "source",
    "memory",
    "listen",
    "export_job",
    "query",
    "recent",
    "temp_log",
    "demo",
    "synth",
    "web",
];
/// The views and the app: draw the core, driven by the shell.
const VIEWS: &[&str] = &["ui", "app"];

/// Edges allowed although they close a cycle: (from, to, why). Only from test code.
const KNOWN: &[(&str, &str, &str)] = &[(
    "model",
    "feed",
    "model's tests (model::tests::through_reader_stage, used by model/plots.rs and \
     model/allocs.rs) run records through the feed to compare with applying them directly; \
     to move into feed's tests",
)];

/// One reference: the module it sits in (the file's, then inline modules), where, and the
/// module path it names (the longest known module prefix).
#[derive(Debug)]
struct Ref {
    file: String,
    line: usize,
    from: Vec<String>,
    in_test: bool,
    to: Vec<String>,
}

/// A file's module path: `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`.
fn module_of(rel: &str) -> Vec<String> {
    let rel = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = rel.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// For each byte of `text`, the inline modules (`mod tests { … }`) it sits in: braces are
/// counted outside strings, chars and comments.
fn inline_modules(text: &str) -> Vec<Vec<String>> {
    let b = text.as_bytes();
    let mut at = vec![Vec::new(); b.len() + 1];
    let mut stack: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut pending: Option<String> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                at[i] = stack.iter().map(|s| s.0.clone()).collect();
                i += 1;
            }
            continue;
        }
        if c == b'"' || (c == b'r' && matches!(b.get(i + 1), Some(b'"' | b'#'))) {
            // A string (raw or not): to its end.
            let raw = c == b'r';
            let mut hashes = 0;
            let mut j = i + 1;
            if raw {
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    i += 1;
                    continue;
                }
            }
            j += 1;
            while j < b.len() {
                if !raw && b[j] == b'\\' {
                    j += 2;
                    continue;
                }
                if b[j] == b'"' && b[j + 1..].iter().take(hashes).all(|&h| h == b'#') {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            let here: Vec<String> = stack.iter().map(|s| s.0.clone()).collect();
            at[i..j.min(b.len())].fill(here);
            i = j;
            continue;
        }
        if c == b'\'' {
            // A char literal ('x', '\n', '{'), not a lifetime.
            let end = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&x| x == b'\'')
                    .map(|p| i + 3 + p)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 3)
            } else {
                None
            };
            if let Some(end) = end {
                let here: Vec<String> = stack.iter().map(|s| s.0.clone()).collect();
                at[i..end].fill(here);
                i = end;
                continue;
            }
        }
        if b[i..].starts_with(b"mod ") && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let name: Vec<u8> = b[i + 4..]
                .iter()
                .copied()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
                .collect();
            let rest = b[i + 4 + name.len()..].trim_ascii_start();
            if rest.starts_with(b"{") {
                pending = Some(String::from_utf8(name).unwrap());
            }
        }
        if c == b'{' {
            depth += 1;
            if let Some(name) = pending.take() {
                stack.push((name, depth));
            }
        } else if c == b'}' {
            if stack.last().is_some_and(|s| s.1 == depth) {
                stack.pop();
            }
            depth = depth.saturating_sub(1);
        }
        at[i] = stack.iter().map(|s| s.0.clone()).collect();
        i += 1;
    }
    at
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a `use` tree starting at `s` (after `prefix::`) names: `a::b`, `{a, b::{c}}`.
fn expand(prefix: &[String], s: &str, out: &mut Vec<Vec<String>>) {
    let s = s.trim();
    if let Some(inner) = s.strip_prefix('{') {
        let mut level = 0;
        let mut start = 0;
        let inner = &inner[..inner.rfind('}').unwrap_or(inner.len())];
        for (k, c) in inner.char_indices() {
            match c {
                '{' => level += 1,
                '}' => level -= 1,
                ',' if level == 0 => {
                    expand(prefix, &inner[start..k], out);
                    start = k + 1;
                }
                _ => {}
            }
        }
        expand(prefix, &inner[start..], out);
        return;
    }
    let head: String = s.chars().take_while(|&c| is_ident(c)).collect();
    if head.is_empty() || head == "self" {
        out.push(prefix.to_vec());
        return;
    }
    let mut p = prefix.to_vec();
    p.push(head.clone());
    match s[head.len()..].strip_prefix("::") {
        Some(rest) => expand(&p, rest, out),
        None => out.push(p),
    }
}

/// Every reference in one file.
fn refs_of(
    file: &str,
    text: &str,
    modules: &BTreeSet<Vec<String>>,
    reexports: &BTreeMap<String, String>,
) -> Vec<Ref> {
    let me = module_of(file);
    let inline = inline_modules(text);
    let mut out = Vec::new();
    for kw in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(p) = text[from..].find(kw) {
            let i = from + p;
            from = i + kw.len();
            // (Not the tail of a longer path: `super::super::`, `$crate::`, `debugger_gui::`.)
            let before = &text[..i];
            if before.ends_with("::")
                || before.ends_with('$')
                || before.chars().next_back().is_some_and(is_ident)
            {
                continue;
            }
            let inl = &inline[i];
            let mut base: Vec<String> = me.iter().chain(inl.iter()).cloned().collect();
            let mut rest = &text[i..];
            let mut ok = true;
            if kw == "crate::" {
                base.clear();
                rest = &rest[kw.len()..];
            } else {
                while let Some(r) = rest.strip_prefix("super::") {
                    if base.pop().is_none() {
                        ok = false;
                    }
                    rest = r;
                }
                if let Some(r) = rest.strip_prefix("self::") {
                    rest = r;
                }
            }
            if !ok {
                continue;
            }
            // The path's text: up to where a path can no longer go on.
            let mut level = 0;
            let mut end = 0;
            for (k, c) in rest.char_indices() {
                match c {
                    '{' => level += 1,
                    '}' if level > 0 => level -= 1,
                    c if level > 0 || is_ident(c) || c == ':' || c == '*' => {}
                    ',' | ' ' | '\n' if level > 0 => {}
                    _ if level > 0 => {}
                    _ => break,
                }
                end = k + c.len_utf8();
            }
            let mut paths = Vec::new();
            expand(&base, &rest[..end], &mut paths);
            for path in paths {
                // The longest prefix that is a module (or a root re-export's module).
                let mut to: Vec<String> = Vec::new();
                for n in 1..=path.len() {
                    if modules.contains(&path[..n]) {
                        to = path[..n].to_vec();
                    }
                }
                if to.is_empty()
                    && let Some(m) = path.first().and_then(|f| reexports.get(f))
                {
                    to = vec![m.clone()];
                }
                // Within the file's own module (its tests' `use super::*`): no reference.
                if to.is_empty() || to.starts_with(&me) {
                    continue;
                }
                out.push(Ref {
                    file: file.to_owned(),
                    line: text[..i].matches('\n').count() + 1,
                    from: me.clone(),
                    in_test: inl.iter().any(|m| m == "tests"),
                    to,
                });
            }
        }
    }
    out
}

/// The problems in a crate's sources (`(path under src/, text)`; `lib.rs` is the root).
fn check(files: &[(String, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut modules = BTreeSet::new();
    let mut reexports = BTreeMap::new();
    for (f, text) in files {
        if f == "lib.rs" {
            for line in text.lines() {
                // `pub use app::DebuggerApp;`: `crate::DebuggerApp` is `app`'s.
                if let Some(r) = line.strip_prefix("pub use ")
                    && let Some((m, item)) = r.trim_end_matches(';').rsplit_once("::")
                {
                    let m = m.split("::").next().unwrap_or(m).to_owned();
                    reexports.insert(item.to_owned(), m);
                }
            }
            continue;
        }
        let m = module_of(f);
        for n in 1..=m.len() {
            modules.insert(m[..n].to_vec());
        }
    }
    for top in modules.iter().filter(|m| m.len() == 1) {
        let t = top[0].as_str();
        let placed = [CORE, SHELL, VIEWS]
            .iter()
            .filter(|l| l.contains(&t))
            .count();
        if placed != 1 {
            problems.push(format!(
                "module `{t}` is in {placed} layers: place it in one (tests/rooms.rs)"
            ));
        }
    }
    // Sibling edges: (from, to) -> the references behind it.
    let mut edges: BTreeMap<(Vec<String>, Vec<String>), Vec<String>> = BTreeMap::new();
    let mut test_only: BTreeMap<(Vec<String>, Vec<String>), bool> = BTreeMap::new();
    for (f, text) in files.iter().filter(|(f, _)| f != "lib.rs") {
        for r in refs_of(f, text, &modules, &reexports) {
            let k = r.from.iter().zip(&r.to).take_while(|(a, b)| a == b).count();
            if k == r.from.len() || k == r.to.len() {
                continue; // its own parent or child: one room
            }
            let (a, b) = (r.from[..=k].to_vec(), r.to[..=k].to_vec());
            let at = format!("src/{}:{}", r.file, r.line);
            if CORE.contains(&r.from[0].as_str()) && !CORE.contains(&r.to[0].as_str()) {
                problems.push(format!(
                    "the core's `{}` names `{}` ({at}): the core must not import the shell or the views",
                    r.from.join("::"),
                    r.to.join("::")
                ));
            }
            *test_only.entry((a.clone(), b.clone())).or_insert(true) &= r.in_test;
            edges.entry((a, b)).or_default().push(at);
        }
    }
    if std::env::var_os("ROOMS_GRAPH").is_some() {
        // `ROOMS_GRAPH=1 cargo test --test rooms -- --nocapture`: the graph, for the docs.
        for ((a, b), at) in &edges {
            eprintln!("{} -> {}  ({})", a.join("/"), b.join("/"), at.join(", "));
        }
    }
    // Cycles: a depth-first search for a back edge, skipping the known test-only edges.
    let known = |a: &[String], b: &[String]| {
        KNOWN
            .iter()
            .any(|(x, y, _)| a == [x.to_string()] && b == [y.to_string()])
    };
    for ((a, b), only) in &test_only {
        if known(a, b) && !only {
            problems.push(format!(
                "`{}` -> `{}` is allowed only from tests, and is named outside them: {:?}",
                a.join("::"),
                b.join("::"),
                edges[&(a.clone(), b.clone())]
            ));
        }
    }
    let mut graph: BTreeMap<&Vec<String>, Vec<&Vec<String>>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        if !known(a, b) {
            graph.entry(a).or_default().push(b);
        }
    }
    let mut state: BTreeMap<&Vec<String>, u8> = BTreeMap::new();
    let mut path: Vec<&Vec<String>> = Vec::new();
    fn dfs<'a>(
        n: &'a Vec<String>,
        graph: &BTreeMap<&'a Vec<String>, Vec<&'a Vec<String>>>,
        state: &mut BTreeMap<&'a Vec<String>, u8>,
        path: &mut Vec<&'a Vec<String>>,
        cycles: &mut Vec<Vec<&'a Vec<String>>>,
    ) {
        state.insert(n, 1);
        path.push(n);
        for &m in graph.get(n).map(|v| &v[..]).unwrap_or(&[]) {
            match state.get(m) {
                Some(1) => {
                    let at = path.iter().position(|p| *p == m).unwrap();
                    cycles.push(path[at..].to_vec());
                }
                Some(_) => {}
                None => dfs(m, graph, state, path, cycles),
            }
        }
        path.pop();
        state.insert(n, 2);
    }
    let mut cycles = Vec::new();
    for n in graph.keys().copied().collect::<Vec<_>>() {
        if !state.contains_key(n) {
            dfs(n, &graph, &mut state, &mut path, &mut cycles);
        }
    }
    for c in cycles {
        let mut text: Vec<String> = c.iter().map(|m| m.join("/")).collect();
        text.push(text[0].clone());
        let mut why = Vec::new();
        for w in 0..c.len() {
            let (a, b) = (c[w].clone(), c[(w + 1) % c.len()].clone());
            why.push(format!(
                "{} -> {}: {}",
                a.join("/"),
                b.join("/"),
                edges[&(a, b)].join(", ")
            ));
        }
        problems.push(format!(
            "cycle {}\n    {}",
            text.join(" -> "),
            why.join("\n    ")
        ));
    }
    problems
}

fn read_sources(dir: &Path, under: &str, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_owned();
        let rel = if under.is_empty() {
            name
        } else {
            format!("{under}/{name}")
        };
        if p.is_dir() {
            read_sources(&p, &rel, out);
        } else if rel.ends_with(".rs") && rel != "main.rs" && rel != "desktop_main.rs" {
            // (`main.rs` and `desktop_main.rs` are the binary: it uses the library.)
            out.push((rel, std::fs::read_to_string(&p).unwrap()));
        }
    }
}

#[test]
fn the_crate_s_rooms_have_one_direction() {
    let mut files = Vec::new();
    read_sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        "",
        &mut files,
    );
    assert!(files.len() > 40, "{} files", files.len());
    let problems = check(&files);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn a_cycle_or_a_core_module_naming_the_shell_is_caught() {
    let f = |p: &str, t: &str| (p.to_owned(), t.to_owned());
    let lib = f("lib.rs", "pub mod model;\npub use app::DebuggerApp;\n");
    let ok = vec![
        lib.clone(),
        f("model/mod.rs", "pub mod a;\npub mod b;\nuse a::X;\n"),
        f("model/a.rs", "use super::{Model, b};\nuse super::b::Y;\n"),
        f(
            "model/b.rs",
            "use super::Model;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
        f("feed.rs", "use crate::model::{a::X, b};\n"),
        f("ingest.rs", "use crate::feed;\n"),
        f("app.rs", "use crate::{feed, ingest};\n"),
    ];
    assert_eq!(check(&ok), Vec::<String>::new());
    // A sibling cycle inside `model`, through a group and a doc link.
    let mut bad = ok.clone();
    bad[3] = f("model/b.rs", "/// See [`super::a`].\nuse super::Model;\n");
    let p = check(&bad);
    assert!(
        p.len() == 1 && p[0].starts_with("cycle model/a -> model/b -> model/a"),
        "{p:?}"
    );
    // The core naming the shell (and so a cycle), from a test module's `super::super`.
    let mut bad = ok.clone();
    bad[3] = f(
        "model/b.rs",
        "mod tests {\n    use super::super::super::ingest::X;\n}\n",
    );
    let p = check(&bad);
    assert!(
        p.iter()
            .any(|p| p.contains("the core's `model::b` names `ingest`")),
        "{p:?}"
    );
    assert!(p.iter().any(|p| p.starts_with("cycle")), "{p:?}");
    // A root re-export is its module's; an unplaced module is reported.
    let mut bad = ok.clone();
    bad.push(f(
        "model/c.rs",
        "fn f() -> crate::DebuggerApp { todo!() }\n",
    ));
    bad.push(f("newroom.rs", ""));
    let p = check(&bad);
    assert!(p.iter().any(|p| p.contains("names `app`")), "{p:?}");
    assert!(
        p.iter().any(|p| p.contains("`newroom` is in 0 layers")),
        "{p:?}"
    );
}
