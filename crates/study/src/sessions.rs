//! Sessions of one reproduction (`scripts/reproduce-paper --sessions N`): the reference and
//! every claim run once per session, in `results/sessions/s<K>/{reference,claims/<name>}`, all at
//! one commit. The paper reads session 1 (what `results/reference` and `results/claims/*` link
//! to); with two or more sessions at that commit, headline figures also get an interval over
//! the session means and each verdict says in how many sessions it held.

use std::path::PathBuf;

use crate::provenance::Provenance;
use crate::run::{fval, Run, ELAPSED_RPS, STEADY_RPS};
use crate::Row;

/// The sessions next to a reference run, in index order.
pub(crate) struct Sessions {
    /// (K, `…/s<K>`), every one with a reference run at the commit of the paper's reference.
    pub(crate) dirs: Vec<(u32, PathBuf)>,
}

impl Sessions {
    /// The sessions the reference belongs to: its real path is `<root>/s<K>/reference` and
    /// `<root>` holds at least two `s<N>` folders whose reference ran at `reference`'s commit.
    /// Sessions of other commits are left out (they are other code).
    pub(crate) fn discover(reference: &Run, reference_prov: &Provenance) -> Option<Sessions> {
        let real = reference.dir.canonicalize().ok()?;
        if real.file_name()? != "reference" {
            return None;
        }
        let root = real.parent()?.parent()?;
        let mut dirs: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
            .ok()?
            .filter_map(|e| {
                let path = e.ok()?.path();
                let k: u32 = path
                    .file_name()?
                    .to_str()?
                    .strip_prefix('s')?
                    .parse()
                    .ok()?;
                let run = Run::load(&path.join("reference")).ok()?;
                (run.provenance().commit == reference_prov.commit).then_some((k, path))
            })
            .collect();
        dirs.sort();
        (dirs.len() >= 2).then_some(Sessions { dirs })
    }

    /// The same claim run in every session (by its folder name), loaded; a session without
    /// it is left out.
    pub(crate) fn claim_runs(&self, run: &Run) -> Vec<(u32, Run)> {
        let Some(name) = run.dir.file_name() else {
            return Vec::new();
        };
        self.dirs
            .iter()
            .filter_map(|(k, dir)| {
                let run = Run::load(&dir.join("claims").join(name)).ok()?;
                Some((*k, run))
            })
            .collect()
    }

    /// Every session's reference run, loaded, in session order (one that cannot be read is
    /// left out).
    pub(crate) fn reference_runs(&self) -> Vec<Run> {
        self.dirs
            .iter()
            .filter_map(|(_, dir)| Run::load(&dir.join("reference")).ok())
            .collect()
    }

    pub(crate) fn count(&self) -> usize {
        self.dirs.len()
    }
}

/// One repetition's throughput as the paper compares it: steady-state when its window is
/// valid ([`runner::output::rows::CellRow::steady_valid`]), else `ok / elapsed_s`.
pub(crate) fn repetition_rate(r: &Row) -> Option<f64> {
    match fval(r, STEADY_RPS) {
        Some(v) if r.steady_valid() => Some(v),
        _ => fval(r, ELAPSED_RPS),
    }
}

/// The first word of a verdict ("confirmed", "exceeded", "not reproduced", …): what must be
/// the same in every session for the verdict to be called stable.
pub(crate) fn verdict_kind(verdict: &str) -> &str {
    let end = verdict.find([':', '(', ';', '[']).unwrap_or(verdict.len());
    verdict[..end].trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_kind_is_its_leading_words() {
        assert_eq!(
            verdict_kind("not reproduced: up to 2,589 req/s"),
            "not reproduced"
        );
        assert_eq!(
            verdict_kind("exceeded (92,407 vs ≈ 26,000 req/s)"),
            "exceeded"
        );
        assert_eq!(verdict_kind("no collapse"), "no collapse");
    }
}
