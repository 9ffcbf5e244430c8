//! Stack labels and order for the runner's report: the registry's stacks, as every manifest
//! records them ([`crate::output::registered_stacks`]), through the readers' one definition
//! ([`results::labels::Stacks`]).

use results::labels::Stacks;
use results::rows::CellRow;

/// The registered stacks as the manifest records them.
pub fn stacks() -> Stacks {
    Stacks::new(crate::output::registered_stacks())
}

/// The stack's label from the registry (its name when the registry does not know it).
pub fn label(stack: &str) -> String {
    stacks().label(stack)
}

/// Stacks in registry order, then any unknown ones.
pub fn stack_order(rows: &[&CellRow]) -> Vec<String> {
    stacks().order(rows)
}
