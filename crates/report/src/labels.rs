//! The stacks the report names, as the run's manifest records them (name, label, registry
//! order): labels, order and palette places come from the run, never from a list of the
//! report's own. [`with`] sets them for one page or comparison; [`label`], [`stack_order`]
//! and [`names`] read them (a stack no manifest lists keeps its name and follows the others).

use std::cell::RefCell;

use results::labels::Stacks;
use results::rows::CellRow;

thread_local! {
    static STACKS: RefCell<Stacks> = RefCell::new(Stacks::default());
}

/// Runs `f` with `stacks` as the stacks the report names.
pub fn with<R>(stacks: Stacks, f: impl FnOnce() -> R) -> R {
    let before = STACKS.replace(stacks);
    let out = f();
    STACKS.set(before);
    out
}

/// The stack's label (its name when the run did not record it).
pub fn label(stack: &str) -> String {
    STACKS.with_borrow(|s| s.label(stack))
}

/// The stacks of `rows` in the run's order, then any unknown ones.
pub fn stack_order(rows: &[&CellRow]) -> Vec<String> {
    STACKS.with_borrow(|s| s.order(rows))
}

/// Every stack the run recorded, in its order.
pub fn names() -> Vec<String> {
    STACKS.with_borrow(|s| s.names().into_iter().map(String::from).collect())
}
