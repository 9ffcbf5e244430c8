//! A knob written as text and parsed once, where it is read (file, flag or default): the text
//! stays what manifests and CSVs show, the value is what the runner uses.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The text of a knob as the user wrote it and what it parsed to. A text that does not parse
/// is kept with its error, so that validation names the knob (and the variant) in its one
/// line; [`Parsed::value`] is only read after validation.
#[derive(Debug, Clone)]
pub struct Parsed<T> {
    text: String,
    value: Result<T, String>,
}

impl<T> Parsed<T> {
    /// The text as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// What the text parsed to, or why it did not.
    pub fn parsed(&self) -> Result<&T, &str> {
        self.value.as_ref().map_err(String::as_str)
    }

    /// The parsed value of a validated knob.
    pub fn value(&self) -> &T {
        match &self.value {
            Ok(v) => v,
            Err(e) => panic!("'{}' was validated: {e}", self.text),
        }
    }
}

impl<T: FromStr> FromStr for Parsed<T>
where
    T::Err: fmt::Display,
{
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(Parsed {
            text: text.to_string(),
            value: text.parse().map_err(|e: T::Err| e.to_string()),
        })
    }
}

impl<T: FromStr> From<&str> for Parsed<T>
where
    T::Err: fmt::Display,
{
    fn from(text: &str) -> Self {
        match text.parse() {
            Ok(p) => p,
            Err(never) => match never {},
        }
    }
}

/// Two knobs are the same when their texts are (what a manifest compares).
impl<T> PartialEq for Parsed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl<T> fmt::Display for Parsed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl<T> Serialize for Parsed<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de, T: FromStr> Deserialize<'de> for Parsed<T>
where
    T::Err: fmt::Display,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(Parsed::from(text.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_round_trips_and_the_value_is_parsed_once() {
        let p: Parsed<u32> = " 7".into();
        assert_eq!(p.parsed(), Err("invalid digit found in string"));
        let p: Parsed<u32> = "7".into();
        assert_eq!(*p.value(), 7);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, "\"7\"");
        let back: Parsed<u32> = serde_json::from_str(&json).unwrap();
        assert_eq!((back.text(), *back.value()), ("7", 7));
        // A text that does not parse still reads: validation reports it with the knob's name.
        let bad: Parsed<u32> = serde_json::from_str("\"seven\"").unwrap();
        assert_eq!(bad.to_string(), "seven");
        assert!(bad.parsed().is_err());
    }
}
