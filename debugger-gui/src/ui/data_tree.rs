//! A frame's BSON data as a collapsible tree, every BSON type shown faithfully (dates as
//! RFC 3339, ObjectIds as hex, binary with subtype, length and a hex preview), plus
//! copy-as-JSON (MongoDB relaxed extended JSON, so dates and ObjectIds keep their types).

use bson::{Bson, Document, spec::BinarySubtype};
use egui::{CollapsingHeader, RichText, Ui};

/// The text and type name shown for one scalar BSON value.
pub fn describe(v: &Bson) -> (String, &'static str) {
    match v {
        Bson::Double(d) => (format!("{d}"), "double"),
        // Quoted but not escaped: SQL and messages read as written.
        Bson::String(s) => (format!("\"{s}\""), "string"),
        Bson::Array(a) => (format!("[{} items]", a.len()), "array"),
        Bson::Document(d) => (format!("{{{} fields}}", d.len()), "document"),
        Bson::Boolean(b) => (b.to_string(), "bool"),
        Bson::Null => ("null".into(), "null"),
        Bson::RegularExpression(r) => (format!("/{}/{}", r.pattern, r.options), "regex"),
        Bson::JavaScriptCode(c) => (c.clone(), "javascript"),
        Bson::JavaScriptCodeWithScope(c) => (c.code.clone(), "javascript with scope"),
        Bson::Int32(i) => (i.to_string(), "int32"),
        Bson::Int64(i) => (i.to_string(), "int64"),
        Bson::Timestamp(t) => (format!("{}:{}", t.time, t.increment), "timestamp"),
        Bson::Binary(b) => {
            let hex: String = b
                .bytes
                .iter()
                .take(24)
                .map(|x| format!("{x:02x}"))
                .collect();
            let more = if b.bytes.len() > 24 { "…" } else { "" };
            let sub = match b.subtype {
                BinarySubtype::Generic => "generic".to_string(),
                BinarySubtype::Uuid => "uuid".to_string(),
                BinarySubtype::Md5 => "md5".to_string(),
                other => format!("{:#04x}", u8::from(other)),
            };
            (
                format!("{} bytes, {sub}: {hex}{more}", b.bytes.len()),
                "binary",
            )
        }
        Bson::ObjectId(o) => (format!("ObjectId(\"{}\")", o.to_hex()), "ObjectId"),
        Bson::DateTime(d) => (
            d.try_to_rfc3339_string()
                .unwrap_or_else(|_| format!("{} ms", d.timestamp_millis())),
            "date",
        ),
        Bson::Symbol(s) => (s.clone(), "symbol"),
        Bson::Decimal128(d) => (d.to_string(), "decimal128"),
        Bson::Undefined => ("undefined".into(), "undefined"),
        Bson::MaxKey => ("MaxKey".into(), "maxKey"),
        Bson::MinKey => ("MinKey".into(), "minKey"),
        Bson::DbPointer(_) => ("DBPointer".into(), "dbPointer"),
    }
}

/// The document as pretty relaxed extended JSON.
pub fn to_json(doc: &Document) -> String {
    let v = Bson::Document(doc.clone()).into_relaxed_extjson();
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// Shows `doc` as a tree; nested documents and arrays are collapsible (open two levels deep).
pub fn show(ui: &mut Ui, doc: &Document, id_salt: impl std::hash::Hash + std::fmt::Debug) {
    let base = ui.scope_id().with(id_salt);
    for (k, v) in doc {
        value(ui, k, v, base.with(k.as_str()), 0);
    }
}

fn value(ui: &mut Ui, key: &str, v: &Bson, salt: egui::Id, depth: usize) {
    match v {
        Bson::Document(d) => {
            CollapsingHeader::new(format!("{key}  {{{}}}", d.len()))
                .id_salt(salt)
                .default_open(depth < 2)
                .show(ui, |ui| {
                    for (k, v) in d {
                        value(ui, k, v, salt.with(k.as_str()), depth + 1);
                    }
                });
        }
        Bson::Array(a) => {
            CollapsingHeader::new(format!("{key}  [{}]", a.len()))
                .id_salt(salt)
                .default_open(depth < 2)
                .show(ui, |ui| {
                    for (i, v) in a.iter().enumerate() {
                        value(ui, &i.to_string(), v, salt.with(i), depth + 1);
                    }
                });
        }
        other => {
            let (text, ty) = describe(other);
            ui.horizontal_wrapped(|ui| {
                ui.label(RichText::new(key).strong());
                ui.label(RichText::new(text).monospace());
                ui.label(RichText::new(ty).weak().italics());
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{Binary, DateTime, doc, oid::ObjectId};

    #[test]
    fn types_are_shown_faithfully() {
        let (t, ty) = describe(&Bson::DateTime(DateTime::from_millis(0)));
        assert_eq!((t.as_str(), ty), ("1970-01-01T00:00:00Z", "date"));
        let oid = ObjectId::from_bytes([1; 12]);
        assert_eq!(
            describe(&Bson::ObjectId(oid)),
            ("ObjectId(\"010101010101010101010101\")".into(), "ObjectId")
        );
        let bin = Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![0xde, 0xad],
        });
        assert_eq!(describe(&bin), ("2 bytes, generic: dead".into(), "binary"));
        assert_eq!(describe(&Bson::Int64(5)).1, "int64");
        assert_eq!(describe(&Bson::Int32(5)).1, "int32");
        assert_eq!(describe(&Bson::String("x".into())).0, "\"x\"");
        let sql = Bson::String("SELECT \"group\" FROM t".into());
        assert_eq!(describe(&sql).0, "\"SELECT \"group\" FROM t\"");
    }

    #[test]
    fn json_keeps_bson_types() {
        let d =
            doc! { "at": DateTime::from_millis(0), "id": ObjectId::from_bytes([2; 12]), "n": 3 };
        let j = to_json(&d);
        assert!(j.contains("\"$date\""), "{j}");
        assert!(j.contains("\"$oid\": \"020202020202020202020202\""), "{j}");
        assert!(j.contains("\"n\": 3"), "{j}");
    }
}
