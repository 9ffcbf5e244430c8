//! What the sections outside the plan's judged part quote of the study's claims: the
//! instruction breakdown explains the ceiling claim (C4) and the memory claim (C5), and the mesh
//! section reads a collapse by C2's bound. The claims themselves, their rules and their verdicts
//! are the plan's (`experiments/study/plan.toml`); a test keeps these figures equal to it.

/// The memory claim's soak (`experiments/claims/soak-quic-rss.toml`): one long cell whose RSS
/// series shows whether memory levels off.
pub(crate) const SOAK_RUN: &str = "soak-quic-rss";

/// New-connection success below this is a collapse in the mesh section: the bound of the
/// plan's C2 collapse rules.
pub(crate) const COLLAPSE_BELOW: f64 = 0.5;

/// The claims the instruction breakdown explains, and the figure it holds the cost against.
pub(crate) struct BreakdownFocus {
    /// The stack explained; the breakdown's other stack is its TCP counterpart.
    pub(crate) stack: &'static str,
    /// The ceiling claim ("C4") and its short form.
    pub(crate) cap_id: &'static str,
    pub(crate) cap_short: &'static str,
    /// The top of the claimed range: new connections per second the cap allows.
    pub(crate) cap_high_rps: f64,
    /// The memory claim ("C5") and its short form.
    pub(crate) memory_id: &'static str,
    pub(crate) memory_short: &'static str,
}

/// The breakdown's focus: C4 (HTTP/3 capped at 36–39 req/s) and C5 (QUIC's RSS 12× gRPC's).
pub(crate) fn breakdown_focus() -> BreakdownFocus {
    BreakdownFocus {
        stack: "h3",
        cap_id: "C4",
        cap_short: "HTTP/3 capped at 36–39 req/s under new connections",
        cap_high_rps: 39.0,
        memory_id: "C5",
        memory_short: "QUIC RSS 12× gRPC's",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Op, Plan};
    use std::path::PathBuf;

    fn plan() -> Plan {
        Plan::load(
            &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments/study/plan.toml"),
        )
        .unwrap()
    }

    #[test]
    fn the_quoted_figures_are_the_plans() {
        let plan = plan();
        let claim = |id: &str| plan.claims.iter().find(|c| c.id == id).unwrap();
        let focus = breakdown_focus();
        assert!(claim(focus.cap_id).statement.contains("36–39 req/s"));
        assert!(claim(focus.memory_id).statement.contains("12×"));
        // C4's rule is the claimed top with 10 % of room.
        let cap = plan
            .rules
            .iter()
            .find(|r| r.claim == focus.cap_id && r.subject.stack == focus.stack)
            .unwrap();
        assert_eq!(cap.test.op, Op::AtMost);
        assert!((cap.test.value.unwrap() - focus.cap_high_rps * 1.1).abs() < 1e-9);
        // Every collapse rule of C2 on one stack's success uses the mesh section's bound.
        let collapse: Vec<_> = plan
            .rules
            .iter()
            .filter(|r| r.claim == "C2" && r.versus.is_none() && r.test.op == Op::Below)
            .filter(|r| r.labels.holds == "collapsed")
            .collect();
        assert!(!collapse.is_empty());
        for r in collapse {
            assert_eq!(r.test.value, Some(COLLAPSE_BELOW), "{}", r.id);
        }
    }
}
