//! The QUIC knobs of [`bench_core::Tuning`], applied the same way on both sides.

use std::sync::Arc;
use std::time::Duration;

use bench_core::Tuning;

/// Unidirectional streams a peer may have open at once. HTTP/3 opens three per side (control,
/// QPACK encoder and decoder) plus the odd reserved "grease" stream; quinn keeps state for
/// every permitted stream, and its default of 100 is room for server push, which is not used.
pub const MAX_CONCURRENT_UNI_STREAMS: u32 = 8;

/// quinn's transport config with the study's knobs applied; `streams` is the concurrent
/// bidirectional stream limit the peer may open.
pub fn transport_config(tuning: &Tuning, streams: u32) -> Arc<quinn::TransportConfig> {
    let mut transport = quinn::TransportConfig::default();
    transport.max_concurrent_bidi_streams(streams.into());
    transport.max_concurrent_uni_streams(MAX_CONCURRENT_UNI_STREAMS.into());

    if let Some(ms) = tuning.quic_initial_rtt_ms {
        transport.initial_rtt(Duration::from_millis(ms));
    }
    if tuning.quic_offload == Some(false) {
        transport.enable_segmentation_offload(false);
    }
    if tuning.quic_mtu_discovery == Some(false) {
        transport.mtu_discovery_config(None);
    }
    if let Some(window) = tuning.quic_receive_window {
        let window = quinn::VarInt::from_u64(window).unwrap_or(quinn::VarInt::MAX);
        transport.receive_window(window);
        transport.stream_receive_window(window);
    }
    Arc::new(transport)
}

/// Applies the UDP buffer sizes to a socket before quinn takes it.
pub fn size_buffers(socket: &std::net::UdpSocket, tuning: &Tuning) -> std::io::Result<()> {
    if let Some(bytes) = tuning.udp_buffer_bytes {
        let s = socket2::SockRef::from(socket);
        s.set_recv_buffer_size(bytes)?;
        s.set_send_buffer_size(bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offload_off_reaches_the_transport_config() {
        let on = format!("{:?}", transport_config(&Tuning::default(), 1));
        assert!(on.contains("enable_segmentation_offload: true"), "{on}");
        let tuning = Tuning {
            quic_offload: Some(false),
            ..Default::default()
        };
        let off = format!("{:?}", transport_config(&tuning, 1));
        assert!(off.contains("enable_segmentation_offload: false"), "{off}");
    }
}
