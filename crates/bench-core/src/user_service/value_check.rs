//! `expect_values`: a comparison an answer's field must pass, written `OP VALUE` (`">= 0"`,
//! `"!= ''"`, `"== true"`). It checks fields whose presence cannot be seen on the wire: a
//! proto3 scalar without `optional` is absent exactly when it holds its default (0, "",
//! false), so "present" cannot be asked of it, but its value can.

use std::cmp::Ordering;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareOp {
    fn holds(self, ordering: Ordering) -> bool {
        match self {
            CompareOp::Eq => ordering == Ordering::Equal,
            CompareOp::Ne => ordering != Ordering::Equal,
            CompareOp::Lt => ordering == Ordering::Less,
            CompareOp::Le => ordering != Ordering::Greater,
            CompareOp::Gt => ordering == Ordering::Greater,
            CompareOp::Ge => ordering != Ordering::Less,
        }
    }
}

/// The value compared with.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// An integer literal (compared exactly with integer fields).
    Integer(i128),
    /// A number with a fraction or exponent.
    Float(f64),
    Bool(bool),
    /// A quoted string (single or double quotes).
    Text(String),
}

/// A field's value as the check sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldValue<'a> {
    Integer(i128),
    Float(f64),
    Bool(bool),
    Text(&'a str),
}

/// One `expect_values` entry, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueCheck {
    pub op: CompareOp,
    pub value: Literal,
    /// As written, for messages.
    pub text: String,
}

impl ValueCheck {
    /// `OP VALUE`: OP one of `==`, `!=`, `<`, `<=`, `>`, `>=`; VALUE a number, `true`,
    /// `false`, or a string in single or double quotes.
    pub fn parse(text: &str) -> Result<ValueCheck, String> {
        let trimmed = text.trim();
        let (op, rest) = [
            ("==", CompareOp::Eq),
            ("!=", CompareOp::Ne),
            ("<=", CompareOp::Le),
            (">=", CompareOp::Ge),
            ("<", CompareOp::Lt),
            (">", CompareOp::Gt),
        ]
        .iter()
        .find_map(|(token, op)| trimmed.strip_prefix(token).map(|rest| (*op, rest.trim())))
        .ok_or_else(|| {
            format!(
                "'{text}': expected an operator (==, !=, <, <=, >, >=) then a value, e.g. \">= 0\""
            )
        })?;
        let value = if rest == "true" || rest == "false" {
            Literal::Bool(rest == "true")
        } else if let Some(inner) = quoted(rest) {
            Literal::Text(inner.to_string())
        } else if let Ok(i) = rest.parse::<i128>() {
            Literal::Integer(i)
        } else if let Some(f) = rest.parse::<f64>().ok().filter(|f| f.is_finite()) {
            Literal::Float(f)
        } else {
            return Err(format!(
                "'{text}': the value must be a number, true, false or a quoted string"
            ));
        };
        Ok(ValueCheck {
            op,
            value,
            text: trimmed.to_string(),
        })
    }

    /// Whether `field` passes; `None` when the two cannot be compared (a number against a
    /// string), which the client refuses before the run.
    pub fn holds(&self, field: FieldValue<'_>) -> Option<bool> {
        let ordering = match (field, &self.value) {
            (FieldValue::Integer(a), Literal::Integer(b)) => a.cmp(b),
            (FieldValue::Integer(a), Literal::Float(b)) => (a as f64).partial_cmp(b)?,
            (FieldValue::Float(a), Literal::Integer(b)) => a.partial_cmp(&(*b as f64))?,
            (FieldValue::Float(a), Literal::Float(b)) => a.partial_cmp(b)?,
            (FieldValue::Bool(a), Literal::Bool(b)) => a.cmp(b),
            (FieldValue::Text(a), Literal::Text(b)) => a.cmp(b.as_str()),
            _ => return None,
        };
        Some(self.op.holds(ordering))
    }
}

fn quoted(s: &str) -> Option<&str> {
    ['\'', '"']
        .iter()
        .find_map(|q| s.strip_prefix(*q)?.strip_suffix(*q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_parse_and_hold() {
        let ge = ValueCheck::parse(">= 0").unwrap();
        assert_eq!(ge.holds(FieldValue::Integer(0)), Some(true));
        assert_eq!(ge.holds(FieldValue::Integer(-1)), Some(false));
        assert_eq!(ge.holds(FieldValue::Float(0.5)), Some(true));
        let ne = ValueCheck::parse("!= ''").unwrap();
        assert_eq!(ne.holds(FieldValue::Text("")), Some(false));
        assert_eq!(ne.holds(FieldValue::Text("x")), Some(true));
        let t = ValueCheck::parse("==true").unwrap();
        assert_eq!(t.holds(FieldValue::Bool(true)), Some(true));
        assert_eq!(t.holds(FieldValue::Integer(1)), None);
        let big = ValueCheck::parse("< 18446744073709551615").unwrap();
        assert_eq!(
            big.holds(FieldValue::Integer(u64::MAX as i128)),
            Some(false)
        );
        assert_eq!(ValueCheck::parse("> 1.5").unwrap().op, CompareOp::Gt);
    }

    #[test]
    fn bad_checks_name_what_is_wrong() {
        for bad in ["0", "=> 1", ">= ", ">= zero", "== 'open"] {
            let e = ValueCheck::parse(bad).unwrap_err();
            assert!(e.contains(bad.trim()), "{bad}: {e}");
        }
    }
}
