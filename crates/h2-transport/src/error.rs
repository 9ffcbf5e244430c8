//! Typed HTTP/2 errors (RFC 9113 §5.4, §7): the code a connection error sends in GOAWAY and a
//! stream error in RST_STREAM is chosen where the error is detected, not recovered later
//! from its text.

use std::borrow::Cow;
use std::fmt;

/// RFC 9113 §7.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ErrorCode {
    NoError = 0x0,
    ProtocolError = 0x1,
    InternalError = 0x2,
    FlowControlError = 0x3,
    SettingsTimeout = 0x4,
    StreamClosed = 0x5,
    FrameSizeError = 0x6,
    RefusedStream = 0x7,
    Cancel = 0x8,
    CompressionError = 0x9,
    ConnectError = 0xa,
    EnhanceYourCalm = 0xb,
    InadequateSecurity = 0xc,
    Http11Required = 0xd,
}

impl ErrorCode {
    const ALL: [ErrorCode; 14] = [
        ErrorCode::NoError,
        ErrorCode::ProtocolError,
        ErrorCode::InternalError,
        ErrorCode::FlowControlError,
        ErrorCode::SettingsTimeout,
        ErrorCode::StreamClosed,
        ErrorCode::FrameSizeError,
        ErrorCode::RefusedStream,
        ErrorCode::Cancel,
        ErrorCode::CompressionError,
        ErrorCode::ConnectError,
        ErrorCode::EnhanceYourCalm,
        ErrorCode::InadequateSecurity,
        ErrorCode::Http11Required,
    ];

    /// A received code; unknown codes have no special meaning (RFC 9113 §7).
    pub fn from_u32(code: u32) -> Option<ErrorCode> {
        Self::ALL.get(code as usize).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::NoError => "NO_ERROR",
            ErrorCode::ProtocolError => "PROTOCOL_ERROR",
            ErrorCode::InternalError => "INTERNAL_ERROR",
            ErrorCode::FlowControlError => "FLOW_CONTROL_ERROR",
            ErrorCode::SettingsTimeout => "SETTINGS_TIMEOUT",
            ErrorCode::StreamClosed => "STREAM_CLOSED",
            ErrorCode::FrameSizeError => "FRAME_SIZE_ERROR",
            ErrorCode::RefusedStream => "REFUSED_STREAM",
            ErrorCode::Cancel => "CANCEL",
            ErrorCode::CompressionError => "COMPRESSION_ERROR",
            ErrorCode::ConnectError => "CONNECT_ERROR",
            ErrorCode::EnhanceYourCalm => "ENHANCE_YOUR_CALM",
            ErrorCode::InadequateSecurity => "INADEQUATE_SECURITY",
            ErrorCode::Http11Required => "HTTP_1_1_REQUIRED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A received error code's name, known or not.
pub fn code_name(code: u32) -> Cow<'static, str> {
    match ErrorCode::from_u32(code) {
        Some(c) => Cow::Borrowed(c.name()),
        None => Cow::Owned(format!("error code {code:#x}")),
    }
}

/// A connection error we detected: the connection ends with GOAWAY(`code`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("HTTP/2 connection error {code}: {reason}")]
pub struct ConnError {
    pub code: ErrorCode,
    pub reason: Cow<'static, str>,
}

impl ConnError {
    pub fn new(code: ErrorCode, reason: impl Into<Cow<'static, str>>) -> Self {
        ConnError {
            code,
            reason: reason.into(),
        }
    }

    pub fn protocol(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorCode::ProtocolError, reason)
    }

    pub fn frame_size(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorCode::FrameSizeError, reason)
    }
}

/// A stream error we detected: the stream ends with RST_STREAM(`code`), the connection goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("HTTP/2 stream error {code}: {reason}")]
pub struct StreamError {
    pub code: ErrorCode,
    pub reason: Cow<'static, str>,
}

impl StreamError {
    pub fn new(code: ErrorCode, reason: impl Into<Cow<'static, str>>) -> Self {
        StreamError {
            code,
            reason: reason.into(),
        }
    }
}
