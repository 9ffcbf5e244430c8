//! A target's data file: rows whose columns templates name as `{{row.COLUMN}}`. Request
//! `seq` takes row `seq mod rows`, so every run walks the file in the same order.

use std::path::Path;

/// The rows of a CSV file (first line: column names) or a JSON-lines file (one object per
/// line; a string value is used as is, any other value as its JSON text).
#[derive(Debug, Clone, PartialEq)]
pub struct DataRows {
    columns: Vec<String>,
    rows: Vec<Vec<Box<str>>>,
}

impl DataRows {
    /// Reads `path`: `.jsonl`/`.ndjson` as JSON lines, anything else as CSV.
    pub fn load(path: &Path) -> Result<DataRows, String> {
        let name = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("data file {name}: cannot read: {e}"))?;
        let is_jsonl = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("jsonl" | "ndjson")
        );
        let rows = if is_jsonl {
            Self::from_json_lines(&text)
        } else {
            Self::from_csv(&text)
        }
        .map_err(|e| format!("data file {name}: {e}"))?;
        if rows.rows.is_empty() {
            return Err(format!("data file {name}: no rows"));
        }
        Ok(rows)
    }

    pub fn from_csv(text: &str) -> Result<DataRows, String> {
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let columns = reader
            .headers()
            .map_err(|e| e.to_string())?
            .iter()
            .map(str::to_string)
            .collect();
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|e| e.to_string())?;
            rows.push(record.iter().map(Into::into).collect());
        }
        Ok(DataRows { columns, rows })
    }

    pub fn from_json_lines(text: &str) -> Result<DataRows, String> {
        let mut columns: Vec<String> = Vec::new();
        let mut objects = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let value: serde_json::Value =
                serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
            let serde_json::Value::Object(object) = value else {
                return Err(format!("line {}: not a JSON object", i + 1));
            };
            for key in object.keys() {
                if !columns.contains(key) {
                    columns.push(key.clone());
                }
            }
            objects.push(object);
        }
        let rows = objects
            .iter()
            .map(|object| {
                columns
                    .iter()
                    .map(|c| match object.get(c) {
                        None => "".into(),
                        Some(serde_json::Value::String(s)) => s.as_str().into(),
                        Some(other) => other.to_string().into(),
                    })
                    .collect()
            })
            .collect();
        Ok(DataRows { columns, rows })
    }

    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Column `column` of the row request `seq` uses.
    pub fn value(&self, seq: u64, column: usize) -> &str {
        let row = &self.rows[(seq % self.rows.len() as u64) as usize];
        row.get(column).map_or("", |v| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_and_json_lines_give_the_same_rows() {
        let csv = DataRows::from_csv("sku,qty\nA-1,2\nB-2,5\n").unwrap();
        let jsonl =
            DataRows::from_json_lines("{\"sku\":\"A-1\",\"qty\":2}\n{\"sku\":\"B-2\",\"qty\":5}\n")
                .unwrap();
        for rows in [&csv, &jsonl] {
            let (sku, qty) = (rows.column("sku").unwrap(), rows.column("qty").unwrap());
            assert_eq!((rows.value(0, sku), rows.value(0, qty)), ("A-1", "2"));
            assert_eq!((rows.value(3, sku), rows.value(3, qty)), ("B-2", "5"));
        }
        assert!(DataRows::from_json_lines("[1]").is_err());
    }
}
