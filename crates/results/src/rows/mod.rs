//! Typed rows of every CSV the runner writes and reads. A file's columns are the fields of its
//! row type, in order: the header is derived from them, so a column name is defined once.
//! Fields that can be empty are `Option`s with `#[serde(default)]`: a file written before the
//! column existed reads as "empty" there, as it did when rows were string maps.

mod cell;
mod derived;
mod samples;

pub use cell::{
    net_counter_columns, rate_key, steady_window_valid_for, CellRow, NetScope,
    MIN_STEADY_FRACTION_OF_ELAPSED, MIN_STEADY_OK_PER_WORKER, RENAMED_COLUMNS,
};
pub use derived::{CompareRow, CurveRow, MemoryRow, SummaryRow, ThresholdRow};
pub use samples::{AgentRow, FailureRow, LatencyRow, RequestRow, ResourceRow, CDF_QUANTILES};

use std::path::Path;

use anyhow::Context;
use serde::de::DeserializeOwned;
use serde::{Serialize, Serializer};

/// A CSV row type: its columns in file order and access to a column by its name (for
/// thresholds, comparisons and figures that name a column in text).
pub trait Row: Serialize + DeserializeOwned {
    /// The header, in file order.
    const COLUMNS: &'static [&'static str];
    /// The column as a finite number; `None` when empty, not numeric or not a column.
    /// Panics in debug builds when `column` is not one of [`Row::COLUMNS`].
    fn number(&self, column: &str) -> Option<f64>;
    /// The column as text (numbers as written, empty when absent); `None` if not a column.
    fn text(&self, column: &str) -> Option<String>;
    /// Whether `column` holds numbers; `None` when it is not a column.
    fn numeric(column: &str) -> Option<bool>;
}

/// A value of a row, seen generically.
pub trait Field {
    const NUMERIC: bool;
    fn number(&self) -> Option<f64>;
    fn text(&self) -> String;
}

macro_rules! numeric_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            const NUMERIC: bool = true;
            fn number(&self) -> Option<f64> {
                Some(*self as f64).filter(|v| v.is_finite())
            }
            fn text(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
numeric_field!(u8, u32, u64, usize, f64);

impl Field for String {
    const NUMERIC: bool = false;
    fn number(&self) -> Option<f64> {
        None
    }
    fn text(&self) -> String {
        self.clone()
    }
}

impl Field for bool {
    const NUMERIC: bool = false;
    fn number(&self) -> Option<f64> {
        None
    }
    fn text(&self) -> String {
        self.to_string()
    }
}

impl<T: Field> Field for Option<T> {
    const NUMERIC: bool = T::NUMERIC;
    fn number(&self) -> Option<f64> {
        self.as_ref().and_then(Field::number)
    }
    fn text(&self) -> String {
        self.as_ref().map(Field::text).unwrap_or_default()
    }
}

/// Declares a row struct and its [`Row`] impl from one list of fields.
macro_rules! row_type {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty ),*
        }

        impl $crate::rows::Row for $name {
            const COLUMNS: &'static [&'static str] = &[$(stringify!($field)),*];
            fn number(&self, column: &str) -> Option<f64> {
                match column {
                    $(stringify!($field) => $crate::rows::Field::number(&self.$field),)*
                    // Columns are named in strings by the report and paper: a misspelt or
                    // renamed one fails every test that reaches it instead of showing "—".
                    _ => {
                        debug_assert!(false, "{} has no column '{column}'", stringify!($name));
                        None
                    }
                }
            }
            fn text(&self, column: &str) -> Option<String> {
                match column {
                    $(stringify!($field) => Some($crate::rows::Field::text(&self.$field)),)*
                    _ => {
                        debug_assert!(false, "{} has no column '{column}'", stringify!($name));
                        None
                    }
                }
            }
            fn numeric(column: &str) -> Option<bool> {
                match column {
                    $(stringify!($field) => Some(<$ty as $crate::rows::Field>::NUMERIC),)*
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use row_type;

/// The rows of one CSV file and the columns its header had (older files lack newer ones).
#[derive(Debug, Clone)]
pub struct Table<T> {
    pub columns: Vec<String>,
    pub rows: Vec<T>,
}

impl<T> Table<T> {
    pub fn has(&self, column: &str) -> bool {
        self.columns.iter().any(|c| c == column)
    }
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            columns: Vec::new(),
            rows: Vec::new(),
        }
    }
}

/// Reads a CSV of rows of type `T`; a required column missing is an error naming it.
pub fn read<T: Row>(path: &Path) -> anyhow::Result<Table<T>> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let columns: Vec<String> = reader.headers()?.iter().map(String::from).collect();
    let rows = reader
        .deserialize()
        .map(|r| r.with_context(|| format!("malformed row in {}", path.display())))
        .collect::<anyhow::Result<Vec<T>>>()?;
    Ok(Table { columns, rows })
}

/// [`read`], or an empty table when the file does not exist (older runs lack some files).
pub fn read_if_present<T: Row>(path: &Path) -> anyhow::Result<Table<T>> {
    if path.is_file() {
        read(path)
    } else {
        Ok(Table::default())
    }
}

/// The rows as CSV text, header first (the header even when there are no rows).
pub fn to_bytes<'a, T: Row + 'a>(
    header: bool,
    rows: impl IntoIterator<Item = &'a T>,
) -> anyhow::Result<Vec<u8>> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    if header {
        w.write_record(T::COLUMNS)?;
    }
    for row in rows {
        w.serialize(row)?;
    }
    w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))
}

/// Writes a whole CSV file of rows.
pub fn write<'a, T: Row + 'a>(
    path: &Path,
    rows: impl IntoIterator<Item = &'a T>,
) -> anyhow::Result<()> {
    std::fs::write(path, to_bytes(true, rows)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `serialize_with` helpers: how a float column is written (fixed decimals or shortest).
pub mod fmt {
    use super::*;

    pub fn dec<const D: usize, S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{v:.D$}"))
    }

    pub fn opt_dec<const D: usize, S: Serializer>(
        v: &Option<f64>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => dec::<D, S>(v, s),
            None => s.serialize_none(),
        }
    }

    pub fn display<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    pub fn opt_display<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.collect_str(v),
            None => s.serialize_none(),
        }
    }

    /// A number as short as it can be written exactly enough for a terminal or CSV.
    pub fn number(v: f64) -> String {
        if v.fract() == 0.0 && v.abs() < 1e15 {
            format!("{v:.0}")
        } else {
            let s = format!("{v:.6}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
    }

    /// `serialize_with` for `thresholds.csv`'s value column: [`number`], empty for no value.
    pub fn opt_number<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_str(&number(*v)),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header written from `COLUMNS` is the one serde derives from the fields.
    fn header_matches<T: Row + Default>() {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(T::default()).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(
            text.lines().next().unwrap(),
            T::COLUMNS.join(","),
            "{}",
            std::any::type_name::<T>()
        );
    }

    #[test]
    fn columns_are_the_serde_header_of_every_row_type() {
        header_matches::<CellRow>();
        header_matches::<SummaryRow>();
        header_matches::<MemoryRow>();
        header_matches::<ThresholdRow>();
        header_matches::<CompareRow>();
        header_matches::<ResourceRow>();
        header_matches::<FailureRow>();
        header_matches::<LatencyRow>();
        header_matches::<RequestRow>();
    }
}
