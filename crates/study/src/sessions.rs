//! Sessions of one reproduction (`scripts/reproduce-paper --sessions N`): the reference and
//! every claim run once per session, in `results/sessions/s<K>/{reference,claims/<name>}`, all at
//! one commit. The paper reads session 1 (what `results/reference` and `results/claims/*` link
//! to); with two or more sessions at that commit, headline figures also get an interval over
//! the session means and each verdict says in how many sessions it came out the same.

use std::path::{Path, PathBuf};

use crate::provenance::Provenance;
use crate::run::{fval, Run, ELAPSED_RPS, STEADY_RPS};
use results::rows::CellRow as Row;

/// The sessions next to a reference run, in index order.
pub(crate) struct Sessions {
    /// (K, `…/s<K>`), every one with a reference run at the commit of the paper's reference.
    pub(crate) dirs: Vec<(u32, PathBuf)>,
    /// Each session's folder as the paper names it, in `dirs`' order: relative to the
    /// reference path as given (`results/sessions/s1` for `results/reference`), so the text
    /// does not depend on where the checkout lies.
    pub(crate) shown: Vec<String>,
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
        let shown = dirs
            .iter()
            .map(|(_, dir)| shown_path(&reference.dir, dir))
            .collect();
        (dirs.len() >= 2).then_some(Sessions { dirs, shown })
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

    /// The runs of every session but the reference's own, loaded: each one's reference run,
    /// then its runs of the same names as `claims`. The threats count cells over these and the
    /// paper's own runs together, so no session's cells are left out of a count.
    pub(crate) fn other_sessions_runs(&self, reference: &Run, claims: &[Run]) -> Vec<Run> {
        let own = reference
            .dir
            .canonicalize()
            .ok()
            .and_then(|real| real.parent().map(Path::to_path_buf));
        self.dirs
            .iter()
            .filter(|(_, dir)| dir.canonicalize().ok() != own)
            .flat_map(|(_, dir)| {
                let names = claims.iter().filter_map(|c| c.dir.file_name());
                std::iter::once(dir.join("reference"))
                    .chain(names.map(|name| dir.join("claims").join(name)))
                    .filter_map(|path| Run::load(&path).ok())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    pub(crate) fn count(&self) -> usize {
        self.dirs.len()
    }

    /// Each session's machine (CPU model, cores, kernel) as its reference run's manifest
    /// records it, with the session's folder as the paper names it.
    pub(crate) fn machines(&self) -> Vec<(String, String)> {
        self.dirs
            .iter()
            .zip(&self.shown)
            .filter_map(|((_, dir), shown)| {
                let p = Run::load(&dir.join("reference")).ok()?.provenance();
                Some((shown.clone(), machine_of(&p)))
            })
            .collect()
    }
}

/// A machine as the paper names it: CPU model, cores and kernel.
pub(crate) fn machine_of(p: &Provenance) -> String {
    format!("{}, {} cores, kernel {}", p.cpu(), p.cores, p.kernel)
}

/// When the sessions did not all run on one machine, the sentence that says which ran where
/// (`None` when they share one): sessions on other hardware make a between-session interval
/// cover the change of machine too.
pub(crate) fn machines_differ(machines: &[(String, String)]) -> Option<String> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for (session, machine) in machines {
        match groups.iter_mut().find(|g| g.0 == machine) {
            Some(g) => g.1.push(session),
            None => groups.push((machine, vec![session])),
        }
    }
    (groups.len() > 1).then(|| {
        let parts: Vec<String> = groups
            .iter()
            .map(|(machine, sessions)| {
                let named: Vec<String> = sessions.iter().map(|s| format!("`{s}`")).collect();
                format!("{} on {machine}", named.join(", "))
            })
            .collect();
        format!(
            "The sessions did not all run on one machine: {}. A bound over session means (a mean, a throughput ratio) therefore also covers the change of machine, and is wider for it; a proportion pools counts, and each session's own verdict compares stacks on one machine.",
            parts.join("; ")
        )
    })
}

/// `dir` (a real path) as seen from the reference path as given: the nearer of the two
/// folders above `reference` whose real path holds `dir`, joined with the rest of `dir` below it
/// (`results/sessions/s2` for `results/reference` or `results/sessions/s1/reference`); else
/// the last two components of `dir` (`sessions/s2`), which name a session without a path
/// that depends on the machine.
fn shown_path(reference: &Path, dir: &Path) -> String {
    let given = reference.parent().unwrap_or(Path::new(""));
    // The reference's folder and the one above it: sessions are `…/sessions/s<K>` siblings.
    for folder in given.ancestors().take(2) {
        let real = if folder.as_os_str().is_empty() {
            Path::new(".").canonicalize()
        } else {
            folder.canonicalize()
        };
        let Some(rest) = real
            .ok()
            .and_then(|r| dir.strip_prefix(r).ok().map(Path::to_path_buf))
        else {
            continue;
        };
        let shown = if rest.as_os_str().is_empty() {
            folder.to_path_buf()
        } else {
            folder.join(rest)
        };
        return shown.display().to_string();
    }
    let mut tail: Vec<_> = dir.components().rev().take(2).collect();
    tail.reverse();
    tail.iter().collect::<PathBuf>().display().to_string()
}

/// One repetition's throughput as the paper compares it: steady-state when its window is
/// valid ([`results::rows::CellRow::steady_valid`]), else `ok / elapsed_s`.
pub(crate) fn repetition_rate(r: &Row) -> Option<f64> {
    match fval(r, STEADY_RPS) {
        Some(v) if r.steady_valid() => Some(v),
        _ => fval(r, ELAPSED_RPS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_on_different_machines_are_named_and_one_machine_says_nothing() {
        let m = |s: &str, cpu: &str| (s.to_string(), cpu.to_string());
        assert_eq!(
            machines_differ(&[m("s1", "AMD EPYC"), m("s2", "AMD EPYC")]),
            None
        );
        let text = machines_differ(&[
            m("s1", "AMD EPYC"),
            m("s2", "AMD EPYC"),
            m("s3", "Intel Xeon"),
        ])
        .unwrap();
        assert!(
            text.contains("`s1`, `s2` on AMD EPYC; `s3` on Intel Xeon"),
            "{text}"
        );
    }

    #[test]
    fn a_session_is_named_from_the_reference_path_as_given_not_the_real_one() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("checkout-a");
        std::fs::create_dir_all(real.join("results/sessions/s2/reference")).unwrap();
        let link = tmp.path().join("elsewhere");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let dir = real.join("results/sessions/s2").canonicalize().unwrap();
        let given = link.join("results/reference");
        assert_eq!(
            shown_path(&given, &dir),
            link.join("results/sessions/s2").display().to_string()
        );
        // Given as a session's own reference: its siblings are named from their common folder.
        let s1 = link.join("results/sessions/s1/reference");
        std::fs::create_dir_all(real.join("results/sessions/s1/reference")).unwrap();
        assert_eq!(
            shown_path(&s1, &dir),
            link.join("results/sessions/s2").display().to_string()
        );
        let s1_real = real.join("results/sessions/s1").canonicalize().unwrap();
        assert_eq!(
            shown_path(&s1, &s1_real),
            link.join("results/sessions/s1").display().to_string()
        );
        // A session outside the reference's folder: its last two components.
        let other = tmp.path().join("other/sessions/s3");
        std::fs::create_dir_all(&other).unwrap();
        assert_eq!(
            shown_path(&given, &other.canonicalize().unwrap()),
            "sessions/s3"
        );
    }
}
